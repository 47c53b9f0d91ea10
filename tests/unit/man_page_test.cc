// The manual pages are written from the flag tables (launcher/flags/man_page.h): every flag the
// programs accept is on its page, in both spellings, with its default and variables; the text is
// escaped so that roff prints it as it is. (scripts/check-deb.sh has lintian render the pages
// with man's own warnings on.)
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "launcher/flags/man_page.h"
#include "launcher/launch_flags/launch_flags.h"
#include "launcher/master/master_flags.h"
#include "tests/unit/flag_docs_sample.h"

namespace {

using mxrun::FlagSpec;
using mxrun::ManBlock;
using mxrun::ManPage;
using mxrun::ManPageText;
using mxrun::ProgramFlags;
using mxrun::RoffEscape;

// Every line that roff reads as a request must be one of the macros the writer means to use:
// text that begins with '.' or '\'' unescaped would be swallowed as an unknown request.
void RequireOnlyKnownRequests(const std::string& page) {
  static const std::set<std::string> known = {".TH", ".SH", ".TP", ".PP", ".RS", ".RE",
                                              ".nf", ".fi", ".br", ".nh", ".ad", ".\\\""};
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (line.empty() || (line.front() != '.' && line.front() != '\'')) continue;
    const std::string request(line.substr(0, line.find(' ')));
    INFO(line);
    CHECK(known.count(request) == 1);
  }
}

TEST_CASE("roff escaping keeps text as it is: minus signs, backslashes, leading dots") {
  CHECK(RoffEscape("--nproc-per-node") == "\\-\\-nproc\\-per\\-node");
  CHECK(RoffEscape("C:\\path") == "C:\\epath");
  CHECK(RoffEscape(".hidden file") == "\\&.hidden file");
  CHECK(RoffEscape("'quoted") == "\\&'quoted");
  CHECK(RoffEscape("plain words") == "plain words");
}

TEST_CASE("a flag's entry: both spellings, its value, default, variables and config key") {
  const std::string page = ManPage(mxrun::testing::SampleProgram(), mxrun::testing::SampleFlags(),
                                   mxrun::testing::SampleText(".starts with a dot"));
  INFO(page);
  CHECK(absl::StartsWith(page, ".\\\" Written by prog's flag table"));
  CHECK(absl::StrContains(page, ".TH PROG 1 \"2026\\-12\\-06\" \"prog 1.2\" \"User Commands\"\n"));
  CHECK(absl::StrContains(page, ".SH NAME\nprog \\- a test program\n"));
  CHECK(absl::StrContains(page,
                          "\\fB\\-\\-nproc_per_node\\fR, \\fB\\-\\-nproc\\-per\\-node\\fR "
                          "\\fIVALUE\\fR\nworkers per node.\n"));
  CHECK(absl::StrContains(page,
                          "Default: 1. Environment: PROG_NPROC_PER_NODE, "
                          "OLD_NPROC_PER_NODE, NPROCS. Config file key: nproc_per_node.\n"));
  // A switch takes no value and, off the file, has no key; a value that may be left out is shown
  // in brackets.
  CHECK(absl::StrContains(page, ".TP\n\\fB\\-s\\fR, \\fB\\-\\-standalone\\fR\n"));
  CHECK(absl::StrContains(page, "Environment: PROG_STANDALONE, OLD_STANDALONE.\n"));
  CHECK(absl::StrContains(page, "\\fB\\-\\-watch\\fR [\\fIVALUE\\fR]\n"));
  CHECK(absl::StrContains(page, "Given alone: 2."));
  // An environment-only setting is under ENVIRONMENT, not OPTIONS.
  const size_t environment = page.find(".SH ENVIRONMENT");
  REQUIRE(environment != std::string::npos);
  CHECK(page.find("TORCHELASTIC_USE_AGENT_STORE") > environment);
  CHECK(!absl::StrContains(page, "use_agent_store"));
  CHECK(absl::StrContains(page, "\\fBPROG_<FLAG>\\fR or \\fBOLD_<FLAG>\\fR"));
  // The caller's sections, in order around the flags, their text escaped.
  CHECK(page.find(".SH DESCRIPTION\n\\&.starts with a dot\n") < page.find(".SH OPTIONS"));
  CHECK(page.find(".SH EXIT STATUS\n.TP\n\\fB0\\fR\nit worked\n") > environment);
  CHECK(absl::StrContains(page, ".nf\nprog \\-s x.py\nprog \\-\\-watch\n.fi\n"));
  CHECK(absl::StrContains(page, "\\fB\\-\\-version\\fR\nPrint the version and exit.\n"));
  RequireOnlyKnownRequests(page);
}

// The real tables: every flag mxrun and mxrun-master read has its entry, in each spelling.
void RequireEveryFlag(const ProgramFlags& program, const std::vector<FlagSpec>& flags) {
  const std::string page = ManPage(program, flags, mxrun::testing::BareText());
  REQUIRE(flags.size() > 5);
  for (const FlagSpec& flag : flags) {
    INFO(flag.name);
    const std::string entry = flag.env_only ? flag.stand_in_env : RoffEscape("--" + flag.name);
    CHECK(absl::StrContains(page, absl::StrCat("\\fB", entry, "\\fR")));
  }
  RequireOnlyKnownRequests(page);
}

TEST_CASE("mxrun's and mxrun-master's pages hold every flag of their tables") {
  RequireEveryFlag(mxrun::LaunchProgram(), mxrun::LaunchFlagSpecs());
  RequireEveryFlag(mxrun::MasterProgram(), mxrun::MasterFlagSpecs());
}

}  // namespace

// The guide's flag reference is written from the flag tables (launcher/flags/markdown_reference.h),
// as the manual pages are: every flag the programs accept is a heading of its own (an anchor on
// the site), in both spellings, with its default, variables and config key; the prose is escaped
// so that Markdown shows it as it is. (scripts/build-docs.sh compares the built pages' flags with
// --help's and builds the site strictly.)
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "launcher/flags/markdown_reference.h"
#include "launcher/launch_flags/launch_flags.h"
#include "launcher/master/master_flags.h"
#include "tests/unit/flag_docs_sample.h"

namespace {

using mxrun::FlagSpec;
using mxrun::ManBlock;
using mxrun::ManPageText;
using mxrun::MarkdownEscape;
using mxrun::MarkdownReference;
using mxrun::ProgramFlags;

TEST_CASE("Markdown escaping shows text as it is: emphasis, code, links, tags, tables") {
  CHECK(MarkdownEscape("rank_order") == "rank\\_order");
  CHECK(MarkdownEscape("*.log") == "\\*.log");
  CHECK(MarkdownEscape("`x` [a](b)") == "\\`x\\` \\[a\\](b)");
  CHECK(MarkdownEscape("<FLAG> a|b #1 C:\\p") == "&lt;FLAG&gt; a\\|b \\#1 C:\\\\p");
  CHECK(MarkdownEscape("plain words") == "plain words");
}

TEST_CASE("a flag's reference entry: a heading with both spellings, its default, variables, key") {
  const std::string page =
      MarkdownReference(mxrun::testing::SampleProgram(), mxrun::testing::SampleFlags(),
                        mxrun::testing::SampleText("reads *.toml\nfiles"), "t");
  INFO(page);
  CHECK(absl::StartsWith(page, "# prog: a test program\n"));
  CHECK(absl::StrContains(page, "<!-- Written by t from prog's flag table"));
  CHECK(absl::StrContains(page, "```\nprog [OPTIONS] ENTRYPOINT\n```\n"));
  CHECK(absl::StrContains(page,
                          "\n### `--nproc_per_node`, `--nproc-per-node` VALUE\n\n"
                          "workers per node.\n\ndefault `1`; environment "
                          "`PROG_NPROC_PER_NODE`, `OLD_NPROC_PER_NODE`, `NPROCS`; config "
                          "file key `nproc_per_node`.\n"));
  // A switch takes no value and, off the file, has no key; a value that may be left out is shown
  // in brackets.
  CHECK(absl::StrContains(page,
                          "\n### `-s`, `--standalone`\n\na private rendezvous.\n\n"
                          "environment `PROG_STANDALONE`, `OLD_STANDALONE`.\n"));
  CHECK(absl::StrContains(page, "\n### `--watch` [VALUE]\n"));
  CHECK(absl::StrContains(page, "given alone: `2`"));
  // An environment-only setting is under Environment, not Options.
  const size_t environment = page.find("\n## Environment\n");
  REQUIRE(environment != std::string::npos);
  CHECK(page.find("TORCHELASTIC_USE_AGENT_STORE") > environment);
  CHECK(!absl::StrContains(page, "use_agent_store"));
  CHECK(absl::StrContains(page, "`PROG_<FLAG>` or `OLD_<FLAG>`"));
  // The caller's sections, in order around the flags, prose joined and escaped, examples as code.
  CHECK(page.find("\n## Description\n\nreads \\*.toml files\n") < page.find("\n## Options\n"));
  CHECK(page.find("\n## Exit status\n\n- **0**: it worked\n") > environment);
  CHECK(absl::StrContains(page, "```sh\nprog -s x.py\nprog --watch\n```\n"));
  CHECK(absl::StrContains(page, "\n### `--version`\n\nPrint the version and exit.\n"));
}

// The real tables: every flag mxrun and mxrun-master read has its heading.
void RequireEveryFlag(const ProgramFlags& program, const std::vector<FlagSpec>& flags) {
  const std::string page = MarkdownReference(program, flags, mxrun::testing::BareText(), "t");
  REQUIRE(flags.size() > 5);
  for (const FlagSpec& flag : flags) {
    INFO(flag.name);
    if (flag.env_only) {
      CHECK(absl::StrContains(page, absl::StrCat("- **`", flag.stand_in_env, "`**")));
    } else {
      CHECK(absl::StrContains(page, absl::StrCat("`--", flag.name, "`")));
    }
  }
}

TEST_CASE("mxrun's and mxrun-master's flag references hold every flag of their tables") {
  RequireEveryFlag(mxrun::LaunchProgram(), mxrun::LaunchFlagSpecs());
  RequireEveryFlag(mxrun::MasterProgram(), mxrun::MasterFlagSpecs());
}

}  // namespace

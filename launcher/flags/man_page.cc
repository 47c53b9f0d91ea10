#include "launcher/flags/man_page.h"

#include "launcher/flags/flag_doc_facts.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace mxrun {
namespace {

std::string Bold(absl::string_view text) { return absl::StrCat("\\fB", RoffEscape(text), "\\fR"); }
std::string Italic(absl::string_view text) {
  return absl::StrCat("\\fI", RoffEscape(text), "\\fR");
}

// A run of prose: one roff line per source line, each escaped (roff fills them together).
void AppendText(std::string& out, absl::string_view text) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::StrAppend(&out, RoffEscape(absl::StripAsciiWhitespace(line)), "\n");
  }
}

void AppendSection(std::string& out, const ManSection& section) {
  absl::StrAppend(&out, ".SH ", RoffEscape(absl::AsciiStrToUpper(section.title)), "\n");
  bool first = true;
  for (const ManBlock& block : section.blocks) {
    switch (block.kind) {
      case ManBlock::Kind::kParagraph:
        if (!first) out += ".PP\n";
        AppendText(out, block.text);
        break;
      case ManBlock::Kind::kTagged:
        absl::StrAppend(&out, ".TP\n", Bold(block.tag), "\n");
        AppendText(out, block.text);
        break;
      case ManBlock::Kind::kExample:
        out += ".PP\n.RS 4\n.nf\n";
        for (absl::string_view line : absl::StrSplit(block.text, '\n')) {
          absl::StrAppend(&out, RoffEscape(line), "\n");
        }
        out += ".fi\n.RE\n";
        break;
    }
    first = false;
  }
}

// "--nproc_per_node, --nproc-per-node VALUE" in bold and italics.
std::string FlagNames(const FlagSpec& flag) {
  std::vector<std::string> names;
  for (const std::string& name : FlagSpellings(flag)) names.push_back(Bold(name));
  std::string out = absl::StrJoin(names, ", ");
  if (!flag.boolean) {
    const std::string value = Italic("VALUE");
    absl::StrAppend(&out, " ", flag.implicit_value.empty() ? value : absl::StrCat("[", value, "]"));
  }
  return out;
}

void AppendFlag(std::string& out, const ProgramFlags& program, const FlagSpec& flag) {
  absl::StrAppend(&out, ".TP\n", FlagNames(flag), "\n");
  AppendText(out, absl::StrCat(flag.help, "."));
  std::vector<std::string> facts;
  if (!flag.default_value.empty()) facts.push_back(absl::StrCat("Default: ", flag.default_value));
  if (!flag.implicit_value.empty()) {
    facts.push_back(absl::StrCat("Given alone: ", flag.implicit_value));
  }
  const std::vector<std::string> variables = FlagVariables(program, flag);
  if (!variables.empty()) {
    facts.push_back(absl::StrCat("Environment: ", absl::StrJoin(variables, ", ")));
  }
  if (flag.file_key) {
    facts.push_back(absl::StrCat("Config file key: ", flag.name,
                                 flag.key_value_list ? " (a string k=v,k=v, or a table)" : ""));
  }
  if (!facts.empty()) {
    out += ".br\n";
    AppendText(out, absl::StrCat(absl::StrJoin(facts, ". "), "."));
  }
}

}  // namespace

std::string RoffEscape(absl::string_view text) {
  std::string out = absl::StrReplaceAll(text, {{"\\", "\\e"}, {"-", "\\-"}});
  if (!out.empty() && (out.front() == '.' || out.front() == '\'')) out.insert(0, "\\&");
  return out;
}

std::string ManPage(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                    const ManPageText& text) {
  const std::string version = program.version.empty() ? program.name : program.version;
  std::string out =
      absl::StrCat(".\\\" Written by ", RoffEscape(program.name),
                   "'s flag table (launcher/flags/man_page.h): edit that, not this.\n", ".TH ",
                   absl::AsciiStrToUpper(RoffEscape(program.name)), " 1 \"", RoffEscape(text.date),
                   "\" \"", RoffEscape(version), "\" \"User Commands\"\n");
  out += ".nh\n.ad l\n";  // never hyphenated, left-aligned: flag names stay whole and searchable
  absl::StrAppend(&out, ".SH NAME\n", RoffEscape(program.name), " \\- ", RoffEscape(text.summary),
                  "\n.SH SYNOPSIS\n", Bold(program.name), " ", RoffEscape(text.synopsis), "\n");
  for (const ManSection& section : text.before_options) AppendSection(out, section);

  out += ".SH OPTIONS\n";
  const DocumentedFlags by_place = ByPlace(flags);
  for (const FlagSpec* flag : by_place.options) AppendFlag(out, program, *flag);
  absl::StrAppend(&out, ".TP\n", Bold("-h"), ", ", Bold("--help"), "\nPrint the flags and exit.\n");
  if (!program.version.empty()) {
    absl::StrAppend(&out, ".TP\n", Bold("--version"), "\nPrint the version and exit.\n");
  }

  out += ".SH ENVIRONMENT\n";
  absl::StrAppend(
      &out, EnvironmentIntro(program, [](const std::string& pattern) { return Bold(pattern); }),
      "\n");
  AppendText(out, absl::StrCat("Precedence: ", program.precedence, "."));
  for (const FlagSpec* flag : by_place.env_only) {
    absl::StrAppend(&out, ".TP\n", Bold(flag->stand_in_env), "\n");
    AppendText(out, absl::StrCat(flag->help, "."));
  }
  for (const ManSection& section : text.after_options) AppendSection(out, section);
  return out;
}

}  // namespace mxrun

#include "launcher/flags/markdown_reference.h"

#include "launcher/flags/flag_doc_facts.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"

namespace mxrun {
namespace {

std::string Code(absl::string_view text) { return absl::StrCat("`", text, "`"); }

// Prose lines joined into one paragraph (the manual page's source breaks lines for roff).
std::string Paragraph(absl::string_view text) {
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    lines.push_back(MarkdownEscape(absl::StripAsciiWhitespace(line)));
  }
  return absl::StrJoin(lines, " ");
}

void AppendSection(std::string& out, const ManSection& section) {
  absl::StrAppend(&out, "\n## ", MarkdownEscape(section.title), "\n");
  for (const ManBlock& block : section.blocks) {
    switch (block.kind) {
      case ManBlock::Kind::kParagraph:
        absl::StrAppend(&out, "\n", Paragraph(block.text), "\n");
        break;
      case ManBlock::Kind::kTagged:
        absl::StrAppend(&out, "\n- **", MarkdownEscape(block.tag), "**: ", Paragraph(block.text),
                        "\n");
        break;
      case ManBlock::Kind::kExample:
        absl::StrAppend(&out, "\n```sh\n", block.text, "\n```\n");
        break;
    }
  }
}

// "`--nproc_per_node`, `--nproc-per-node` VALUE": the flag's heading.
std::string FlagHeading(const FlagSpec& flag) {
  std::vector<std::string> names;
  for (const std::string& name : FlagSpellings(flag)) names.push_back(Code(name));
  std::string heading = absl::StrJoin(names, ", ");
  if (!flag.boolean) absl::StrAppend(&heading, flag.implicit_value.empty() ? " VALUE" : " [VALUE]");
  return heading;
}

void AppendFlag(std::string& out, const ProgramFlags& program, const FlagSpec& flag) {
  absl::StrAppend(&out, "\n### ", FlagHeading(flag), "\n\n", Paragraph(flag.help), ".\n");
  std::vector<std::string> facts;
  if (!flag.default_value.empty())
    facts.push_back(absl::StrCat("default ", Code(flag.default_value)));
  if (!flag.implicit_value.empty()) {
    facts.push_back(absl::StrCat("given alone: ", Code(flag.implicit_value)));
  }
  std::vector<std::string> variables;
  const std::string upper = absl::AsciiStrToUpper(flag.name);
  for (const std::string& prefix : program.env_prefixes) variables.push_back(Code(prefix + upper));
  if (!flag.stand_in_env.empty()) variables.push_back(Code(flag.stand_in_env));
  if (!variables.empty())
    facts.push_back(absl::StrCat("environment ", absl::StrJoin(variables, ", ")));
  if (flag.file_key) {
    facts.push_back(absl::StrCat("config file key ", Code(flag.name),
                                 flag.key_value_list ? " (a string k=v,k=v, or a table)" : ""));
  }
  if (!facts.empty()) absl::StrAppend(&out, "\n", absl::StrJoin(facts, "; "), ".\n");
}

}  // namespace

std::string MarkdownEscape(absl::string_view text) {
  return absl::StrReplaceAll(text, {{"\\", "\\\\"},
                                    {"`", "\\`"},
                                    {"*", "\\*"},
                                    {"_", "\\_"},
                                    {"[", "\\["},
                                    {"]", "\\]"},
                                    {"<", "&lt;"},
                                    {">", "&gt;"},
                                    {"#", "\\#"},
                                    {"|", "\\|"}});
}

std::string MarkdownReference(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                              const ManPageText& text, absl::string_view source) {
  std::string out =
      absl::StrCat("# ", MarkdownEscape(program.name), ": ", MarkdownEscape(text.summary), "\n\n",
                   "<!-- Written by ", source, " from ", program.name,
                   "'s flag table (launcher/flags/markdown_reference.h): edit that, "
                   "not this. -->\n\n",
                   "The same as `man ", program.name, "` and `", program.name,
                   " --help`, written from the same flag table.\n\n", "```\n", program.name, " ",
                   text.synopsis, "\n```\n");
  for (const ManSection& section : text.before_options) AppendSection(out, section);

  out += "\n## Options\n";
  const DocumentedFlags by_place = ByPlace(flags);
  for (const FlagSpec* flag : by_place.options) AppendFlag(out, program, *flag);
  out += "\n### `-h`, `--help`\n\nPrint the flags and exit.\n";
  if (!program.version.empty()) out += "\n### `--version`\n\nPrint the version and exit.\n";

  absl::StrAppend(
      &out, "\n## Environment\n\n",
      EnvironmentIntro(program, [](const std::string& pattern) { return Code(pattern); }));
  absl::StrAppend(&out, " Precedence: ", MarkdownEscape(program.precedence), ".\n");
  for (const FlagSpec* flag : by_place.env_only) {
    absl::StrAppend(&out, "\n- **", Code(flag->stand_in_env), "**: ", Paragraph(flag->help), ".\n");
  }
  for (const ManSection& section : text.after_options) AppendSection(out, section);
  return out;
}

}  // namespace mxrun

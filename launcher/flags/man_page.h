#pragma once
// A manual page (man(7) macros) written from a program's flag table, the one --help and
// --print-config read (flag_engine.h): `man mxrun` names exactly the flags the program accepts,
// each with its other spelling, its default, its environment variables and whether a --config
// file may give it. The prose around the flags is the caller's (launcher/man/man_pages_main.cc).

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "launcher/flags/flag_engine.h"

namespace mxrun {

// A piece of a section's prose.
struct ManBlock {
  enum class Kind {
    kParagraph,  // text, filled by man
    kTagged,     // `tag` in bold, then `text` indented below it (a list of terms)
    kExample,    // lines shown as they are (commands)
  };
  Kind kind = Kind::kParagraph;
  std::string text;
  std::string tag{};
};

struct ManSection {
  std::string title;  // "DESCRIPTION"
  std::vector<ManBlock> blocks;
};

struct ManPageText {
  std::string summary;   // NAME's words after the dash: "torchrun-compatible launcher for ..."
  std::string synopsis;  // after the program's name: "[OPTIONS] ENTRYPOINT [ARGS...]"
  std::string date;      // .TH's date, "2026-12-06"
  std::vector<ManSection> before_options;  // DESCRIPTION, ...
  std::vector<ManSection> after_options;   // EXIT STATUS, FILES, SEE ALSO, ...
};

// The page, section 1: NAME, SYNOPSIS, the sections before, OPTIONS (every flag of `flags` in
// their order; env_only settings under ENVIRONMENT instead), ENVIRONMENT (the program's prefixes
// and precedence), then the sections after.
std::string ManPage(const ProgramFlags& program, const std::vector<FlagSpec>& flags,
                    const ManPageText& text);

// Text as roff prints it literally: backslashes as \e, every '-' as \- (a minus, which man lets
// readers search and copy), and a line that would start with '.' or '\'' guarded by \&.
std::string RoffEscape(absl::string_view text);

}  // namespace mxrun

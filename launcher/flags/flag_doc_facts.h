#pragma once
// What a program's documentation says about each flag besides its help, the same for the manual
// page (man_page.h) and the site's reference (markdown_reference.h), each of which only formats
// it: the spellings, the environment variables, and the sentence on the environment prefixes.

#include <string>
#include <vector>

#include "launcher/flags/flag_engine.h"

namespace mxrun {

// A program's flags by where their documentation lists them: under OPTIONS, or (env_only
// settings, which have no flag) under ENVIRONMENT; each in the table's order.
struct DocumentedFlags {
  std::vector<const FlagSpec*> options;
  std::vector<const FlagSpec*> env_only;
};
DocumentedFlags ByPlace(const std::vector<FlagSpec>& flags);

// "-s", "--standalone"; "--nproc_per_node", "--nproc-per-node" (the dashed one when it differs).
std::vector<std::string> FlagSpellings(const FlagSpec& flag);

// The variables that give the flag, in precedence order: each prefix + NAME, then its stand-in.
std::vector<std::string> FlagVariables(const ProgramFlags& program, const FlagSpec& flag);

// The ENVIRONMENT section's opening: "Every flag above may also be given in the environment as
// A or B, the flag's name in capitals (each flag lists its variables).", where A and B are the
// program's "<PREFIX><FLAG>" patterns formatted by `format` (bold, code); or, with no prefixes,
// that the flags come from the command line and the file only.
template <typename Format>
std::string EnvironmentIntro(const ProgramFlags& program, Format format) {
  if (program.env_prefixes.empty()) {
    return "The flags are read from the command line and the configuration file only.";
  }
  std::string patterns;
  for (const std::string& prefix : program.env_prefixes) {
    if (!patterns.empty()) patterns += " or ";
    patterns += format(prefix + "<FLAG>");
  }
  return "Every flag above may also be given in the environment as " + patterns +
         ", the flag's name in capitals (each flag lists its variables).";
}

}  // namespace mxrun

#include "launcher/flags/flag_doc_facts.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"

namespace mxrun {

DocumentedFlags ByPlace(const std::vector<FlagSpec>& flags) {
  DocumentedFlags by_place;
  for (const FlagSpec& flag : flags)
    (flag.env_only ? by_place.env_only : by_place.options).push_back(&flag);
  return by_place;
}

std::vector<std::string> FlagSpellings(const FlagSpec& flag) {
  std::vector<std::string> names;
  if (!flag.short_name.empty()) names.push_back(flag.short_name);
  names.push_back(absl::StrCat("--", flag.name));
  const std::string dashed = absl::StrReplaceAll(flag.name, {{"_", "-"}});
  if (dashed != flag.name) names.push_back(absl::StrCat("--", dashed));
  return names;
}

std::vector<std::string> FlagVariables(const ProgramFlags& program, const FlagSpec& flag) {
  std::vector<std::string> variables;
  const std::string upper = absl::AsciiStrToUpper(flag.name);
  for (const std::string& prefix : program.env_prefixes) variables.push_back(prefix + upper);
  if (!flag.stand_in_env.empty()) variables.push_back(flag.stand_in_env);
  return variables;
}

}  // namespace mxrun

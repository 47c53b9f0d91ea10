#pragma once
// torchrun 2.x's --log-line-prefix-template (TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE): a console
// line prefix with the macros ${role_name}, ${rank}, ${local_rank} and ${hostname}, expanded as
// Python's string.Template.safe_substitute does it: "$name" and "${name}" are replaced when the
// name is known, "$$" is a '$', and anything else (an unknown name, a lone '$') is left as written.
// Pure.

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

std::string ExpandLinePrefix(std::string_view templ,
                             const std::map<std::string, std::string>& values);

// One line goes to a filtered file too when it contains any of `filters` (torchrun's
// --duplicate-stdout-filters: plain, case-sensitive substrings).
bool MatchesAnyFilter(std::string_view line, const std::vector<std::string>& filters);

}  // namespace mxrun

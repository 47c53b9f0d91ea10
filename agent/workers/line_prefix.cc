#include "agent/workers/line_prefix.h"

#include <cctype>

namespace mxrun {
namespace {

bool IdentifierStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool IdentifierChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

}  // namespace

std::string ExpandLinePrefix(std::string_view templ,
                             const std::map<std::string, std::string>& values) {
  std::string out;
  out.reserve(templ.size() + 16);
  size_t i = 0;
  while (i < templ.size()) {
    const char c = templ[i];
    if (c != '$' || i + 1 == templ.size()) {
      out.push_back(c);
      ++i;
      continue;
    }
    const char next = templ[i + 1];
    if (next == '$') {  // "$$" is a dollar sign
      out.push_back('$');
      i += 2;
      continue;
    }
    std::string_view name;
    size_t end = i + 1;
    if (next == '{') {
      const size_t close = templ.find('}', i + 2);
      if (close != std::string_view::npos && close > i + 2 && IdentifierStart(templ[i + 2])) {
        name = templ.substr(i + 2, close - i - 2);
        bool valid = true;
        for (char n : name) valid = valid && IdentifierChar(n);
        if (!valid) name = {};
        end = close + 1;
      }
    } else if (IdentifierStart(next)) {
      end = i + 1;
      while (end < templ.size() && IdentifierChar(templ[end])) ++end;
      name = templ.substr(i + 1, end - i - 1);
    }
    auto it = name.empty() ? values.end() : values.find(std::string(name));
    if (it == values.end()) {  // safe_substitute: left as written
      out.push_back('$');
      ++i;
      continue;
    }
    out.append(it->second);
    i = end;
  }
  return out;
}

bool MatchesAnyFilter(std::string_view line, const std::vector<std::string>& filters) {
  for (const std::string& filter : filters) {
    if (line.find(filter) != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace mxrun

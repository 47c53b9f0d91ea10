#include "launcher/script_head.h"

#include <algorithm>
#include <fstream>
#include <vector>

namespace mxrun {
namespace {

bool StartsWith(std::string_view text, std::string_view prefix) {
  return text.substr(0, prefix.size()) == prefix;
}

// The words of `line`, split at spaces and tabs.
std::vector<std::string_view> Words(std::string_view line) {
  std::vector<std::string_view> words;
  size_t at = 0;
  while (at < line.size()) {
    const size_t start = line.find_first_not_of(" \t", at);
    if (start == std::string_view::npos) break;
    const size_t end = std::min(line.find_first_of(" \t", start), line.size());
    words.push_back(line.substr(start, end - start));
    at = end;
  }
  return words;
}

std::string_view BaseName(std::string_view path) {
  const size_t slash = path.rfind('/');
  return slash == std::string_view::npos ? path : path.substr(slash + 1);
}

bool IsPythonInterpreter(std::string_view program) {
  const std::string_view name = BaseName(program);
  return StartsWith(name, "python") || StartsWith(name, "pypy") || name == "uv";
}

}  // namespace

std::optional<std::string> NotPythonReason(std::string_view head) {
  if (StartsWith(head,
                 "\x7f"
                 "ELF"))
    return "an ELF executable";
  if (!StartsWith(head, "#!")) return std::nullopt;
  std::string_view line = head.substr(2);
  line = line.substr(0, line.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::vector<std::string_view> words = Words(line);
  if (words.empty()) return std::nullopt;  // a bare "#!": the kernel would refuse it, Python not
  std::string_view program = words[0];
  if (BaseName(program) == "env") {
    // env's own options (-S, -i, -u NAME) and NAME=value assignments come before the program.
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string_view w = words[i];
      if (w == "-u" || w == "--unset" || w == "-C" || w == "--chdir") {
        ++i;
        continue;
      }
      if (StartsWith(w, "-") || w.find('=') != std::string_view::npos) continue;
      program = w;
      break;
    }
    if (BaseName(program) == "env") return std::nullopt;  // nothing after env: leave it to Python
  }
  if (IsPythonInterpreter(program)) return std::nullopt;
  return "a script for " + std::string(program) + " (its #! line)";
}

std::optional<std::string> NotPythonFileReason(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string head(256, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<size_t>(in.gcount()));
  return NotPythonReason(head);
}

}  // namespace mxrun

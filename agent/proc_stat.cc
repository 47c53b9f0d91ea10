#include "agent/proc_stat.h"

#include <charconv>
#include <cstdio>

namespace mxrun {

std::optional<ProcStat> ParseProcStat(std::string_view text) {
  const size_t open = text.find('(');
  const size_t close = text.rfind(')');
  if (open == std::string_view::npos || close == std::string_view::npos || close < open) {
    return std::nullopt;
  }
  // After ") ": the state letter, a space, the parent's pid.
  std::string_view rest = text.substr(close + 1);
  if (rest.size() < 4 || rest[0] != ' ' || rest[2] != ' ') return std::nullopt;
  ProcStat stat;
  stat.state = rest[1];
  const char* first = rest.data() + 3;
  const char* last = rest.data() + rest.size();
  if (std::from_chars(first, last, stat.ppid).ec != std::errc()) return std::nullopt;
  // starttime is the 22nd field: the 20th after the closing parenthesis.
  std::string_view fields = rest.substr(1);
  for (int field = 1; field < 20 && !fields.empty(); ++field) {
    const size_t space = fields.find(' ');
    fields = space == std::string_view::npos ? std::string_view() : fields.substr(space + 1);
  }
  if (!fields.empty()) {
    std::from_chars(fields.data(), fields.data() + fields.size(), stat.start_time);
  }
  stat.comm = std::string(text.substr(open + 1, close - open - 1));
  return stat;
}

std::optional<ProcStat> ReadProcStatFile(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return std::nullopt;
  char buffer[1024];
  const size_t n = std::fread(buffer, 1, sizeof buffer - 1, file);
  std::fclose(file);
  return ParseProcStat(std::string_view(buffer, n));
}

std::optional<ProcStat> ReadProcStat(pid_t pid) {
  return ReadProcStatFile("/proc/" + std::to_string(pid) + "/stat");
}

std::string ProcStateName(char state) {
  switch (state) {
    case 'R': return "R (running)";
    case 'S': return "S (sleeping)";
    case 'D': return "D (uninterruptible sleep: usually I/O or a driver)";
    case 'T': return "T (stopped: SIGSTOP, SIGTSTP or a debugger)";
    case 't': return "t (stopped by a tracer: a debugger)";
    case 'Z': return "Z (zombie: exited, not yet reaped)";
    case 'X': return "X (dead)";
    case 'I': return "I (idle kernel thread)";
    default: return std::string(1, state) + " (unknown)";
  }
}

}  // namespace mxrun

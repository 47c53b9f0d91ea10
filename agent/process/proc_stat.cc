#include "agent/process/proc_stat.h"

#include <charconv>
#include <cstdio>

#include "absl/strings/str_cat.h"

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
  // Fields by their number in proc(5), counting the state as 3: utime 14, stime 15,
  // starttime 22, rss 24.
  std::string_view fields = rest.substr(1);
  for (int field = 3; field <= 24 && !fields.empty(); ++field) {
    const size_t space = fields.find(' ');
    const std::string_view value = fields.substr(0, space);
    unsigned long long* target = field == 14   ? &stat.user_ticks
                                 : field == 15 ? &stat.system_ticks
                                 : field == 22 ? &stat.start_time
                                 : field == 24 ? &stat.rss_pages
                                               : nullptr;
    if (target != nullptr) std::from_chars(value.data(), value.data() + value.size(), *target);
    fields = space == std::string_view::npos ? std::string_view() : fields.substr(space + 1);
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

namespace {

// A small /proc file's text (at most 8 KiB); empty when it cannot be read.
std::string ReadProcFile(const std::string& path) {
  FILE* file = std::fopen(path.c_str(), "re");
  if (file == nullptr) return "";
  char buffer[8192];
  const size_t n = std::fread(buffer, 1, sizeof buffer, file);
  std::fclose(file);
  return std::string(buffer, n);
}

}  // namespace

std::string ReadWchan(pid_t pid) {
  std::string wchan = ReadProcFile("/proc/" + std::to_string(pid) + "/wchan");
  while (!wchan.empty() && (wchan.back() == '\n' || wchan.back() == ' ')) wchan.pop_back();
  return wchan == "0" ? "" : wchan;
}

std::vector<std::string> ParseKernelStack(std::string_view text) {
  std::vector<std::string> frames;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    // "[<0>] name+0x1d3/0x400" (the address is shown as 0 to anyone but root with kptr_restrict).
    if (const size_t bracket = line.find("] "); bracket != std::string_view::npos) {
      line = line.substr(bracket + 2);
    }
    line = line.substr(0, line.find_first_of("+ "));
    if (!line.empty()) frames.emplace_back(line);
  }
  return frames;
}

std::vector<std::string> ReadKernelStack(pid_t pid) {
  return ParseKernelStack(ReadProcFile("/proc/" + std::to_string(pid) + "/stack"));
}

std::string ProcStateName(char state) {
  switch (state) {
    case 'R':
      return "R (running)";
    case 'S':
      return "S (sleeping)";
    case 'D':
      return "D (uninterruptible sleep: usually I/O or a driver)";
    case 'T':
      return "T (stopped: SIGSTOP, SIGTSTP or a debugger)";
    case 't':
      return "t (stopped by a tracer: a debugger)";
    case 'Z':
      return "Z (zombie: exited, not yet reaped)";
    case 'X':
      return "X (dead)";
    case 'I':
      return "I (idle kernel thread)";
    default:
      return std::string(1, state) + " (unknown)";
  }
}

std::string DescribeUnreaped(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return "did not exit after SIGKILL (state unknown)";
  if (stat->state == 'D') return "did not exit after SIGKILL (uninterruptible sleep)";
  if (stat->state == 'Z') {
    return "exited but cannot be reaped (a thread of it still in uninterruptible sleep, or a "
           "tracer holding it)";
  }
  return absl::StrCat("did not exit after SIGKILL (", ProcStateName(stat->state), ")");
}

}  // namespace mxrun

#pragma once
// Reading a process's (or thread's) /proc stat line: "pid (comm) state ppid ...". comm may hold
// spaces and ')', so the fields after it are found from the last ')'.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>

namespace mxrun {

struct ProcStat {
  std::string comm;  // the executable's name, as the kernel keeps it (at most 15 bytes)
  char state = '?';  // R, S, D, T, t, Z, X, I, ...
  pid_t ppid = 0;
  unsigned long long start_time = 0;  // clock ticks after boot: with the pid, names one process
};

// Parses the text of a stat file; nullopt when it is not in that shape.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// Reads /proc/<pid>/stat, or a thread's /proc/<pid>/task/<tid>/stat when `path` is given;
// nullopt when the process is gone.
std::optional<ProcStat> ReadProcStat(pid_t pid);
std::optional<ProcStat> ReadProcStatFile(const std::string& path);

// "S (sleeping)", "T (stopped: SIGSTOP, SIGTSTP or a debugger)", ...
std::string ProcStateName(char state);

}  // namespace mxrun

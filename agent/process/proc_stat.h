#pragma once
// Reading a process's (or thread's) /proc stat line: "pid (comm) state ppid ...". comm may hold
// spaces and ')', so the fields after it are found from the last ')'.

#include <sys/types.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

struct ProcStat {
  std::string comm;  // the executable's name, as the kernel keeps it (at most 15 bytes)
  char state = '?';  // R, S, D, T, t, Z, X, I, ...
  pid_t ppid = 0;
  unsigned long long start_time = 0;    // clock ticks after boot: with the pid, names one process
  unsigned long long user_ticks = 0;    // CPU time in user mode (clock ticks)
  unsigned long long system_ticks = 0;  // CPU time in the kernel (clock ticks)
  unsigned long long rss_pages = 0;     // resident set size (pages)
};

// Parses the text of a stat file; nullopt when it is not in that shape.
std::optional<ProcStat> ParseProcStat(std::string_view text);

// Reads /proc/<pid>/stat, or a thread's /proc/<pid>/task/<tid>/stat when `path` is given;
// nullopt when the process is gone.
std::optional<ProcStat> ReadProcStat(pid_t pid);
std::optional<ProcStat> ReadProcStatFile(const std::string& path);

// Where a process's main thread sleeps in the kernel: /proc/<pid>/wchan ("kernel_clone",
// "nfs_wait_bit_killable"); empty when it runs, is gone, or the kernel hides it.
std::string ReadWchan(pid_t pid);

// The function names of a /proc/<pid>/stack text ("[<0>] kernel_clone+0x1d3/0x400" lines),
// innermost first, without offsets. Pure.
std::vector<std::string> ParseKernelStack(std::string_view text);
// /proc/<pid>/stack parsed; empty when it cannot be read (it needs root: CAP_SYS_ADMIN).
std::vector<std::string> ReadKernelStack(pid_t pid);

// Whether a process in `state` is stopped: T (SIGSTOP, SIGTSTP) or t (held by a tracer). It runs
// nothing until continued.
inline bool IsStoppedState(char state) { return state == 'T' || state == 't'; }

// "S (sleeping)", "T (stopped: SIGSTOP, SIGTSTP or a debugger)", ...
std::string ProcStateName(char state);

// Why a SIGKILLed process has not been reaped, from its /proc state ("did not exit after SIGKILL
// (uninterruptible sleep)", ...).
std::string DescribeUnreaped(pid_t pid);

}  // namespace mxrun

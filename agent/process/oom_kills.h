#pragma once
// Telling a worker killed by the kernel's OOM killer from one killed by another SIGKILL. The kernel
// counts its OOM kills per memory cgroup (v2 memory.events, v1 memory.oom_control: "oom_kill N")
// and for the machine (/proc/vmstat, "oom_kill N", Linux 4.13 and later). The counts are read when
// a worker starts (its cgroup found from /proc/<pid>/cgroup) and again when it dies of a SIGKILL
// the agent did not send: a rise in its cgroup's count names the OOM killer; a rise in the
// machine's alone (the worker may have been moved to another cgroup) makes it the likely cause.
// torchrun says "Signal 9 (SIGKILL)" either way.

#include <sys/types.h>

#include <string>
#include <string_view>

namespace mxrun {

struct OomKillCounts {
  long long machine = -1;  // -1: unknown
  long long cgroup = -1;
  std::string cgroup_file;  // where the cgroup's count is read ("" unknown)
};

// N of the "oom_kill N" line of a vmstat, memory.events or memory.oom_control text; -1 if none.
long long ParseOomKillCount(std::string_view text);

// The file holding the OOM kill count of the memory cgroup named in `proc_cgroup` (the text of
// /proc/<pid>/cgroup), under `cgroup_root` (/sys/fs/cgroup): v1's memory hierarchy when the text
// has a memory line, else v2's unified one. "" when neither is named.
std::string MemoryCgroupCountFile(std::string_view proc_cgroup, const std::string& cgroup_root);

// The counts for process `pid` now (read from `proc_root` and `cgroup_root`).
OomKillCounts ReadOomKillCounts(pid_t pid, const std::string& proc_root = "/proc",
                                const std::string& cgroup_root = "/sys/fs/cgroup");
// The same files read again, after the process is gone.
OomKillCounts ReadOomKillCountsAgain(const OomKillCounts& before,
                                     const std::string& proc_root = "/proc");

// The words added to "Signal 9 (SIGKILL)" when the counts rose between a worker's start and its
// death; "" when nothing says the OOM killer did it.
std::string OomKillNote(const OomKillCounts& at_start, const OomKillCounts& at_death);

}  // namespace mxrun

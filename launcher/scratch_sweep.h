#pragma once
// The scratch folders of mxrun processes that died with their guardian (a node's death, or
// SIGKILL of the whole process tree): each mxrun marks its $TMPDIR/mxrun-XXXXXX folder with its
// pid, its start time, its PID namespace and the boot, and the next mxrun on the host removes the
// marked folders of this user whose process is gone. Folders without a mark (not mxrun's scratch),
// the kept ones (mxrun-logs, mxrun-hang-*) and those of another PID namespace (a container sharing
// this $TMPDIR: its pids mean nothing here, and its live job's folder must stay) are never
// touched; a mark from an earlier boot is gone whatever its pid.

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace mxrun {

inline constexpr const char* kScratchOwnerFile = ".owner";

// Where a process runs, as far as a pid means anything: its PID namespace ("pid:[4026531836]",
// /proc/self/ns/pid) and the kernel's boot id. Empty where unreadable.
struct ScratchHost {
  std::string pid_namespace;
  std::string boot_id;
};
ScratchHost CurrentScratchHost();

// Writes DIR/.owner, "<pid> <start time> <pid namespace> <boot id>" of process `pid` here ("-"
// for what cannot be read). False when it cannot.
bool MarkScratchOwner(const std::string& dir, pid_t pid);

enum class ScratchOwner {
  kRuns,            // its mxrun still runs: keep
  kGone,            // its mxrun is gone: remove
  kNotOursToJudge,  // malformed, or of another PID namespace: keep
};
// What a folder's mark says, seen from `here`. `start_time_of` gives a live pid's start time
// (nullopt: no such process). A mark of two fields (mxrun before the namespace was written) is
// judged by pid and start time alone, as it was then.
ScratchOwner JudgeScratchMark(
    absl::string_view mark, const ScratchHost& here,
    const std::function<std::optional<unsigned long long>(pid_t)>& start_time_of);

// Removes the orphaned scratch folders under `temp_base`; returns their paths.
std::vector<std::string> SweepOrphanedScratch(const std::string& temp_base);

}  // namespace mxrun

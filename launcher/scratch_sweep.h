#pragma once
// The scratch folders of mxrun processes that died with their guardian (a node's death, or
// SIGKILL of the whole process tree): each mxrun marks its $TMPDIR/mxrun-XXXXXX folder with its
// pid and start time, and the next mxrun on the host removes the marked folders of this user
// whose process is gone. Folders without a mark (not mxrun's scratch, or an older mxrun's) and
// the kept ones (mxrun-logs, mxrun-hang-*) are never touched.

#include <sys/types.h>

#include <string>
#include <vector>

namespace mxrun {

inline constexpr const char* kScratchOwnerFile = ".owner";

// Writes DIR/.owner: "<pid> <start time>" of process `pid`. False when it cannot.
bool MarkScratchOwner(const std::string& dir, pid_t pid);

// Removes the orphaned scratch folders under `temp_base`; returns their paths.
std::vector<std::string> SweepOrphanedScratch(const std::string& temp_base);

}  // namespace mxrun

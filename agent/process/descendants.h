#pragma once
// Finding and killing what workers leave behind. The agent is a child subreaper, so a grandchild
// whose parent (a worker) exited is re-parented to the agent and stays reachable from it; this
// walks the agent's process tree through /proc.

#include <sys/types.h>

#include <set>
#include <vector>

namespace mxrun {

// The parent of a live process; -1 when it is gone or a zombie (dead, waiting to be reaped).
pid_t ReadLiveParent(pid_t pid);

// Every live descendant of `root` (children, grandchildren, ...), excluding the subtrees of the
// pids in `exclude`. Reads /proc; processes that vanish while reading are skipped.
std::vector<pid_t> ListDescendants(pid_t root, const std::set<pid_t>& exclude);

// SIGKILLs every descendant of the calling process outside `exclude`, repeating (at most
// `max_passes` times) while new ones appear, and reaps the direct children among them. Each pass
// waits up to 2 s for what it killed; one still alive after that (uninterruptible sleep) is not
// waited for again.
// Returns how many processes were killed.
int KillDescendants(const std::set<pid_t>& exclude, int max_passes = 5);

}  // namespace mxrun

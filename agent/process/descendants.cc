#include "agent/process/descendants.h"

#include <dirent.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "agent/process/proc_stat.h"

namespace mxrun {

pid_t ReadLiveParent(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return -1;
  return stat->state == 'Z' || stat->state == 'X' ? -1 : stat->ppid;
}

namespace {

// Children of `pid` from /proc/<pid>/task/<tid>/children (every thread). nullopt when the kernel
// does not offer those files (CONFIG_PROC_CHILDREN); a vanished process has no children.
std::optional<std::vector<pid_t>> ReadChildren(pid_t pid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/task", pid);
  DIR* tasks = opendir(path);
  if (tasks == nullptr) return std::vector<pid_t>{};
  std::vector<pid_t> children;
  bool supported = true;
  while (dirent* entry = readdir(tasks)) {
    if (entry->d_name[0] == '.') continue;
    char file[320];
    std::snprintf(file, sizeof file, "/proc/%d/task/%s/children", pid, entry->d_name);
    FILE* f = std::fopen(file, "re");
    if (f == nullptr) {
      supported = supported && errno != ENOENT;
      continue;
    }
    int child = 0;
    while (std::fscanf(f, "%d", &child) == 1) children.push_back(child);
    std::fclose(f);
  }
  closedir(tasks);
  if (!supported) return std::nullopt;
  return children;
}

// The whole process table's parent links: the fallback when children files are missing.
std::vector<pid_t> ListDescendantsByScan(pid_t root, const std::set<pid_t>& exclude) {
  std::multimap<pid_t, pid_t> children;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return {};
  while (dirent* entry = readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(entry->d_name, &end, 10);
    if (end == entry->d_name || *end != '\0') continue;
    pid_t parent = ReadLiveParent(static_cast<pid_t>(pid));
    if (parent > 0) children.emplace(parent, static_cast<pid_t>(pid));
  }
  closedir(proc);

  std::vector<pid_t> found;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty() && found.size() < 100000) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    auto [begin, end] = children.equal_range(parent);
    for (auto it = begin; it != end; ++it) {
      if (exclude.count(it->second) > 0) continue;
      found.push_back(it->second);
      frontier.push_back(it->second);
    }
  }
  return found;
}

}  // namespace

std::vector<pid_t> ListDescendants(pid_t root, const std::set<pid_t>& exclude) {
  // Walk down from `root` through the children files: cost proportional to the descendants, not
  // to every process on the machine.
  std::vector<pid_t> found;
  std::vector<pid_t> frontier{root};
  while (!frontier.empty() && found.size() < 100000) {
    pid_t parent = frontier.back();
    frontier.pop_back();
    std::optional<std::vector<pid_t>> children = ReadChildren(parent);
    if (!children) return ListDescendantsByScan(root, exclude);
    for (pid_t child : *children) {
      if (exclude.count(child) > 0 || ReadLiveParent(child) != parent) continue;  // zombie or gone
      found.push_back(child);
      frontier.push_back(child);
    }
  }
  return found;
}

int KillDescendants(const std::set<pid_t>& exclude, int max_passes) {
  int killed = 0;
  const pid_t self = getpid();
  std::set<pid_t> signalled;  // in earlier passes
  for (int pass = 0; pass < max_passes; ++pass) {
    std::vector<pid_t> pids = ListDescendants(self, exclude);
    // One killed in an earlier pass and still alive is in uninterruptible sleep: waiting for it
    // again would only spend time (it is reaped whenever it ends).
    std::erase_if(pids, [&signalled](pid_t pid) { return signalled.count(pid) > 0; });
    if (pids.empty()) break;
    signalled.insert(pids.begin(), pids.end());
    std::vector<pollfd> waits;
    for (pid_t pid : pids) {
      int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
      if (kill(pid, SIGKILL) != 0) {
        if (pidfd >= 0) close(pidfd);
        continue;
      }
      ++killed;
      if (pidfd >= 0) waits.push_back({pidfd, POLLIN, 0});
    }
    // Wait (bounded) until every killed process has exited, then reap those that are our children
    // (orphans are re-parented to us as the subreaper). Their children surface in the next pass.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
    for (pollfd& w : waits) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          deadline - std::chrono::steady_clock::now());
      poll(&w, 1, static_cast<int>(std::max<long>(0, left.count())));
      close(w.fd);
    }
    for (pid_t pid : pids) {
      int status = 0;
      waitpid(pid, &status, WNOHANG);
    }
  }
  return killed;
}

}  // namespace mxrun

#pragma once
// A memory cgroup of the test's own with a limit, for an OOM kill by the kernel: cgroup v2 where
// its memory controller is enabled at the root, else v1's memory hierarchy. Created under the
// hierarchy's root as mxrun-fault-<pid>, removed by the destructor (its processes are gone by
// then; any left are moved back to the root first). Where neither exists or is writable,
// unavailable() says why and nothing is created.

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "tests/subprocess.h"

namespace mxrun::faults {

class MemoryCgroup {
 public:
  explicit MemoryCgroup(long long limit_bytes) {
    const std::string v2 = "/sys/fs/cgroup";
    std::string root;
    std::string limit_file;
    if (testing::ReadFile(v2 + "/cgroup.subtree_control").find("memory") != std::string::npos) {
      root = v2;
      limit_file = "memory.max";
    } else if (::access("/sys/fs/cgroup/memory/memory.limit_in_bytes", W_OK) == 0) {
      root = "/sys/fs/cgroup/memory";
      limit_file = "memory.limit_in_bytes";
    } else {
      unavailable_ =
          "no writable memory cgroup (neither cgroup v2 with the memory controller "
          "nor v1's /sys/fs/cgroup/memory)";
      return;
    }
    root_ = root;
    path_ = root + "/mxrun-fault-" + std::to_string(::getpid());
    if (::mkdir(path_.c_str(), 0755) != 0) {
      unavailable_ = "cannot create " + path_ + ": " + std::strerror(errno);
      path_.clear();
      return;
    }
    const std::string written = Write(limit_file, std::to_string(limit_bytes));
    if (!written.empty()) unavailable_ = written;
    if (root == "/sys/fs/cgroup/memory") Write("memory.swappiness", "0");  // no swap to escape to
  }
  ~MemoryCgroup() {
    if (path_.empty()) return;
    std::istringstream left(testing::ReadFile(path_ + "/cgroup.procs"));
    for (std::string pid; std::getline(left, pid);) {
      std::ofstream(root_ + "/cgroup.procs") << pid << "\n";
    }
    ::rmdir(path_.c_str());
  }
  MemoryCgroup(const MemoryCgroup&) = delete;
  MemoryCgroup& operator=(const MemoryCgroup&) = delete;

  const std::string& unavailable() const { return unavailable_; }
  // Moves process `pid` into the cgroup; "" or what went wrong.
  std::string Add(int pid) { return Write("cgroup.procs", std::to_string(pid)); }

 private:
  std::string Write(const std::string& file, const std::string& value) {
    std::ofstream out(path_ + "/" + file);
    out << value << "\n";
    out.flush();
    if (!out) return "cannot write " + value + " to " + path_ + "/" + file;
    return "";
  }

  std::string root_;
  std::string path_;
  std::string unavailable_;
};

}  // namespace mxrun::faults

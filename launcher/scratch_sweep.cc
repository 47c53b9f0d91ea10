#include "launcher/scratch_sweep.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>
#include <sstream>

#include "agent/process/proc_stat.h"
#include "common/files.h"

namespace mxrun {
namespace {

// "mxrun-" and mkdtemp's six characters.
bool IsScratchName(const std::string& name) {
  if (name.size() != 12 || name.compare(0, 6, "mxrun-") != 0) return false;
  for (size_t i = 6; i < name.size(); ++i) {
    const char c = name[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))) {
      return false;
    }
  }
  return true;
}

}  // namespace

bool MarkScratchOwner(const std::string& dir, pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return false;
  std::ofstream out(dir + "/" + kScratchOwnerFile, std::ios::trunc);
  out << pid << " " << stat->start_time << "\n";
  return static_cast<bool>(out);
}

std::vector<std::string> SweepOrphanedScratch(const std::string& temp_base) {
  std::vector<std::string> removed;
  DIR* dir = opendir(temp_base.c_str());
  if (dir == nullptr) return removed;
  std::vector<std::string> candidates;
  while (dirent* entry = readdir(dir)) {
    if (IsScratchName(entry->d_name)) candidates.push_back(temp_base + "/" + entry->d_name);
  }
  closedir(dir);
  for (const std::string& path : candidates) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    std::optional<std::string> mark = ReadWholeFile(path + "/" + kScratchOwnerFile);
    if (!mark) continue;  // not marked: not ours to judge
    std::istringstream in(*mark);
    pid_t pid = 0;
    unsigned long long start_time = 0;
    if (!(in >> pid >> start_time) || pid <= 0) continue;
    std::optional<ProcStat> owner = ReadProcStat(pid);
    if (owner && owner->start_time == start_time) continue;  // its mxrun still runs
    RemoveTree(path);
    removed.push_back(path);
  }
  return removed;
}

}  // namespace mxrun

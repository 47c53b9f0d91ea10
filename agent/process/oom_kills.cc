#include "agent/process/oom_kills.h"

#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace mxrun {
namespace {

std::string ReadSmallFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return "";
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

long long ReadCount(const std::string& path) {
  return path.empty() ? -1 : ParseOomKillCount(ReadSmallFile(path));
}

}  // namespace

long long ParseOomKillCount(std::string_view text) {
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipEmpty());
    long long count = 0;
    if (words.size() == 2 && words[0] == "oom_kill" && absl::SimpleAtoi(words[1], &count) &&
        count >= 0) {
      return count;
    }
  }
  return -1;
}

std::string MemoryCgroupCountFile(std::string_view proc_cgroup, const std::string& cgroup_root) {
  std::string unified;
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(proc_cgroup.data(), proc_cgroup.size()), '\n')) {
    // "hierarchy-id:controllers:path"; the path may hold ':' itself.
    std::vector<absl::string_view> parts = absl::StrSplit(line, absl::MaxSplits(':', 2));
    if (parts.size() != 3 || parts[2].empty() || parts[2][0] != '/' ||
        parts[2].find("..") != absl::string_view::npos) {
      continue;
    }
    if (parts[0] == "0" && parts[1].empty()) {
      unified = absl::StrCat(cgroup_root, parts[2] == "/" ? "" : parts[2], "/memory.events");
      continue;
    }
    for (absl::string_view controller : absl::StrSplit(parts[1], ',')) {
      if (controller == "memory") {
        return absl::StrCat(cgroup_root, "/memory", parts[2] == "/" ? "" : parts[2],
                            "/memory.oom_control");
      }
    }
  }
  return unified;
}

OomKillCounts ReadOomKillCounts(pid_t pid, const std::string& proc_root,
                                const std::string& cgroup_root) {
  OomKillCounts counts;
  counts.machine = ReadCount(proc_root + "/vmstat");
  counts.cgroup_file = MemoryCgroupCountFile(
      ReadSmallFile(absl::StrCat(proc_root, "/", pid, "/cgroup")), cgroup_root);
  counts.cgroup = ReadCount(counts.cgroup_file);
  return counts;
}

OomKillCounts ReadOomKillCountsAgain(const OomKillCounts& before, const std::string& proc_root) {
  OomKillCounts counts;
  counts.machine = ReadCount(proc_root + "/vmstat");
  counts.cgroup_file = before.cgroup_file;
  counts.cgroup = ReadCount(counts.cgroup_file);
  return counts;
}

std::string OomKillNote(const OomKillCounts& at_start, const OomKillCounts& at_death) {
  if (at_start.cgroup >= 0 && at_death.cgroup > at_start.cgroup) {
    return absl::StrCat("killed by the kernel's OOM killer (its memory cgroup counted ",
                        at_death.cgroup - at_start.cgroup, " OOM kill(s) while it ran)");
  }
  if (at_start.machine >= 0 && at_death.machine > at_start.machine) {
    return absl::StrCat("killed by the kernel's OOM killer, most likely (the machine counted ",
                        at_death.machine - at_start.machine, " OOM kill(s) while it ran)");
  }
  return "";
}

}  // namespace mxrun

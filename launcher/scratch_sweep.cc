#include "launcher/scratch_sweep.h"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

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

// The mark of MarkScratchOwner; nullopt when /proc/<pid>/stat cannot be read.
std::optional<std::string> ScratchMark(pid_t pid, const ScratchHost& host) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return std::nullopt;
  // A field left empty would shift the ones after it: "-" stands for unreadable.
  return absl::StrCat(pid, " ", stat->start_time, " ",
                      host.pid_namespace.empty() ? "-" : host.pid_namespace, " ",
                      host.boot_id.empty() ? "-" : host.boot_id);
}

}  // namespace

ScratchHost CurrentScratchHost() {
  ScratchHost host;
  char link[128] = {};
  const ssize_t n = readlink("/proc/self/ns/pid", link, sizeof link - 1);
  if (n > 0) host.pid_namespace.assign(link, static_cast<size_t>(n));
  if (std::optional<std::string> boot = ReadWholeFile("/proc/sys/kernel/random/boot_id")) {
    host.boot_id = std::string(absl::StripAsciiWhitespace(*boot));
  }
  return host;
}

bool MarkScratchOwner(const std::string& dir, pid_t pid) {
  std::optional<std::string> mark = ScratchMark(pid, CurrentScratchHost());
  if (!mark) return false;
  std::ofstream out(dir + "/" + kScratchOwnerFile, std::ios::trunc);
  out << *mark << "\n";
  return static_cast<bool>(out);
}

ScratchOwner JudgeScratchMark(
    absl::string_view mark, const ScratchHost& here,
    const std::function<std::optional<unsigned long long>(pid_t)>& start_time_of) {
  const std::vector<absl::string_view> fields =
      absl::StrSplit(absl::StripAsciiWhitespace(mark), ' ', absl::SkipEmpty());
  pid_t pid = 0;
  unsigned long long start_time = 0;
  if ((fields.size() != 2 && fields.size() != 4) || !absl::SimpleAtoi(fields[0], &pid) ||
      pid <= 0 || !absl::SimpleAtoi(fields[1], &start_time)) {
    return ScratchOwner::kNotOursToJudge;
  }
  if (fields.size() == 4) {
    const absl::string_view pid_namespace = fields[2], boot_id = fields[3];
    // Another boot: every process of it is gone, whatever its namespace.
    if (boot_id != "-" && !here.boot_id.empty() && boot_id != here.boot_id) {
      return ScratchOwner::kGone;
    }
    // Another PID namespace (or one unknown): its pid may name a live process this one cannot see.
    if (pid_namespace == "-" || here.pid_namespace.empty() || pid_namespace != here.pid_namespace) {
      return ScratchOwner::kNotOursToJudge;
    }
  }
  const std::optional<unsigned long long> running = start_time_of(pid);
  return running && *running == start_time ? ScratchOwner::kRuns : ScratchOwner::kGone;
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
  const ScratchHost here = CurrentScratchHost();
  auto start_time_of = [](pid_t pid) -> std::optional<unsigned long long> {
    std::optional<ProcStat> stat = ReadProcStat(pid);
    if (!stat) return std::nullopt;
    return stat->start_time;
  };
  for (const std::string& path : candidates) {
    struct stat st {};
    if (lstat(path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != geteuid()) continue;
    std::optional<std::string> mark = ReadWholeFile(path + "/" + kScratchOwnerFile);
    if (!mark) continue;  // not marked: not ours to judge
    if (JudgeScratchMark(*mark, here, start_time_of) != ScratchOwner::kGone) continue;
    RemoveTree(path);
    removed.push_back(path);
  }
  return removed;
}

}  // namespace mxrun

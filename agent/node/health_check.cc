#include "agent/node/health_check.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "agent/process/helper_run.h"

namespace mxrun {

namespace {

std::string MiB(unsigned long long bytes) {
  return absl::StrFormat("%.0f MiB", static_cast<double>(bytes) / (1 << 20));
}

}  // namespace

HealthChecker::HealthChecker(HealthCheckConfig config) : config_(std::move(config)) {}
HealthChecker::~HealthChecker() = default;

std::vector<std::string> HealthChecker::Check() {
  std::vector<std::string> problems;
  if (!config_.enabled) return problems;
  CheckGpus(problems);
  CheckFolders(problems);
  CheckAddress(problems);
  RunCommand(problems);
  return problems;
}

void HealthChecker::CheckGpus(std::vector<std::string>& problems) {
  if (config_.gpu_entries.empty()) return;
  const bool first = !nvml_;
  if (!nvml_) nvml_ = std::make_unique<Nvml>();
  if (!nvml_->ready()) return;  // no driver: a CPU node, nothing to ask
  // XIDs since the last check; the first check starts watching them.
  for (const auto& [device, xid] : nvml_->TakeXids()) {
    // Faults an application causes (a bad kernel, a bad address): not the node's health.
    if (xid == 13 || xid == 31 || xid == 43 || xid == 45) continue;
    std::string name = "?";
    for (const auto& [watched, entry] : watched_) {
      if (watched == device) name = entry;
    }
    problems.push_back(absl::StrCat("GPU ", name, ": XID ", xid, " reported since the last check"));
  }
  const std::optional<unsigned int> count = nvml_->DeviceCount();
  for (const std::string& entry : config_.gpu_entries) {
    if (unsigned int index = 0; config_.gpu_entries_are_local_ranks && count &&
                                absl::SimpleAtoi(entry, &index) && index >= *count) {
      continue;
    }
    std::optional<Nvml::Device> device = nvml_->Find(entry);
    if (!device) {
      problems.push_back(absl::StrCat("GPU ", entry, ": not visible through NVML"));
      continue;
    }
    if (first && nvml_->WatchXids(*device)) watched_.emplace_back(*device, entry);
    if (nvml_->RetiredPagesPending(*device).value_or(false)) {
      problems.push_back(absl::StrCat("GPU ", entry,
                                      ": retired memory pages pending (the GPU "
                                      "needs a reset or a driver reload)"));
    }
    if (std::optional<Nvml::RemappedRows> rows = nvml_->RowRemapping(*device)) {
      if (rows->failed) {
        problems.push_back(absl::StrCat("GPU ", entry,
                                        ": a memory row remap failed (the GPU "
                                        "should be replaced)"));
      } else if (rows->pending) {
        problems.push_back(absl::StrCat("GPU ", entry,
                                        ": a memory row remap is pending (the "
                                        "GPU needs a reset)"));
      }
    }
    if (std::optional<unsigned long long> free = nvml_->FreeBytes(*device);
        free && *free < config_.min_free_gpu_bytes) {
      problems.push_back(absl::StrCat("GPU ", entry, ": ", MiB(*free), " free, ",
                                      MiB(config_.min_free_gpu_bytes),
                                      " needed "
                                      "(--health_min_gpu_free)"));
    }
  }
}

void HealthChecker::CheckFolders(std::vector<std::string>& problems) const {
  for (const std::string& folder : config_.folders) {
    if (folder.empty()) continue;
    const std::string probe = absl::StrCat(folder, "/.mxrun-health-", getpid());
    const int fd = open(probe.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      problems.push_back(
          absl::StrCat("folder ", folder, ": cannot write there (", std::strerror(errno), ")"));
      continue;
    }
    close(fd);
    unlink(probe.c_str());
    struct statvfs fs {};
    if (statvfs(folder.c_str(), &fs) == 0) {
      const unsigned long long free = static_cast<unsigned long long>(fs.f_bavail) * fs.f_frsize;
      if (free < config_.min_free_disk_bytes) {
        problems.push_back(absl::StrCat("folder ", folder, ": ", MiB(free), " free, ",
                                        MiB(config_.min_free_disk_bytes),
                                        " needed (--health_min_disk)"));
      }
    }
  }
}

void HealthChecker::CheckAddress(std::vector<std::string>& problems) const {
  if (config_.address.empty()) return;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (getaddrinfo(config_.address.c_str(), "0", &hints, &found) != 0 || found == nullptr) {
    problems.push_back(absl::StrCat("address ", config_.address,
                                    " (--local_addr): does not "
                                    "resolve"));
    return;
  }
  const int fd = socket(found->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const bool bound = fd >= 0 && bind(fd, found->ai_addr, found->ai_addrlen) == 0;
  const int error = errno;
  if (fd >= 0) close(fd);
  freeaddrinfo(found);
  if (!bound) {
    problems.push_back(absl::StrCat("address ", config_.address,
                                    " (--local_addr): not an "
                                    "address of this machine (",
                                    std::strerror(error), ")"));
  }
}

void HealthChecker::RunCommand(std::vector<std::string>& problems) const {
  if (config_.command.empty()) return;
  HelperOptions options;
  options.timeout = config_.command_timeout;
  absl::StatusOr<HelperRun> run = RunHelper("/bin/sh", {"sh", "-c", config_.command}, options);
  if (!run.ok()) {
    problems.push_back(
        absl::StrCat("--health_check: cannot run it (", run.status().message(), ")"));
    return;
  }
  if (run->timed_out) {
    problems.push_back(absl::StrCat("--health_check '", config_.command, "' did not finish in ",
                                    config_.command_timeout.count() / 1000.0,
                                    " s (--health_check_timeout)"));
    return;
  }
  if (run->ok()) return;
  std::string last;
  for (absl::string_view line : absl::StrSplit(run->output, '\n', absl::SkipWhitespace())) {
    last = std::string(absl::StripAsciiWhitespace(line));
  }
  problems.push_back(absl::StrCat("--health_check '", config_.command, "' ",
                                  run->Describe(config_.command_timeout),
                                  last.empty() ? std::string() : absl::StrCat(": ", last)));
}

}  // namespace mxrun

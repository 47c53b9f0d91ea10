#include "agent/workers/attempt_files.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/env_contract.h"
#include "common/files.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {

AttemptFiles::AttemptFiles(const WorkerSpec& spec) : spec_(spec) {
  out_.filters = spec_.logs.duplicate_stdout_filters;
  err_.filters = spec_.logs.duplicate_stderr_filters;
}

AttemptFiles::~AttemptFiles() { Close(); }

int AttemptFiles::OpenLog(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) spdlog::warn("cannot open log file {}: {}", path, ErrnoText(errno));
  return fd;
}

std::string AttemptFiles::Dir() const {
  return absl::StrCat(spec_.attempts_dir, "/attempt_", attempt_);
}

void AttemptFiles::Begin(int attempt) {
  attempt_ = attempt;
  Close();
  for (auto [duplicate, name] :
       {std::pair{&out_, "filtered_stdout.log"}, std::pair{&err_, "filtered_stderr.log"}}) {
    if (duplicate->filters.empty()) continue;
    MakeDirs(Dir());
    duplicate->fd = OpenLog(absl::StrCat(Dir(), "/", name));
  }
}

void AttemptFiles::Close() {
  for (LineDuplicate* duplicate : {&out_, &err_}) {
    if (duplicate->fd >= 0) close(duplicate->fd);
    duplicate->fd = -1;
  }
}

void AttemptFiles::PrepareRank(WorkerProcess& worker) const {
  const std::string dir = absl::StrCat(Dir(), "/", worker.local_rank);
  MakeDirs(dir);
  worker.dir = dir;
  worker.error_file = dir + "/error.json";
  unlink(worker.error_file.c_str());  // a stale file from an earlier run must not be reported
  if (spec_.heartbeat_files) {
    // A re-formed group reuses the attempt's folders: a stale heartbeat would count as a beat.
    worker.heartbeat_file = dir + "/heartbeat";
    unlink(worker.heartbeat_file.c_str());
  }
  // PyTorch's NCCL flight recorder dumps to this prefix + the global rank; into the kept log
  // folder when there is one, else where PyTorch puts it by default (a scratch folder would lose
  // it).
  std::string nccl_prefix = "/tmp/nccl_trace_rank_";
  if (auto it = spec_.base_env.find("TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
      it != spec_.base_env.end()) {
    nccl_prefix = it->second;
  } else if (spec_.attempts_dir_kept) {
    nccl_prefix = worker.nccl_trace_prefix = dir + "/nccl_trace_rank_";
  }
  worker.nccl_trace_file = absl::StrCat(nccl_prefix, worker.global_rank);
  if (!spec_.flight_socket_dir.empty()) {
    // By local rank: a worker kept in-process keeps its socket when its global rank changes. A
    // file left by the rank's last worker would make the new one's bind fail.
    worker.flight_socket =
        absl::StrCat(spec_.flight_socket_dir, "/fr-", worker.local_rank, ".sock");
    unlink(worker.flight_socket.c_str());
    unlink((worker.flight_socket + kFlightExitSuffix).c_str());  // an earlier worker's last dump
  }
}

}  // namespace mxrun

#include "agent/workers/worker_output.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace mxrun {

absl::StatusOr<ChildOutputFds> OpenWorkerOutput(WorkerProcess& worker, const WorkerSpec& spec,
                                                AttemptFiles& files, ConsoleCollapser* collapse,
                                                int node_rank) {
  const bool standby = worker.local_rank < 0;
  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::string message = absl::StrCat("cannot create output pipes: ", ErrnoText(errno));
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    return absl::InternalError(message);
  }
  auto make_relay = [&](int read_fd, StdMask stream, int console_fd, const char* file_name) {
    StreamRouting routing = spec.logs.Route(std::max(worker.local_rank, 0), stream);
    RelayTarget target;
    target.console_fd = routing.to_console || standby ? console_fd : -1;
    target.file_fd =
        routing.to_file && !standby ? AttemptFiles::OpenLog(worker.dir + "/" + file_name) : -1;
    target.node_rank = node_rank;
    target.global_rank = worker.global_rank;
    target.local_rank = worker.local_rank;
    target.is_stderr = stream == kStdErr;
    target.json = spec.json_logs;
    target.prefix_template = spec.line_prefix_template;
    target.role = spec.role;
    target.host_name = spec.host_name;
    target.duplicate = files.Duplicate(stream == kStdErr);
    target.collapse = collapse;
    return std::make_unique<OutputRelay>(read_fd, std::move(target), &worker.last_lines);
  };
  worker.out = make_relay(out_pipe[0], kStdOut, STDOUT_FILENO, "stdout.log");
  worker.err = make_relay(err_pipe[0], kStdErr, STDERR_FILENO, "stderr.log");
  return ChildOutputFds{out_pipe[1], err_pipe[1]};
}

void WatchWorkerOutput(WorkerProcess& worker, EventLoop& loop) {
  for (OutputRelay* relay : {worker.out.get(), worker.err.get()}) {
    loop.Watch(relay->fd(), [&loop, relay] {
      int fd = relay->fd();
      if (!relay->OnReadable()) loop.Unwatch(fd);
    });
  }
}

void RetargetWorkerOutput(WorkerProcess& worker, const WorkerSpec& spec, int node_rank) {
  for (OutputRelay* relay : {worker.out.get(), worker.err.get()}) {
    const bool err = relay == worker.err.get();
    const StreamRouting routing = spec.logs.Route(worker.local_rank, err ? kStdErr : kStdOut);
    relay->Retarget(node_rank, worker.global_rank, worker.local_rank);
    relay->SetFile(routing.to_file
                       ? AttemptFiles::OpenLog(worker.dir + (err ? "/stderr.log" : "/stdout.log"))
                       : -1);
  }
}

void CloseWorkerOutput(WorkerProcess& worker, EventLoop& loop) {
  for (OutputRelay* relay : {worker.out.get(), worker.err.get()}) {
    if (relay == nullptr || !relay->open()) continue;
    loop.Unwatch(relay->fd());
    relay->DrainAndClose();
  }
}

}  // namespace mxrun

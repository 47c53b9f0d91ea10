#pragma once
// What mxrun finds out about hung workers before it stops them, written to one file per worker
// (DIR/rank<R>.txt) and summarised in a few lines for the failure summary:
//  * the process's state and, for every thread, its state and wait channel (/proc/PID/stat,
//    /proc/PID/task/*/stat and wchan): "T (stopped: SIGSTOP ...)" tells a stopped worker, a wait
//    channel such as futex_wait_queue or pipe_read tells what a blocked thread waits on; for a
//    process in uninterruptible sleep (D), its kernel stack too (/proc/PID/stack, root only);
//  * how long since its last heartbeat, and its last output lines;
//  * a stack dump of every thread by py-spy (Python workers, when installed), eu-stack or gdb,
//    all workers at once and bounded in time; skipped, saying why, where none is installed or the
//    kernel refuses ptrace;
//  * PyTorch's NCCL flight-recorder dump (TORCH_NCCL_DEBUG_INFO_TEMP_FILE + rank; mxrun points it
//    into the log folder when there is one) when this worker wrote one, copied beside the report.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

struct HungWorker {
  int global_rank = 0;
  int local_rank = 0;
  pid_t pid = 0;
  std::string rule;    // HangRuleName
  std::string detail;  // the verdict's words
  // Judged for its time in uninterruptible sleep: no stack dumper is run (a tracer cannot attach
  // until the process leaves D, so it would only spend the budget); its kernel stack is shown.
  bool uninterruptible = false;
  bool heartbeat_watched = false;                            // --hang_timeout is on
  std::optional<std::chrono::milliseconds> since_heartbeat;  // nullopt: it never beat
  std::vector<std::string> last_lines;
  std::string nccl_trace_file;  // where PyTorch's NCCL flight recorder dumps for this rank
  std::chrono::system_clock::time_point started_at;  // older files there are not this worker's
};

struct DiagnosticsOptions {
  std::chrono::milliseconds stack_dump_budget{4000};  // for all stack dumps together
  // When gdb is the dumper (chosen, or the only one installed): gdb reads the symbol tables of
  // every library the process loaded, 3 to 6 s for a worker with PyTorch 2.13's libtorch_cpu.so on
  // 2 cores (eu-stack: 20 ms), so 4 s would leave it no time at all.
  std::chrono::milliseconds gdb_stack_dump_budget{15000};
  std::string path_env;  // PATH to find the tools in
  // MXRUN_STACK_DUMPER: "py-spy", "eu-stack", "gdb" or "none"; empty: py-spy for Python workers
  // when installed, else eu-stack, else gdb.
  std::string stack_dumper;
};

// The values MXRUN_STACK_DUMPER accepts (empty: choose).
bool IsStackDumper(const std::string& name);

struct HangDiagnostics {
  std::map<int, std::vector<std::string>> short_form;  // by local rank
  std::chrono::milliseconds took{0};
};

// A file descriptor to keep serving while the stack dumps run (the FileTimer pipe: healthy
// workers' clients fail when it fills up). fd -1: none.
struct KeepReading {
  int fd = -1;
  std::function<void()> on_readable;
};

// Writes DIR/rank<R>.txt for every worker in `hung` and returns the short form. With DIR empty (it
// could not be made) only the short form is made, from /proc, with no stack dumps.
HangDiagnostics CollectHangDiagnostics(const std::vector<HungWorker>& hung, const std::string& dir,
                                       const DiagnosticsOptions& options,
                                       const KeepReading& keep_reading = {});

// The first `count` named frames of thread `tid`'s stack in an eu-stack, gdb ("thread apply all
// bt") or py-spy dump, as function names ("c10d::Work::wait < Trainer::TrainEpoch"), without the C
// library's internals; empty when it has none. Pure.
std::string TopFrames(std::string_view dump, pid_t tid, size_t count);

}  // namespace mxrun

#include "agent/workers/worker_group.h"

#include <dirent.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process/descendants.h"
#include "agent/workers/failure_report.h"
#include "agent/process/proc_stat.h"
#include "agent/process/process_launcher.h"
#include "common/files.h"
#include "common/visible_devices.h"
#include "common/signal_names.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {

struct WorkerGroup::Worker {
  explicit Worker(size_t kept_lines) : last_lines(kept_lines) {}
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  bool running = false;
  bool stopped_by_agent = false;
  bool exited_ok = false;
  int exit_code = -1;       // once ended: its exit code, or -1 when a signal ended it
  int term_signal = 0;      // once ended: the signal that ended it (0: it exited)
  bool killed_after_grace = false;  // SIGKILLed by the agent when its grace ran out
  std::string dir;  // the attempt folder it was started in (kept workers keep theirs)
  std::string error_file;
  std::string heartbeat_file;
  std::string nccl_trace_file;
  std::string nccl_trace_prefix;  // the TORCH_NCCL_DEBUG_INFO_TEMP_FILE mxrun sets (empty: none)
  std::chrono::system_clock::time_point started_at;
  WorkerHang hang;
  LastLines last_lines;
  std::unique_ptr<OutputRelay> out;
  std::unique_ptr<OutputRelay> err;
  std::unique_ptr<WorkerControl> control;
};

namespace {

// A standby started unbound: its rank's CPUs now apply to every thread of it and of its children
// (its memory policy cannot be changed from outside; pages it touches from now on follow the
// CPUs it runs on).
void RepinProcessTree(pid_t root, const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  const int max_cpu = *std::max_element(cpus.begin(), cpus.end());
  cpu_set_t* set = CPU_ALLOC(max_cpu + 1);
  const size_t size = CPU_ALLOC_SIZE(max_cpu + 1);
  CPU_ZERO_S(size, set);
  for (int cpu : cpus) CPU_SET_S(cpu, size, set);
  std::vector<pid_t> processes = ListDescendants(root, {});
  processes.push_back(root);
  for (pid_t process : processes) {
    DIR* tasks = opendir(absl::StrCat("/proc/", process, "/task").c_str());
    if (tasks == nullptr) continue;
    while (dirent* entry = readdir(tasks)) {
      int tid = 0;
      if (absl::SimpleAtoi(entry->d_name, &tid)) sched_setaffinity(tid, size, set);
    }
    closedir(tasks);
  }
  CPU_FREE(set);
}

// Why a SIGKILLed worker has not been reaped, from its /proc state.
std::string WhyNotReaped(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return "did not exit after SIGKILL (state unknown)";
  if (stat->state == 'D') return "did not exit after SIGKILL (uninterruptible sleep)";
  if (stat->state == 'Z') {
    return "exited but cannot be reaped (a thread of it still in uninterruptible sleep, or a "
           "tracer holding it)";
  }
  return absl::StrCat("did not exit after SIGKILL (", ProcStateName(stat->state), ")");
}

int OpenLog(const std::string& path) {
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) spdlog::warn("cannot open log file {}: {}", path, ErrnoText(errno));
  return fd;
}

}  // namespace

WorkerGroup::WorkerGroup(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian)
    : spec_(spec), loop_(loop), guardian_(guardian), standby_start_(spec.prestart, loop) {
  duplicate_out_.filters = spec_.logs.duplicate_stdout_filters;
  duplicate_err_.filters = spec_.logs.duplicate_stderr_filters;
}

WorkerGroup::~WorkerGroup() {
  CleanUp();
  CloseDuplicates();
}

void WorkerGroup::OpenDuplicates() {
  CloseDuplicates();
  for (auto [duplicate, name] : {std::pair{&duplicate_out_, "filtered_stdout.log"},
                                 std::pair{&duplicate_err_, "filtered_stderr.log"}}) {
    if (duplicate->filters.empty()) continue;
    MakeDirs(AttemptDir());
    duplicate->fd = OpenLog(absl::StrCat(AttemptDir(), "/", name));
  }
}

void WorkerGroup::CloseDuplicates() {
  for (LineDuplicate* duplicate : {&duplicate_out_, &duplicate_err_}) {
    if (duplicate->fd >= 0) close(duplicate->fd);
    duplicate->fd = -1;
  }
}

void WorkerGroup::Start(const RoundAssignment& round, double failure_time) {
  node_rank_ = round.node_rank;
  attempt_ = round.restart_count;
  round_ = round;
  standby_start_.RoundBegan([this] { MaybeStartStandbys(); });
  OpenDuplicates();
  standbys_pending_ = spec_.standby_workers > 0;
  for (int local_rank = 0; local_rank < round.local_world_size; ++local_rank) {
    auto worker = std::make_unique<Worker>(spec_.last_lines);
    worker->local_rank = local_rank;
    worker->global_rank = round.global_rank_base + local_rank;
    workers_.push_back(std::move(worker));
  }
  for (auto& worker : workers_) {
    SpawnWorker(*worker, round, failure_time);
    if (first_failure_) break;
  }
}

EnvMap WorkerGroup::WorkerEnv(const Worker& worker, const RoundAssignment& round,
                              double failure_time) const {
  GroupContract contract;
  contract.role = spec_.role;
  contract.node_rank = round.node_rank;
  contract.num_nodes = round.num_nodes;
  contract.local_world_size = round.local_world_size;
  contract.global_rank_base = round.global_rank_base;
  contract.world_size = round.world_size;
  contract.role_rank_base = round.global_rank_base;
  contract.role_world_size = round.world_size;
  contract.master_addr = round.master_addr;
  contract.master_port = round.master_port;
  contract.restart_count = round.restart_count;
  contract.max_restarts = round.max_restarts;
  contract.run_id = round.run_id;
  contract.use_agent_store = round.use_agent_store;
  WorkerExtras extras;
  extras.error_file = worker.error_file;
  extras.host_name = spec_.host_name;
  if (spec_.logs.NeedsFiles()) extras.log_dir = worker.dir;
  extras.heartbeat_file = worker.heartbeat_file;
  extras.timer_file = spec_.timer_file;
  extras.nccl_trace_prefix = worker.nccl_trace_prefix;
  extras.control_channel = true;
  extras.round = round.round;
  extras.failure_time = failure_time;
  if (spec_.virtual_local_rank) {
    // The launcher checked that CUDA_VISIBLE_DEVICES, when set, lists a device for every rank.
    extras.virtual_device = DeviceOfLocalRank(spec_.base_env, worker.local_rank).value_or("");
  }
  return BuildWorkerEnv(spec_.base_env, contract, worker.local_rank, extras);
}

void WorkerGroup::PrepareFiles(Worker& worker) {
  const std::string dir = absl::StrCat(AttemptDir(), "/", worker.local_rank);
  MakeDirs(dir);
  worker.dir = dir;
  worker.error_file = dir + "/error.json";
  unlink(worker.error_file.c_str());  // a stale file from an earlier run must not be reported
  if (spec_.heartbeat_files) {
    // A re-formed group reuses the attempt's folders: a stale heartbeat would count as a beat.
    worker.heartbeat_file = dir + "/heartbeat";
    unlink(worker.heartbeat_file.c_str());
  }
  // PyTorch's NCCL flight recorder dumps to this prefix + the global rank; into the kept log folder
  // when there is one, else where PyTorch puts it by default (a scratch folder would lose it).
  std::string nccl_prefix = "/tmp/nccl_trace_rank_";
  if (auto it = spec_.base_env.find("TORCH_NCCL_DEBUG_INFO_TEMP_FILE");
      it != spec_.base_env.end()) {
    nccl_prefix = it->second;
  } else if (spec_.attempts_dir_kept) {
    nccl_prefix = worker.nccl_trace_prefix = dir + "/nccl_trace_rank_";
  }
  worker.nccl_trace_file = absl::StrCat(nccl_prefix, worker.global_rank);
}

EnvMap WorkerGroup::StandbyEnv(const RoundAssignment& round) const {
  // No place in the job yet: the contract comes with the round notice that promotes it. It
  // knows how many workers share this node (threads) and that it is a standby.
  EnvMap env = spec_.base_env;
  for (const char* key : {"RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "GROUP_WORLD_SIZE",
                          "ROLE_RANK", "ROLE_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT",
                          "TORCHELASTIC_ERROR_FILE", "MXRUN_HEARTBEAT_FILE", "MXRUN_LOG_DIR",
                          "MXRUN_FAILURE_TIME", "NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID",
                          "MXRUN_RDZV_TOKEN"}) {
    env.erase(key);
  }
  env["LOCAL_WORLD_SIZE"] = std::to_string(round.local_world_size);
  if (ShouldDefaultOmpThreads(spec_.base_env, round.local_world_size)) env["OMP_NUM_THREADS"] = "1";
  env["MXRUN_HOST"] = spec_.host_name;
  env["MXRUN_CONTROL_FD"] = std::to_string(kControlFd);
  env["MXRUN_STANDBY"] = "1";
  return env;
}

void WorkerGroup::SpawnWorker(Worker& worker, const RoundAssignment& round, double failure_time) {
  const bool standby = worker.local_rank < 0;
  // A standby that cannot start fails nothing: the group simply has one spare fewer.
  auto fail = [&](std::string message) {
    if (standby) {
      spdlog::warn("cannot start a standby worker: {}", message);
      return;
    }
    RecordExit(worker, 127, 0);
    first_failure_->message = std::move(message);
  };
  if (!standby) PrepareFiles(worker);
  absl::StatusOr<std::unique_ptr<WorkerControl>> control = WorkerControl::Create();
  if (!control.ok()) return fail(std::string(control.status().message()));

  SpawnRequest request;
  request.executable = spec_.executable;
  const std::vector<std::string>& argv =
      standby && !spec_.standby_argv.empty() ? spec_.standby_argv : spec_.argv;
  for (const std::string& arg : argv) {
    request.argv.push_back(SubstituteLocalRank(arg, std::max(worker.local_rank, 0)));
  }
  request.env =
      EnvToStrings(standby ? StandbyEnv(round) : WorkerEnv(worker, round, failure_time));
  request.control_fd = (*control)->child_fd();
  if (!standby && worker.local_rank < static_cast<int>(spec_.numa.size())) {
    request.cpus = spec_.numa[worker.local_rank].cpus;
    request.memory_node = spec_.numa[worker.local_rank].memory_node;
  }

  int out_pipe[2] = {-1, -1};
  int err_pipe[2] = {-1, -1};
  if (pipe2(out_pipe, O_CLOEXEC) != 0 || pipe2(err_pipe, O_CLOEXEC) != 0) {
    std::string message = absl::StrCat("cannot create output pipes: ", ErrnoText(errno));
    for (int fd : {out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
    return fail(std::move(message));
  }
  auto make_relay = [&](int read_fd, StdMask stream, int console_fd, const char* file_name) {
    // A standby's lines go to the console only (as "[nN standby]") until it has a rank.
    StreamRouting routing = spec_.logs.Route(std::max(worker.local_rank, 0), stream);
    RelayTarget target;
    target.console_fd = routing.to_console || standby ? console_fd : -1;
    target.file_fd = routing.to_file && !standby ? OpenLog(worker.dir + "/" + file_name) : -1;
    target.node_rank = round.node_rank;
    target.global_rank = worker.global_rank;
    target.local_rank = worker.local_rank;
    target.is_stderr = stream == kStdErr;
    target.json = spec_.json_logs;
    target.prefix_template = spec_.line_prefix_template;
    target.role = spec_.role;
    target.host_name = spec_.host_name;
    target.duplicate = stream == kStdErr ? &duplicate_err_ : &duplicate_out_;
    return std::make_unique<OutputRelay>(read_fd, std::move(target), &worker.last_lines);
  };
  worker.out = make_relay(out_pipe[0], kStdOut, STDOUT_FILENO, "stdout.log");
  worker.err = make_relay(err_pipe[0], kStdErr, STDERR_FILENO, "stderr.log");
  request.stdout_fd = out_pipe[1];
  request.stderr_fd = err_pipe[1];

  absl::StatusOr<pid_t> pid = SpawnProcess(request);
  close(out_pipe[1]);
  close(err_pipe[1]);
  (*control)->CloseChildEnd();
  if (!pid.ok()) {
    worker.out.reset();
    worker.err.reset();
    return fail(std::string(pid.status().message()));
  }
  worker.pid = *pid;
  worker.running = true;
  worker.started_at = std::chrono::system_clock::now();
  guardian_.Track(worker.pid);
  loop_.WatchChild(worker.pid);
  for (OutputRelay* relay : {worker.out.get(), worker.err.get()}) {
    loop_.Watch(relay->fd(), [this, relay] {
      int fd = relay->fd();
      if (!relay->OnReadable()) loop_.Unwatch(fd);
    });
  }
  worker.control = std::move(*control);
  worker.control->Describe(standby ? absl::StrCat("standby worker (pid ", worker.pid, ")")
                                   : absl::StrCat("worker local_rank ", worker.local_rank,
                                                  " (pid ", worker.pid, ")"),
                           standby);
  WorkerControl* channel = worker.control.get();
  if (spec_.on_progress) {
    Worker* reporter = &worker;  // its rank is read at each report: a promoted standby gets one
    channel->OnProgress([this, reporter](const WorkerControlMessage& message) {
      if (reporter->local_rank >= 0) {
        spec_.on_progress(reporter->local_rank, reporter->global_rank, message);
      }
    });
  }
  loop_.Watch(channel->fd(), [this, channel] {
    if (!channel->OnReadable()) loop_.Unwatch(channel->fd());
  });
}

void WorkerGroup::ReadControlChannels() {
  for (auto& worker : workers_) {
    if (worker->running && worker->control && !worker->control->OnReadable()) {
      loop_.Unwatch(worker->control->fd());
    }
  }
}

void WorkerGroup::StartStandbys(const RoundAssignment& round) {
  while (static_cast<int>(standbys_.size()) < spec_.standby_workers) {
    auto standby = std::make_unique<Worker>(spec_.last_lines);
    standby->local_rank = -1;
    standby->global_rank = -1;
    SpawnWorker(*standby, round);
    if (!standby->running) return;  // said why; try again with the next round
    spdlog::info("standby worker started (pid {})", standby->pid);
    standbys_.push_back(std::move(standby));
  }
}

void WorkerGroup::MaybeStartStandbys() {
  if (!standbys_pending_ || first_failure_) return;
  // Once the workers have had the cores for their own start (standby_start.h).
  const bool due = standby_start_.Due([this] {
    for (const auto& worker : workers_) {
      if (!worker->running || !worker->control || worker->control->joined_round() < round_.round) {
        return false;
      }
    }
    return true;
  });
  if (!due) return;
  standbys_pending_ = false;
  StartStandbys(round_);
}

void WorkerGroup::RecordExit(Worker& worker, int exit_code, int term_signal) {
  worker.running = false;
  worker.exit_code = term_signal != 0 ? -1 : exit_code;
  worker.term_signal = term_signal;
  // Everything the worker wrote before exiting is in the pipes now: read it before judging.
  CloseStreams(worker);
  ++ended_;
  const bool failed = exit_code != 0 || term_signal != 0;
  worker.exited_ok = !failed && !worker.stopped_by_agent;
  if (!failed || first_failure_ || worker.stopped_by_agent) return;
  first_failure_ = FailureOf(worker, exit_code, term_signal);
}

void WorkerGroup::CloseStreams(Worker& worker) {
  for (OutputRelay* relay : {worker.out.get(), worker.err.get()}) {
    if (relay == nullptr || !relay->open()) continue;
    loop_.Unwatch(relay->fd());
    relay->DrainAndClose();
  }
  if (worker.control) {
    loop_.Unwatch(worker.control->fd());
    worker.control.reset();
  }
}

WorkerFailure WorkerGroup::FailureOf(const Worker& worker, int exit_code, int term_signal) const {
  WorkerFailure failure;
  failure.time = std::chrono::system_clock::now();
  failure.host = spec_.host_name;
  failure.node_rank = node_rank_;
  failure.global_rank = worker.global_rank;
  failure.local_rank = worker.local_rank;
  failure.pid = worker.pid;
  failure.attempt = attempt_;
  failure.exit_code = exit_code;
  failure.term_signal = term_signal;
  if (std::optional<ErrorFileContents> contents = ReadErrorFile(worker.error_file)) {
    if (spec_.attempts_dir_kept) failure.error_file = worker.error_file;
    failure.error_file_contents = contents->raw;
    failure.message = contents->message;
    failure.traceback = contents->traceback;
  }
  failure.last_lines = worker.last_lines.Lines();
  failure.hang = worker.hang;
  return failure;
}

WorkerGroup::Worker* WorkerGroup::FindRunning(int local_rank) {
  for (auto& worker : workers_) {
    if (worker->local_rank == local_rank && worker->running) return worker.get();
  }
  return nullptr;
}

void WorkerGroup::MarkHung(int local_rank, const WorkerHang& hang) {
  Worker* worker = FindRunning(local_rank);
  if (worker == nullptr) return;  // it ended meanwhile: its exit tells the story
  worker->hang = hang;
  if (!first_failure_) first_failure_ = FailureOf(*worker, 0, 0);
}

void WorkerGroup::NoteHang(int local_rank, const WorkerHang& hang) {
  if (Worker* worker = FindRunning(local_rank)) worker->hang = hang;
}

std::vector<WorkerGroup::WorkerStatus> WorkerGroup::Workers() const {
  std::vector<WorkerStatus> out;
  for (const auto& worker : workers_) {
    WorkerStatus s;
    s.local_rank = worker->local_rank;
    s.global_rank = worker->global_rank;
    s.pid = worker->pid;
    s.running = worker->running;
    s.exited_ok = worker->exited_ok;
    s.stopped_by_agent = worker->stopped_by_agent;
    s.exit_code = worker->exit_code;
    s.term_signal = worker->term_signal;
    s.killed_after_grace = worker->killed_after_grace;
    s.heartbeat_file = worker->heartbeat_file;
    s.nccl_trace_file = worker->nccl_trace_file;
    s.started_at = worker->started_at;
    out.push_back(std::move(s));
  }
  return out;
}

std::vector<std::string> WorkerGroup::LastLinesOf(int local_rank) const {
  for (const auto& worker : workers_) {
    if (worker->local_rank == local_rank) return worker->last_lines.Lines();
  }
  return {};
}

std::string WorkerGroup::AttemptDir() const {
  return absl::StrCat(spec_.attempts_dir, "/attempt_", attempt_);
}

bool WorkerGroup::OnChildExit(pid_t pid, int wait_status) {
  for (auto it = standbys_.begin(); it != standbys_.end(); ++it) {
    Worker& standby = **it;
    if (standby.pid != pid || !standby.running) continue;
    standby.running = false;
    CloseStreams(standby);
    guardian_.Forget(pid);
    if (!stopping_standbys_) {
      spdlog::warn("standby worker (pid {}) ended ({}); the group has one spare fewer", pid,
                   WIFSIGNALED(wait_status) ? SignalName(WTERMSIG(wait_status))
                                            : absl::StrCat("exit code ", WEXITSTATUS(wait_status)));
    }
    standbys_.erase(it);
    return true;
  }
  for (auto& worker : workers_) {
    if (worker->pid != pid || !worker->running) continue;
    if (WIFSIGNALED(wait_status)) {
      RecordExit(*worker, 0, WTERMSIG(wait_status));
    } else {
      RecordExit(*worker, WEXITSTATUS(wait_status), 0);
    }
    return true;
  }
  return false;
}

WorkerGroup::State WorkerGroup::state() const {
  if (first_failure_) return State::kFailed;
  for (const auto& worker : workers_) {
    if (worker->running) return State::kRunning;
  }
  return State::kSucceeded;
}

void WorkerGroup::Stop(int signo, std::chrono::milliseconds grace,
                       const std::function<void()>& reap) {
  StopStandbys();
  StopWhere([](const Worker&) { return true; }, signo, grace, reap);
  CleanUp();
}

void WorkerGroup::StopStandbys() {
  // A standby holds no work: no grace. CleanUp's sweep kills and reaps it.
  stopping_standbys_ = true;
  for (auto& standby : standbys_) {
    if (standby->running) kill(-standby->pid, SIGKILL);
  }
}

void WorkerGroup::StopWhere(const std::function<bool(const Worker&)>& which, int signo,
                            std::chrono::milliseconds grace, const std::function<void()>& reap) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + grace;
  std::vector<Worker*> stopping;
  for (auto& worker : workers_) {
    if (!worker->running || !which(*worker)) continue;
    stopping.push_back(worker.get());
    worker->stopped_by_agent = true;
    kill(-worker->pid, signo);
    // A stopped worker (SIGSTOP, a debugger) would hold its whole grace period: let it handle the
    // signal now.
    kill(-worker->pid, SIGCONT);
  }
  auto any_running = [&stopping] {
    for (const Worker* worker : stopping) {
      if (worker->running) return true;
    }
    return false;
  };
  // Every worker was signalled at the same moment, so each one's own grace ends at `deadline`.
  while (any_running() && !escalate_ && Clock::now() < deadline) {
    loop_.RunOnce(deadline);
    reap();
  }
  for (Worker* worker : stopping) {
    if (!worker->running) continue;
    spdlog::warn("worker rank {} (pid {}) still running {}s after {}: sending SIGKILL",
                 worker->global_rank, worker->pid, grace.count() / 1000.0, SignalName(signo));
    worker->killed_after_grace = true;
    kill(-worker->pid, SIGKILL);
  }
  // SIGKILL cannot be ignored, but a process in uninterruptible sleep acts on it only when it
  // leaves D, which may be never: the wait is bounded, and such a worker is left behind (still
  // counted as running here; the agent reaps it whenever it ends, as an orphan).
  const Clock::time_point kill_deadline = Clock::now() + kReapAfterKill;
  while (any_running() && Clock::now() < kill_deadline) {
    loop_.RunOnce(kill_deadline);
    reap();
  }
  for (Worker* worker : stopping) {
    if (!worker->running) continue;
    spdlog::error("worker rank {} (pid {}) {}: waited {} s, going on without it",
                  worker->global_rank, worker->pid, WhyNotReaped(worker->pid),
                  std::chrono::duration_cast<std::chrono::seconds>(kReapAfterKill).count());
  }
}

int WorkerGroup::SignalRunning(int signo) {
  int sent = 0;
  for (const auto& worker : workers_) {
    if (worker->running && kill(-worker->pid, signo) == 0) ++sent;
  }
  for (const auto& standby : standbys_) {
    if (standby->running) kill(-standby->pid, signo);
  }
  return sent;
}

bool WorkerGroup::Keepable(const Worker& w) {
  return w.running && w.control && w.control->in_process_restart() && !w.hang.hung();
}

bool WorkerGroup::HasKeepableWorkers() const {
  for (const auto& worker : workers_) {
    if (Keepable(*worker)) return true;
  }
  return false;
}

bool WorkerGroup::HasReadyPrestarts() const {
  if (!spec_.prestart) return false;
  for (const auto& standby : standbys_) {
    if (Keepable(*standby)) return true;
  }
  return false;
}

void WorkerGroup::StopUnkeepable(int signo, std::chrono::milliseconds grace,
                                 const std::function<void()>& reap) {
  StopWhere([](const Worker& w) { return !Keepable(w); }, signo, grace, reap);
  // What the ended workers left behind (their process groups, orphans re-parented to the agent);
  // the kept workers' own children run on.
  std::set<pid_t> spare = {guardian_.pid()};
  for (auto& standby : standbys_) spare.insert(standby->pid);
  for (auto& worker : workers_) {
    if (Keepable(*worker)) {
      spare.insert(worker->pid);
    } else if (worker->pid > 0) {
      kill(-worker->pid, SIGKILL);
    }
  }
  KillDescendants(spare);
}

bool WorkerGroup::PromoteStandby(int local_rank, const RoundAssignment& round,
                                 double failure_time, std::vector<std::string>& started) {
  for (auto it = standbys_.begin(); it != standbys_.end(); ++it) {
    if (!Keepable(**it)) continue;  // still loading
    std::unique_ptr<Worker> worker = std::move(*it);
    standbys_.erase(it);
    worker->local_rank = local_rank;
    worker->global_rank = round.global_rank_base + local_rank;
    PrepareFiles(*worker);
    // Its rank's CPUs before it learns the rank, so that it never runs a step elsewhere.
    if (local_rank < static_cast<int>(spec_.numa.size())) {
      RepinProcessTree(worker->pid, spec_.numa[local_rank].cpus);
    }
    if (!worker->control->Send(NoticeFor(*worker, round, failure_time))) {
      spdlog::warn("standby worker (pid {}) cannot be told its rank: dropping it", worker->pid);
      kill(-worker->pid, SIGKILL);  // reaped as an orphan; it had no place in the group
      guardian_.Forget(worker->pid);
      CloseStreams(*worker);
      return false;
    }
    for (OutputRelay* relay : {worker->out.get(), worker->err.get()}) {
      const bool err = relay == worker->err.get();
      const StreamRouting routing = spec_.logs.Route(local_rank, err ? kStdErr : kStdOut);
      relay->Retarget(round.node_rank, worker->global_rank, local_rank);
      relay->SetFile(routing.to_file
                         ? OpenLog(worker->dir + (err ? "/stderr.log" : "/stdout.log"))
                         : -1);
    }
    started.push_back(absl::StrCat(worker->global_rank, " (standby pid ", worker->pid, ")"));
    workers_.push_back(std::move(worker));
    return true;
  }
  return false;
}

RoundNotice WorkerGroup::NoticeFor(const Worker& worker, const RoundAssignment& round,
                                   double failure_time) const {
  RoundNotice notice;
  notice.round = round.round;
  notice.failure_time = failure_time;
  for (auto& [key, value] : WorkerEnv(worker, round, failure_time)) {
    auto base = spec_.base_env.find(key);
    if (base == spec_.base_env.end() || base->second != value) notice.env[key] = value;
  }
  return notice;
}

std::string WorkerGroup::Reassign(const RoundAssignment& round, double failure_time, int signo,
                                  std::chrono::milliseconds grace,
                                  const std::function<void()>& reap) {
  // Workers beyond the new round's local world size (a smaller node share) are stopped.
  StopWhere([&](const Worker& w) { return w.local_rank >= round.local_world_size; }, signo, grace,
            reap);
  node_rank_ = round.node_rank;
  if (attempt_ != round.restart_count) {
    attempt_ = round.restart_count;
    OpenDuplicates();  // the kept workers' lines now go to the new attempt's file
  }
  round_ = round;
  standby_start_.RoundBegan([this] { MaybeStartStandbys(); });
  standbys_pending_ = spec_.standby_workers > 0;
  first_failure_.reset();
  escalate_ = false;
  // Tell each kept worker its place. Nothing here runs the loop, so no worker ends unseen.
  std::vector<std::string> kept, started;
  std::set<const Worker*> untold;
  for (auto& worker : workers_) {
    if (!worker->running) continue;
    worker->global_rank = round.global_rank_base + worker->local_rank;
    if (Keepable(*worker) && worker->control->Send(NoticeFor(*worker, round, failure_time))) {
      for (OutputRelay* relay : {worker->out.get(), worker->err.get()}) {
        if (relay != nullptr) relay->Retarget(round.node_rank, worker->global_rank, worker->local_rank);
      }
      kept.push_back(absl::StrCat(worker->global_rank, " (pid ", worker->pid, ")"));
    } else {
      spdlog::warn("worker local_rank {} (pid {}) cannot be told the new round: restarting it",
                   worker->local_rank, worker->pid);
      untold.insert(worker.get());
    }
  }
  if (!untold.empty()) {
    StopWhere([&](const Worker& w) { return untold.count(&w) > 0; }, SIGKILL,
              std::chrono::milliseconds(0), reap);
  }
  // Ended workers leave the group; new processes take the ranks nobody holds.
  for (auto& worker : workers_) {
    if (!worker->running && worker->pid > 0) guardian_.Forget(worker->pid);
  }
  std::erase_if(workers_, [](const std::unique_ptr<Worker>& w) { return !w->running; });
  ended_ = 0;
  for (int local_rank = 0; local_rank < round.local_world_size && !first_failure_; ++local_rank) {
    if (FindRunning(local_rank) != nullptr) continue;
    if (PromoteStandby(local_rank, round, failure_time, started)) continue;
    auto fresh = std::make_unique<Worker>(spec_.last_lines);
    fresh->local_rank = local_rank;
    fresh->global_rank = round.global_rank_base + local_rank;
    Worker& worker = *fresh;
    workers_.push_back(std::move(fresh));
    SpawnWorker(worker, round, failure_time);
    if (worker.running) started.push_back(absl::StrCat(worker.global_rank, " (pid ", worker.pid, ")"));
  }
  std::sort(workers_.begin(), workers_.end(),
            [](const auto& a, const auto& b) { return a->local_rank < b->local_rank; });
  return absl::StrCat("kept rank(s) ", kept.empty() ? "none" : absl::StrJoin(kept, ", "),
                      "; started rank(s) ", started.empty() ? "none" : absl::StrJoin(started, ", "));
}

void WorkerGroup::Finish() { CleanUp(); }

void WorkerGroup::CleanUp() {
  if (cleaned_up_) return;
  cleaned_up_ = true;
  // Leftovers in a worker's process group (it exited, its children did not) and orphans that were
  // re-parented to the agent.
  for (auto& worker : workers_) {
    if (worker->pid > 0) kill(-worker->pid, SIGKILL);
  }
  stopping_standbys_ = true;
  KillDescendants({guardian_.pid()});
  for (auto& worker : workers_) {
    CloseStreams(*worker);
    if (worker->pid > 0 && !worker->running) guardian_.Forget(worker->pid);
  }
  for (auto& standby : standbys_) {  // killed and reaped by the sweep above
    CloseStreams(*standby);
    guardian_.Forget(standby->pid);
  }
  standbys_.clear();
}

}  // namespace mxrun

#include "agent/workers/worker_group.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "agent/process/descendants.h"
#include "agent/process/proc_stat.h"
#include "agent/process/process_launcher.h"
#include "agent/workers/failure_report.h"
#include "agent/workers/survivors_leave.h"
#include "agent/workers/worker_output.h"
#include "common/files.h"
#include "common/signal_names.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {

WorkerGroup::WorkerGroup(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian)
    : spec_(spec), loop_(loop), guardian_(guardian), files_(spec) {
  if (spec_.logs.collapse_window.count() > 0) {
    collapse_ = std::make_unique<ConsoleCollapser>(
        loop_, spec_.logs.collapse_window,
        ConsoleStyle{spec_.json_logs, spec_.line_prefix_template, spec_.role, spec_.host_name});
  }
}

WorkerGroup::~WorkerGroup() { CleanUp(); }

void WorkerGroup::Start(const RoundAssignment& round, double failure_time) {
  node_rank_ = round.node_rank;
  attempt_ = round.restart_count;
  round_ = round;
  files_.Begin(attempt_);
  for (int local_rank = 0; local_rank < round.local_world_size; ++local_rank) {
    auto worker = std::make_unique<WorkerProcess>(spec_.last_lines);
    worker->local_rank = local_rank;
    worker->global_rank = round.global_rank_base + local_rank;
    workers_.push_back(std::move(worker));
  }
  for (auto& worker : workers_) {
    SpawnWorker(*worker, round, failure_time);
    if (first_failure_) break;
  }
}

RankFiles WorkerGroup::FilesOf(const WorkerProcess& worker) {
  return {worker.dir, worker.error_file, worker.heartbeat_file, worker.nccl_trace_prefix,
          worker.flight_socket};
}

void WorkerGroup::SpawnWorker(WorkerProcess& worker, const RoundAssignment& round,
                              double failure_time) {
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
  if (!standby) files_.PrepareRank(worker);
  absl::StatusOr<std::unique_ptr<WorkerControl>> control = WorkerControl::Create();
  if (!control.ok()) return fail(std::string(control.status().message()));

  SpawnRequest request;
  request.executable = spec_.executable;
  const std::vector<std::string>& argv =
      standby && !spec_.standby_argv.empty() ? spec_.standby_argv : spec_.argv;
  for (const std::string& arg : argv) {
    request.argv.push_back(SubstituteLocalRank(arg, std::max(worker.local_rank, 0)));
  }
  request.env = EnvToStrings(
      standby ? StandbyEnv(spec_, round.local_world_size)
              : RankEnv(spec_, worker.local_rank, FilesOf(worker), round, failure_time));
  request.control_fd = (*control)->child_fd();
  if (!standby && worker.local_rank < static_cast<int>(spec_.numa.size())) {
    request.cpus = spec_.numa[worker.local_rank].cpus;
    request.memory_node = spec_.numa[worker.local_rank].memory_node;
  }

  absl::StatusOr<ChildOutputFds> output =
      OpenWorkerOutput(worker, spec_, files_, collapse_.get(), round.node_rank);
  if (!output.ok()) return fail(std::string(output.status().message()));
  request.stdout_fd = output->stdout_fd;
  request.stderr_fd = output->stderr_fd;

  absl::StatusOr<pid_t> pid = SpawnProcess(request);
  close(output->stdout_fd);
  close(output->stderr_fd);
  (*control)->CloseChildEnd();
  if (!pid.ok()) {
    worker.out.reset();
    worker.err.reset();
    return fail(std::string(pid.status().message()));
  }
  worker.pid = *pid;
  worker.running = true;
  worker.started_at = std::chrono::system_clock::now();
  worker.oom_kills_at_start = ReadOomKillCounts(worker.pid);
  guardian_.Track(worker.pid);
  loop_.WatchChild(worker.pid);
  WatchWorkerOutput(worker, loop_);
  worker.control = std::move(*control);
  worker.control->Describe(
      standby ? absl::StrCat("standby worker (pid ", worker.pid, ")")
              : absl::StrCat("worker local_rank ", worker.local_rank, " (pid ", worker.pid, ")"),
      standby);
  WorkerControl* channel = worker.control.get();
  WorkerProcess* reporter =
      &worker;  // its rank is read at each report: a promoted standby gets one
  channel->OnProgress([this, reporter](const WorkerControlMessage& message) {
    if (reporter->local_rank >= 0) {
      progress_.push_back({reporter->local_rank, reporter->global_rank, message});
    }
  });
  loop_.Watch(channel->fd(), [this, channel] {
    if (!channel->OnReadable()) loop_.Unwatch(channel->fd());
  });
}

void WorkerGroup::LookBeforeKeeping() {
  ReadControlChannels();
  NoteStoppedWorkers();
}

void WorkerGroup::NoteStoppedWorkers() {
  for (auto& worker : workers_) {
    if (!worker->running || worker->frozen) continue;
    const std::optional<ProcStat> stat = ReadProcStat(worker->pid);
    if (!stat || !IsStoppedState(stat->state)) continue;
    worker->frozen = true;
    spdlog::warn(
        "worker rank {} (local_rank {}, pid {}) is in state {}: it cannot take a new round "
        "in-process",
        worker->global_rank, worker->local_rank, worker->pid, ProcStateName(stat->state));
  }
}

void WorkerGroup::ReadControlChannels() {
  for (auto& worker : workers_) {
    if (worker->running && worker->control && !worker->control->OnReadable()) {
      loop_.Unwatch(worker->control->fd());
    }
  }
}

std::unique_ptr<WorkerProcess> WorkerGroup::SpawnStandby(const RoundAssignment& round) {
  auto standby = std::make_unique<WorkerProcess>(spec_.last_lines);
  standby->local_rank = -1;
  standby->global_rank = -1;
  SpawnWorker(*standby, round);
  if (!standby->running) return nullptr;  // said why
  return standby;
}

bool WorkerGroup::AllJoined(int round) const {
  for (const auto& worker : workers_) {
    if (!worker->running || !worker->control || worker->control->joined_round() < round) {
      return false;
    }
  }
  return true;
}

void WorkerGroup::RecordExit(WorkerProcess& worker, int exit_code, int term_signal) {
  worker.running = false;
  worker.exit_code = term_signal != 0 ? -1 : exit_code;
  worker.term_signal = term_signal;
  // Everything the worker wrote before exiting is in the pipes now: read it before judging.
  CloseStreams(worker);
  ++ended_;
  const bool failed = exit_code != 0 || term_signal != 0;
  // Its last lines go out now, before the agent says anything about it.
  if (failed && collapse_) collapse_->Flush();
  worker.exited_ok = !failed && !worker.stopped_by_agent;
  if (!failed || first_failure_ || worker.stopped_by_agent) return;
  first_failure_ = FailureOf(worker, exit_code, term_signal);
}

void WorkerGroup::CloseStreams(WorkerProcess& worker) {
  CloseWorkerOutput(worker, loop_);
  if (worker.control) {
    loop_.Unwatch(worker.control->fd());
    worker.control.reset();
  }
}

WorkerFailure WorkerGroup::FailureOf(const WorkerProcess& worker, int exit_code,
                                     int term_signal) const {
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
  if (term_signal == SIGKILL && !worker.stopped_by_agent) {  // not the agent's own kill
    failure.oom_kill =
        OomKillNote(worker.oom_kills_at_start, ReadOomKillCountsAgain(worker.oom_kills_at_start));
  }
  return failure;
}

WorkerProcess* WorkerGroup::FindRunning(int local_rank) {
  for (auto& worker : workers_) {
    if (worker->local_rank == local_rank && worker->running) return worker.get();
  }
  return nullptr;
}

void WorkerGroup::MarkHung(int local_rank, const WorkerHang& hang) {
  WorkerProcess* worker = FindRunning(local_rank);
  if (worker == nullptr) return;  // it ended meanwhile: its exit tells the story
  worker->hang = hang;
  if (!first_failure_) first_failure_ = FailureOf(*worker, 0, 0);
}

void WorkerGroup::NoteHang(int local_rank, const WorkerHang& hang) {
  if (WorkerProcess* worker = FindRunning(local_rank)) worker->hang = hang;
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
    s.flight_socket = worker->flight_socket;
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

std::string WorkerGroup::AttemptDir() const { return files_.Dir(); }

bool WorkerGroup::OnChildExit(pid_t pid, int wait_status) {
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
  if (ranks_awaited_ > 0) return State::kRunning;
  for (const auto& worker : workers_) {
    if (worker->running) return State::kRunning;
  }
  return State::kSucceeded;
}

void WorkerGroup::Stop(int signo, std::chrono::milliseconds grace,
                       const std::function<void()>& reap) {
  StopWhere([](const WorkerProcess&) { return true; }, signo, grace, reap);
  CleanUp();
}

void WorkerGroup::StopWhere(const std::function<bool(const WorkerProcess&)>& which, int signo,
                            std::chrono::milliseconds grace, const std::function<void()>& reap) {
  using Clock = std::chrono::steady_clock;
  std::vector<WorkerProcess*> stopping;
  for (auto& worker : workers_) {
    if (worker->running && which(*worker)) stopping.push_back(worker.get());
  }
  auto any_running = [&stopping] {
    for (const WorkerProcess* worker : stopping) {
      if (worker->running) return true;
    }
    return false;
  };
  auto signal = [signo](WorkerProcess& worker) {
    worker.stopped_by_agent = true;
    kill(-worker.pid, signo);
    // A stopped worker (SIGSTOP, a debugger) would hold its whole grace period: let it handle the
    // signal now.
    kill(-worker.pid, SIGCONT);
  };
  // After a death the others are often leaving already (survivors_leave.h).
  SignalSurvivors(loop_, stopping, signo, first_failure_ ? &*first_failure_ : nullptr, signal,
                  reap);
  const Clock::time_point deadline = Clock::now() + grace;
  // The grace runs from the last signal (one sent before the others' time to leave gets that more).
  while (any_running() && !escalate_ && Clock::now() < deadline) {
    loop_.RunOnce(deadline);
    reap();
  }
  for (WorkerProcess* worker : stopping) {
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
  for (WorkerProcess* worker : stopping) {
    if (!worker->running) continue;
    spdlog::error("worker rank {} (pid {}) {}: waited {} s, going on without it",
                  worker->global_rank, worker->pid, DescribeUnreaped(worker->pid),
                  std::chrono::duration_cast<std::chrono::seconds>(kReapAfterKill).count());
  }
}

int WorkerGroup::SignalRunning(int signo) {
  int sent = 0;
  for (const auto& worker : workers_) {
    if (worker->running && kill(-worker->pid, signo) == 0) ++sent;
  }
  return sent;
}

bool WorkerGroup::HasKeepableWorkers() const {
  for (const auto& worker : workers_) {
    if (Keepable(*worker)) return true;
  }
  return false;
}

void WorkerGroup::BeginRound(const RoundAssignment& round) {
  node_rank_ = round.node_rank;
  if (attempt_ != round.restart_count) {
    attempt_ = round.restart_count;
    files_.Begin(attempt_);  // the kept workers' lines now go to the new attempt's files
  }
  round_ = round;
  first_failure_.reset();
  ranks_awaited_ = 0;
  escalate_ = false;
}

std::vector<WorkerProcess*> WorkerGroup::RunningWorkers() {
  std::vector<WorkerProcess*> running;
  for (auto& worker : workers_) {
    if (worker->running) running.push_back(worker.get());
  }
  return running;
}

void WorkerGroup::DropEnded() {
  for (auto& worker : workers_) {
    if (!worker->running && worker->pid > 0) guardian_.Forget(worker->pid);
  }
  std::erase_if(workers_, [](const std::unique_ptr<WorkerProcess>& w) { return !w->running; });
  ended_ = 0;
}

WorkerProcess& WorkerGroup::StartRank(int local_rank, const RoundAssignment& round,
                                      double failure_time) {
  auto fresh = std::make_unique<WorkerProcess>(spec_.last_lines);
  fresh->local_rank = local_rank;
  fresh->global_rank = round.global_rank_base + local_rank;
  WorkerProcess& worker = *fresh;
  workers_.push_back(std::move(fresh));
  SortByRank();
  SpawnWorker(worker, round, failure_time);
  return worker;
}

void WorkerGroup::Adopt(std::unique_ptr<WorkerProcess> worker, int local_rank,
                        const RoundAssignment& round) {
  worker->local_rank = local_rank;
  worker->global_rank = round.global_rank_base + local_rank;
  files_.PrepareRank(*worker);
  RetargetWorkerOutput(*worker, spec_, round.node_rank);
  workers_.push_back(std::move(worker));
  SortByRank();
}

void WorkerGroup::SortByRank() {
  std::sort(workers_.begin(), workers_.end(),
            [](const auto& a, const auto& b) { return a->local_rank < b->local_rank; });
}

void WorkerGroup::Release(WorkerProcess& process) {
  CloseStreams(process);
  guardian_.Forget(process.pid);
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
  KillDescendants({guardian_.pid()});  // warm standbys too (in_process_restart.h)
  for (auto& worker : workers_) {
    CloseStreams(*worker);
    if (worker->pid > 0 && !worker->running) guardian_.Forget(worker->pid);
  }
  if (collapse_) collapse_->Flush();
}

}  // namespace mxrun

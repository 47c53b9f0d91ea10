#include "agent/elastic_agent.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/cancel_summary.h"
#include "agent/failure_report.h"
#include "common/signal_names.h"
#include "spdlog/spdlog.h"

namespace mxrun {

namespace {

// One line for the log and for the service's status (`systemctl status`); with `stopping`, the
// status also tells systemd the service is stopping. Logged first: the status may be the last thing
// said before a long stop.
void Announce(ServiceNotifier& notifier, spdlog::level::level_enum level, const std::string& text,
              bool stopping = false) {
  spdlog::log(level, "{}", text);
  if (stopping) {
    notifier.Stopping(text);
  } else {
    notifier.Status(text);
  }
}

}  // namespace

ElasticAgent::ElasticAgent(AgentConfig config, Rendezvous& rendezvous, DeathGuardian& guardian)
    : config_(std::move(config)),
      events_(config_.events),
      rendezvous_(rendezvous),
      guardian_(guardian) {
  config_.worker.on_progress = [this](int local_rank, int global_rank,
                                      const WorkerControlMessage& report) {
    OnProgress(local_rank, global_rank, report);
  };
}

void ElasticAgent::OnProgress(int local_rank, int global_rank, WorkerControlMessage report) {
  const AgentObserver::Time now = AgentObserver::Time::clock::now();
  // A report without its step time: the time since the rank's previous report, per step.
  LastReport& last = last_reports_[global_rank];
  if (report.step_seconds < 0 && last.step >= 0 && report.step > last.step) {
    report.step_seconds = std::chrono::duration<double>(now - last.at).count() /
                          static_cast<double>(report.step - last.step);
  }
  last = {report.step, now};
  if (hangs_) hangs_->ProgressSeen(local_rank);
  Account([&](GoodputClock& clock, AgentObserver::Time) { clock.Progress(now, report.step); });
  if (AgentObserver* observer = config_.observer) {
    observer->Progress(now, local_rank, global_rank, report);
  }
  progress_[global_rank] = {global_rank, local_rank, report.step, report.step_seconds, now};
  std::vector<RankProgress> ranks;
  ranks.reserve(progress_.size());
  for (const auto& [rank, p] : progress_) ranks.push_back(p);
  rendezvous_.ReportProgress(ranks);
  if (judge_stragglers_) {
    if (std::optional<StragglerNews> news =
            stragglers_.Report(global_rank, report.step, report.step_seconds)) {
      OnStraggler(*news);
    }
  }
}

void ElasticAgent::OnStraggler(const StragglerNews& news) {
  const int local_rank = news.rank - round_.global_rank_base;
  if (phase_ != Phase::kRunning || group_ == nullptr || local_rank < 0 ||
      local_rank >= round_.local_world_size) {
    return;  // about a group that is gone, or a rank that is not this node's
  }
  const bool restart = news.straggling && config_.straggler_restart;
  spdlog::warn("{} (local_rank {}; --straggler_factor={:g}, --straggler_steps={}){}",
               DescribeStraggler(news), local_rank, config_.stragglers.factor,
               config_.stragglers.steps,
               restart ? "; --straggler_restart: restarting the group" : "");
  if (config_.observer) config_.observer->StragglerChanged(AgentObserver::Time::clock::now(), news);
  if (restart) {
    WorkerHang hang;
    hang.rule = kStragglerRule;
    hang.detail = DescribeStraggler(news);
    group_->MarkHung(local_rank, hang);  // CheckGroup reports it as this node's failure
  }
}

void ElasticAgent::Account(
    const std::function<void(GoodputClock&, AgentObserver::Time)>& event) {
  event(goodput_, AgentObserver::Time::clock::now());
  if (config_.observer) config_.observer->GoodputChanged(goodput_);
}

int ElasticAgent::Exit(int exit_code, std::optional<std::string> why_failed) {
  if (goodput_.ran()) {
    Account([](GoodputClock& clock, AgentObserver::Time now) { clock.Ended(now); });
    spdlog::info("{}", FormatGoodput(goodput_.Report(AgentObserver::Time::clock::now())));
  }
  if (why_failed) {
    events_.Agent("FAILED", std::nullopt, std::move(why_failed));
  } else {
    events_.Agent("SUCCEEDED");  // as torchelastic: the agent ran to the end, whatever its workers
  }
  return exit_code;
}

bool IsForwardOnlySignal(int signo) { return signo == SIGUSR1 || signo == SIGUSR2; }

void ElasticAgent::OnSignal(int signo) {
  if (signo == SIGCHLD) {
    ReapChildren();
    return;
  }
  if (IsForwardOnlySignal(signo)) {
    const int sent = group_ != nullptr ? group_->SignalRunning(signo) : 0;
    spdlog::info("received {}: passed it on to {} running worker(s); the job goes on",
                 SignalName(signo), sent);
    return;
  }
  if (stop_signal_ == 0) {
    stop_signal_ = signo;
    spdlog::warn("received {}: stopping workers", SignalName(signo));
  } else if (group_ != nullptr) {
    spdlog::warn("received {} again: killing workers now", SignalName(signo));
    group_->Escalate();
  }
}

void ElasticAgent::ReapChildren() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (group_ != nullptr && group_->OnChildExit(pid, status)) continue;
    if (pid == guardian_.pid()) {
      spdlog::warn("the guardian process (pid {}) exited unexpectedly", pid);
    }
    // Anything else is an orphaned descendant re-parented to us: reaping it is all we do.
  }
}

std::vector<WorkerGroup::WorkerStatus> ElasticAgent::StopGroup(int signo) {
  if (group_ == nullptr) return {};
  hangs_->Watch(nullptr);
  std::vector<WorkerGroup::WorkerStatus> running;
  if (events_.enabled()) {
    for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
      if (worker.running) running.push_back(worker);
    }
  }
  group_->Stop(signo, config_.term_timeout, [this] { ReapChildren(); });
  for (const WorkerGroup::WorkerStatus& worker : running) {
    events_.Worker("TERMINATED", worker.local_rank, worker.pid);
  }
  std::vector<WorkerGroup::WorkerStatus> ended = group_->Workers();
  ended_workers_.clear();
  for (const WorkerGroup::WorkerStatus& worker : ended) {
    if (worker.pid > 0) ended_workers_[worker.pid] = worker.global_rank;
  }
  group_.reset();
  return ended;
}

void ElasticAgent::KeepOrStopGroup() {
  if (group_ == nullptr) return;
  group_->ReadControlChannels();
  if (!group_->HasKeepableWorkers() && !group_->HasReadyPrestarts()) {
    StopGroup(SIGTERM);
    return;
  }
  // In-process restart: the workers that said they can take the next round stay; the rest go.
  // (None stays with --prestart's interpreters: the group is kept for them to take the ranks.)
  hangs_->Watch(nullptr);
  group_->StopUnkeepable(SIGTERM, config_.term_timeout, [this] { ReapChildren(); });
}

void ElasticAgent::CheckGroup() {
  if (phase_ != Phase::kRunning || group_ == nullptr) return;
  switch (group_->state()) {
    case WorkerGroup::State::kRunning:
      return;
    case WorkerGroup::State::kSucceeded:
      for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
        events_.Worker("SUCCEEDED", worker.local_rank, worker.pid, 0);
      }
      hangs_->Watch(nullptr);
      group_->Finish();
      group_.reset();
      phase_ = Phase::kAwaiting;
      if (config_.observer) config_.observer->GroupSucceeded(AgentObserver::Time::clock::now());
      Account([](GoodputClock& clock, AgentObserver::Time now) { clock.Ended(now); });
      rendezvous_.ReportSucceeded();
      return;
    case WorkerGroup::State::kFailed: {
      const WorkerFailure failure = *group_->first_failure();
      group_->ReadControlChannels();
      spdlog::warn("worker rank {} (local_rank {}, pid {}) failed: {}; {}", failure.global_rank,
                   failure.local_rank, failure.pid, DescribeExit(failure),
                   group_->HasKeepableWorkers()
                       ? "keeping the workers that take the next round in-process"
                   : group_->HasReadyPrestarts()
                       ? "stopping the workers; the pre-started interpreters take the ranks"
                       : "stopping the group");
      // torchelastic's exit code: negative for a signal; none for a hung worker still running.
      std::optional<int> exit_code;
      if (failure.term_signal != 0) {
        exit_code = -failure.term_signal;
      } else if (!failure.hang.hung()) {
        exit_code = failure.exit_code;
      }
      events_.Worker("FAILED", failure.local_rank, failure.pid, exit_code,
                     failure.error_file_contents.empty()
                         ? std::nullopt
                         : std::optional<std::string>(failure.error_file_contents));
      phase_ = Phase::kAwaiting;
      if (config_.observer) {
        config_.observer->WorkerFailed(AgentObserver::Time::clock::now(), failure);
      }
      Account([](GoodputClock& clock, AgentObserver::Time now) { clock.Failure(now); });
      failure_time_ = std::chrono::duration<double>(failure.time.time_since_epoch()).count();
      rendezvous_.ReportFailure(failure);  // first, so that other nodes stop at the same time
      KeepOrStopGroup();
      return;
    }
  }
}

int ElasticAgent::JobFailed(const RendezvousEvent& event) {
  SummaryContext context{config_.entrypoint_name, event.restarts_spent, event.max_restarts};
  std::string summary = FormatFailureSummary(event.first_failure, context);
  if (config_.worker.json_logs) {
    spdlog::error("{}", summary);  // one JSON record; the summary's lines stay in its message
  } else {
    std::fwrite(summary.data(), 1, summary.size(), stderr);
  }
  std::fflush(stderr);
  if (!config_.agent_error_file.empty() &&
      !WriteAgentErrorFile(config_.agent_error_file, event.first_failure)) {
    spdlog::warn("cannot write the error file {}", config_.agent_error_file);
  }
  if (event.same_failure_every_attempt && config_.do_not_requeue_exit_code > 0) {
    spdlog::error("every attempt ({} of them) failed the same way ({}): a requeue would too; "
                  "exit code {} (do not requeue; --do_not_requeue_exit_code=0 exits 1 instead)",
                  event.restarts_spent + 1, event.failure_signature,
                  config_.do_not_requeue_exit_code);
    return config_.do_not_requeue_exit_code;
  }
  return kExitWorkersFailed;
}

std::optional<int> ElasticAgent::OnRendezvousEvent(const RendezvousEvent& event) {
  using Kind = RendezvousEvent::Kind;
  switch (event.kind) {
    case Kind::kRegistered:
      if (event.excluded && event.reason != waiting_reason_) {
        spdlog::warn("{}; this agent waits and is admitted again when it ends", event.reason);
      } else if (!event.excluded && excluded_) {
        spdlog::info("the master admits this node again: its back-off ended");
      }
      excluded_ = event.excluded;
      waiting_reason_ = event.reason;
      config_.notifier.Ready(event.reason);
      return std::nullopt;
    case Kind::kRoundReady: {
      if (phase_ != Phase::kJoining) return std::nullopt;  // stale: a newer request is pending
      phase_ = Phase::kRunning;
      StartHealthChecks();
      if (group_ != nullptr) {
        const std::string what = group_->Reassign(event.round, failure_time_, SIGTERM,
                                                  config_.term_timeout, [this] { ReapChildren(); });
        spdlog::warn("round {}: in-process restart: {}", event.round.round, what);
      } else {
        ReclaimGpuMemory();
        group_ = std::make_unique<WorkerGroup>(config_.worker, *loop_, guardian_);
        group_->Start(event.round, failure_time_);
      }
      failure_time_ = 0;
      if (events_.enabled()) {
        events_.SetRound(event.round);
        events_.Agent("RENDEZVOUS", std::chrono::duration<double, std::milli>(
                                        EventLoop::Deadline::clock::now() - joined_at_)
                                        .count());
        events_.Agent("ASSIGN_WORKER_RANKS", 0.0);  // ranks come with the round
        for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
          if (worker.running) events_.Worker("START", worker.local_rank, worker.pid);
        }
      }
      hangs_->Watch(group_.get());
      if (config_.observer) {
        config_.observer->RoundStarted(AgentObserver::Time::clock::now(), event.round,
                                       group_->Workers());
      }
      Account([](GoodputClock& clock, AgentObserver::Time now) { clock.RoundStarted(now); });
      stragglers_.Reset();
      last_reports_.clear();
      progress_.clear();
      round_ = event.round;
      judge_stragglers_ = !rendezvous_.JudgesStragglers() && config_.stragglers.steps > 0;
      const RoundAssignment& r = event.round;
      config_.notifier.Ready(absl::StrCat(
          "round ", r.round, ": node ", r.node_rank, " of ", r.num_nodes, ", ranks ",
          r.global_rank_base, "-", r.global_rank_base + r.local_world_size - 1, " of ",
          r.world_size, ", restarts ", r.restart_count, "/", r.max_restarts));
      return std::nullopt;
    }
    case Kind::kRejoin:
      // The next round's workers count the time lost from here when the failure was another
      // node's (or the group re-forms for a node that left or joined).
      if (failure_time_ == 0) {
        failure_time_ =
            std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                .count();
      }
      if (config_.observer) {
        config_.observer->Reforming(AgentObserver::Time::clock::now(), event.restart,
                                    event.reason);
      }
      Account([](GoodputClock& clock, AgentObserver::Time now) { clock.Failure(now); });
      if (event.restart) {
        Announce(config_.notifier, spdlog::level::warn,
                 absl::StrCat("restarting the worker group (", event.restarts_spent, " of ",
                              event.max_restarts, " restarts): ", event.reason));
      } else {
        Announce(config_.notifier,
                 event.master_silent ? spdlog::level::warn : spdlog::level::info,
                 absl::StrCat("re-forming the worker group: ", event.reason));
      }
      if (event.master_silent) {
        StopGroup(SIGTERM);
      } else {
        KeepOrStopGroup();
      }
      phase_ = Phase::kJoining;
      if (!Join()) {
        StopGroup(SIGTERM);
        return Exit(UnhealthyExit(), "the node is unhealthy");
      }
      return std::nullopt;
    case Kind::kStraggler:
      if (event.round.round == round_.round) OnStraggler(event.straggler);
      return std::nullopt;
    case Kind::kPeerFinished:
      if (phase_ == Phase::kRunning) {
        spdlog::info("{}: the exit barrier starts for the workers still running here",
                     event.reason);
        hangs_->PeersFinished(event.reason);
      }
      return std::nullopt;
    case Kind::kJobSucceeded:
      NoteExcluded(event);
      config_.notifier.Stopping("job succeeded");
      StopGroup(SIGTERM);  // normally already gone
      return Exit(kExitSuccess);
    case Kind::kJobFailed:
      NoteExcluded(event);
      config_.notifier.Stopping("job failed: the restart budget is spent");
      StopGroup(SIGTERM);
      return Exit(JobFailed(event));
    case Kind::kError:
      Announce(config_.notifier, spdlog::level::err,
               absl::StrCat("rendezvous failed: ", event.error.message()), /*stopping=*/true);
      StopGroup(SIGTERM);
      return Exit(kExitRendezvousFailed,
                  absl::StrCat("rendezvous failed: ", event.error.message()));
  }
  return std::nullopt;
}

void ElasticAgent::NoteExcluded(const RendezvousEvent& event) {
  for (const std::string& line : event.excluded_nodes) {
    spdlog::warn("left out of the job's rounds during the job: {}", line);
  }
}

void ElasticAgent::ReclaimGpuMemory() {
  std::map<pid_t, int> ended = std::exchange(ended_workers_, {});
  if (ended.empty() || config_.gpu_entries.empty() || config_.gpu_reclaim.timeout.count() <= 0) {
    return;
  }
  if (!gpu_reader_) gpu_reader_ = std::make_unique<NvmlGpuReader>();
  GpuReclaimHooks hooks;
  hooks.now = [] { return std::chrono::steady_clock::now(); };
  hooks.sleep = [](std::chrono::milliseconds d) { std::this_thread::sleep_for(d); };
  // The loop is not running while this waits: a stop signal is seen pending, and ends the wait.
  hooks.stop = [this] {
    sigset_t pending;
    sigemptyset(&pending);
    if (sigpending(&pending) != 0) return false;
    for (int signo : config_.handled_signals) {
      if (!IsForwardOnlySignal(signo) && sigismember(&pending, signo) == 1) return true;
    }
    return false;
  };
  hooks.describe_pid = DescribeProcessState;
  const GpuReclaimOutcome outcome =
      WaitForGpuMemory(*gpu_reader_, config_.gpu_entries, ended, config_.gpu_reclaim, hooks);
  if (outcome.text.empty()) return;
  if (outcome.released) {
    spdlog::info("{}", outcome.text);
  } else {
    spdlog::warn("{}", outcome.text);
  }
}

bool ElasticAgent::Healthy() {
  if (!health_) health_ = std::make_unique<HealthChecker>(config_.health);
  const std::vector<std::string> problems = health_->Check();
  if (problems.empty()) return true;
  const std::string why = absl::StrJoin(problems, "; ");
  Announce(config_.notifier, spdlog::level::err,
           absl::StrCat("this node is unhealthy: ", why, "; it does not join the job (exit ",
                        UnhealthyExit(), ", do not requeue here)"),
           /*stopping=*/true);
  rendezvous_.ReportUnhealthy(why);
  return false;
}

int ElasticAgent::UnhealthyExit() {
  return config_.do_not_requeue_exit_code > 0 ? config_.do_not_requeue_exit_code
                                              : kExitWorkersFailed;
}

bool ElasticAgent::Join() {
  if (!Healthy()) return false;
  Account([](GoodputClock& clock, AgentObserver::Time now) { clock.Joining(now); });
  joined_at_ = EventLoop::Deadline::clock::now();
  loop_->Cancel(waiting_note_timer_);
  waiting_note_timer_ = loop_->At(joined_at_ + config_.waiting_notice_after, [this] { NoteWaiting(); });
  waiting_reason_.clear();
  rendezvous_.Join();
  return true;
}

void ElasticAgent::NoteWaiting() {
  if (phase_ != Phase::kJoining) return;  // a round came: nothing to say
  const auto now = EventLoop::Deadline::clock::now();
  const double waited = std::chrono::duration<double>(now - joined_at_).count();
  spdlog::info("no round yet after {:.0f} s: {} ({})", waited,
               waiting_reason_.empty() ? "the rendezvous has not answered this node's join"
                                       : waiting_reason_,
               config_.rendezvous_description.empty() ? "the local rendezvous"
                                                      : config_.rendezvous_description);
  waiting_note_timer_ = loop_->At(now + std::chrono::seconds(30), [this] { NoteWaiting(); });
}

void ElasticAgent::WatchdogTick() {
  // WATCHDOG=1 when due (service_notify.h), then a timer for the next one.
  config_.notifier.Tick(ServiceNotifier::Clock::now());
  if (std::optional<ServiceNotifier::Clock::time_point> next = config_.notifier.NextWatchdog()) {
    loop_->At(*next, [this] { WatchdogTick(); });
  }
}

void ElasticAgent::StartHealthChecks() {
  // --health_check_interval while this round's workers run: the first one period on.
  if (config_.health.interval.count() <= 0) return;
  loop_->Cancel(health_timer_);
  health_timer_ = loop_->Every(EventLoop::Deadline::clock::now() + config_.health.interval,
                               config_.health.interval, [this] {
                                 if (phase_ == Phase::kRunning && !became_unhealthy_ &&
                                     !Healthy()) {
                                   became_unhealthy_ = true;  // Run() stops and leaves
                                 }
                               });
}

int ElasticAgent::Run() {
  std::vector<int> signals(config_.handled_signals.begin(), config_.handled_signals.end());
  signals.push_back(SIGCHLD);
  auto loop = EventLoop::Create(signals, [this](int signo) { OnSignal(signo); });
  if (!loop.ok()) {
    spdlog::error("{}", std::string(loop.status().message()));
    return kExitWorkersFailed;
  }
  loop_ = std::move(*loop);
  if (config_.timer_pipe) config_.worker.timer_file = config_.timer_pipe->path();
  hangs_ = std::make_unique<HangMonitor>(config_.hang, *loop_, std::move(config_.timer_pipe));
  WatchdogTick();
  // Events are buffered here as they arrive, also while a group is being stopped (a nested loop).
  loop_->Watch(rendezvous_.EventFd(), [this] {
    for (RendezvousEvent& event : rendezvous_.TakeEvents()) pending_.push_back(std::move(event));
  });

  phase_ = Phase::kJoining;
  if (!Join()) return Exit(UnhealthyExit(), "the node is unhealthy");
  while (true) {
    if (stop_signal_ != 0) {
      config_.notifier.Stopping(absl::StrCat("stopping the workers on ", SignalName(stop_signal_)));
      const int exit_code = 128 + stop_signal_;
      std::vector<StoppedWorker> stopped;
      for (const WorkerGroup::WorkerStatus& w : StopGroup(stop_signal_)) {
        stopped.push_back({w.global_rank, w.running, w.exit_code, w.term_signal,
                           w.killed_after_grace});
      }
      rendezvous_.Leave();
      spdlog::warn("{}", FormatCancellation(stop_signal_, config_.term_timeout, std::move(stopped),
                                            exit_code));
      return Exit(exit_code, absl::StrCat("received ", SignalName(stop_signal_)));
    }
    if (became_unhealthy_) {
      // Its workers would fail on it: they stop, the node leaves, the others re-form.
      StopGroup(SIGTERM);
      rendezvous_.Leave();
      return Exit(UnhealthyExit(), "the node became unhealthy");
    }
    hangs_->Check();  // a hung worker fails the group, which CheckGroup then reports
    CheckGroup();
    if (group_ != nullptr && phase_ == Phase::kRunning) group_->MaybeStartStandbys();
    if (!pending_.empty()) {
      RendezvousEvent event = std::move(pending_.front());
      pending_.pop_front();
      if (std::optional<int> exit_code = OnRendezvousEvent(event)) return *exit_code;
      continue;
    }
    // The loop wakes for its timers (the watchdog, waiting notes, health checks, --prestart) by
    // itself; the hang monitor's checks still run here, each turn.
    loop_->RunOnce(hangs_->NextWake());
  }
}

}  // namespace mxrun

#include "agent/elastic_agent.h"

#include <signal.h>
#include <sys/wait.h>

#include <chrono>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "agent/cancel_summary.h"
#include "agent/own_observers.h"
#include "agent/workers/failure_report.h"
#include "common/signal_names.h"
#include "spdlog/spdlog.h"

namespace mxrun {

ElasticAgent::ElasticAgent(AgentConfig config, Rendezvous& rendezvous, DeathGuardian& guardian)
    : config_(std::move(config)),
      rendezvous_(rendezvous),
      guardian_(guardian),
      health_(settings_.health,
              settings_.do_not_requeue_exit_code > 0 ? settings_.do_not_requeue_exit_code
                                                     : kExitWorkersFailed,
              rendezvous,
              [this](const std::string& text) {
                Announce(spdlog::level::err, text, /*stopping=*/true);
              }),
      own_observers_(MakeOwnObservers(config_.observers, rendezvous, config_.events,
                                      config_.rendezvous_description, config_.waiting_notice_after,
                                      std::move(config_.notifier))) {
  for (const std::unique_ptr<AgentObserver>& observer : own_observers_) {
    observers_.push_back(observer.get());
  }
  observers_.insert(observers_.end(), config_.observers.begin(), config_.observers.end());
}

void ElasticAgent::Tell(const std::function<void(AgentObserver&)>& event) {
  for (AgentObserver* observer : observers_) event(*observer);
}

// Logged first: the status may be the last thing said before a long stop.
void ElasticAgent::Announce(spdlog::level::level_enum level, const std::string& text,
                            bool stopping) {
  spdlog::log(level, "{}", text);
  Tell([&](AgentObserver& o) { o.Status(text, stopping); });
}

void ElasticAgent::OnProgress(int local_rank, int global_rank, WorkerControlMessage report) {
  const AgentObserver::Time now = AgentObserver::Time::clock::now();
  report = progress_.Record(local_rank, global_rank, report, now);
  if (hangs_) hangs_->ProgressSeen(local_rank, report.automatic);
  Tell([&](AgentObserver& o) { o.Progress(now, local_rank, global_rank, report); });
  // The rendezvous judges stragglers: the local one this node's ranks, a master the whole job's.
  rendezvous_.ReportProgress(progress_.Latest());
}

void ElasticAgent::OnStraggler(const StragglerNews& news) {
  const int local_rank = news.rank - round_.global_rank_base;
  if (phase_ != Phase::kRunning || workers_ == nullptr || local_rank < 0 ||
      local_rank >= round_.local_world_size) {
    return;  // about a group that is gone, or a rank that is not this node's
  }
  const bool restart = news.straggling && settings_.straggler_restart;
  spdlog::warn("{} (local_rank {}; --straggler_factor={:g}, --straggler_steps={}){}",
               DescribeStraggler(news), local_rank, settings_.stragglers.factor,
               settings_.stragglers.steps,
               restart ? "; --straggler_restart: restarting the group" : "");
  Tell([&](AgentObserver& o) { o.StragglerChanged(AgentObserver::Time::clock::now(), news); });
  if (restart) {
    WorkerHang hang;
    hang.rule = kStragglerRule;
    hang.detail = DescribeStraggler(news);
    workers_->MarkHung(local_rank, hang);  // CheckGroup reports it as this node's failure
  }
}

int ElasticAgent::Exit(int exit_code, std::optional<std::string> why_failed) {
  Tell([&](AgentObserver& o) {
    o.Exited(AgentObserver::Time::clock::now(), exit_code, why_failed);
  });
  return exit_code;
}

bool IsForwardOnlySignal(int signo) { return signo == SIGUSR1 || signo == SIGUSR2; }

void ElasticAgent::OnSignal(int signo) {
  if (signo == SIGCHLD) {
    ReapChildren();
    return;
  }
  if (IsForwardOnlySignal(signo)) {
    const int sent = workers_ != nullptr ? workers_->SignalRunning(signo) : 0;
    spdlog::info("received {}: passed it on to {} running worker(s); the job goes on",
                 SignalName(signo), sent);
    return;
  }
  if (stop_signal_ == 0) {
    stop_signal_ = signo;
    spdlog::warn("received {}: stopping workers", SignalName(signo));
  } else if (workers_ != nullptr) {
    spdlog::warn("received {} again: killing workers now", SignalName(signo));
    workers_->Escalate();
  }
}

void ElasticAgent::ReapChildren() {
  int status = 0;
  pid_t pid;
  while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
    if (workers_ != nullptr && workers_->OnChildExit(pid, status)) continue;
    if (pid == guardian_.pid()) {
      spdlog::warn("the guardian process (pid {}) exited unexpectedly", pid);
    }
    // Anything else is an orphaned descendant re-parented to us: reaping it is all we do.
  }
}

std::vector<WorkerGroup::WorkerStatus> ElasticAgent::StopGroup(int signo) {
  if (workers_ == nullptr) return {};
  hangs_->Watch(nullptr);
  std::vector<WorkerGroup::WorkerStatus> running;
  for (const WorkerGroup::WorkerStatus& worker : workers_->Workers()) {
    if (worker.running) running.push_back(worker);
  }
  workers_->Stop(signo, settings_.term_timeout, [this] { ReapChildren(); });
  Tell([&](AgentObserver& o) { o.WorkersStopped(AgentObserver::Time::clock::now(), running); });
  std::vector<WorkerGroup::WorkerStatus> ended = workers_->Workers();
  stopped_for_next_round_ = ended;
  workers_.reset();
  return ended;
}

void ElasticAgent::KeepOrStopGroup() {
  if (workers_ == nullptr) return;
  if (workers_->LookBeforeKeeping() == NodeWorkers::Keep::kNothing) {
    StopGroup(SIGTERM);
    return;
  }
  // In-process restart: the workers that said they can take the next round stay; the rest go.
  // (None stays with --prestart's interpreters: the group is kept for them to take the ranks.)
  hangs_->Watch(nullptr);
  const std::vector<WorkerGroup::WorkerStatus> stopped =
      workers_->StopUnkeepable(SIGTERM, settings_.term_timeout, [this] { ReapChildren(); });
  Tell([&](AgentObserver& o) { o.WorkersStopped(AgentObserver::Time::clock::now(), stopped); });
}

void ElasticAgent::CheckGroup() {
  if (phase_ != Phase::kRunning || workers_ == nullptr) return;
  switch (workers_->state()) {
    case WorkerGroup::State::kRunning:
      return;
    case WorkerGroup::State::kSucceeded: {
      const std::vector<WorkerGroup::WorkerStatus> workers = workers_->Workers();
      hangs_->Watch(nullptr);
      workers_->Finish();
      workers_.reset();
      phase_ = Phase::kAwaiting;
      Tell([&](AgentObserver& o) { o.GroupSucceeded(AgentObserver::Time::clock::now(), workers); });
      rendezvous_.ReportSucceeded();
      return;
    }
    case WorkerGroup::State::kFailed: {
      WorkerFailure failure = *workers_->first_failure();
      if (AwaitingOwnStopSignal(failure)) return;
      // A collective that failed: its peers' recorders before anything stops (every node's).
      hangs_->TakeFlightRecordsOnCollectiveFailure(failure);
      const NodeWorkers::Keep keep = workers_->LookBeforeKeeping();
      spdlog::warn("worker rank {} (local_rank {}, pid {}) failed: {}; {}", failure.global_rank,
                   failure.local_rank, failure.pid, DescribeExit(failure),
                   keep == NodeWorkers::Keep::kWorkers
                       ? "keeping the workers that take the next round in-process"
                   : keep == NodeWorkers::Keep::kPrestarts
                       ? "stopping the workers; the pre-started interpreters take the ranks"
                       : "stopping the group");
      phase_ = Phase::kAwaiting;
      Tell([&](AgentObserver& o) { o.WorkerFailed(AgentObserver::Time::clock::now(), failure); });
      failure_time_ = std::chrono::duration<double>(failure.time.time_since_epoch()).count();
      rendezvous_.ReportFailure(failure);  // first, so that other nodes stop at the same time
      KeepOrStopGroup();
      return;
    }
  }
}

bool ElasticAgent::AwaitingOwnStopSignal(const WorkerFailure& failure) {
  const OwnStopSignalWait::Verdict verdict =
      own_signal_.Check(std::chrono::steady_clock::now(), failure, stop_signal_ != 0);
  if (verdict == OwnStopSignalWait::Verdict::kBegin) {
    loop_->At(own_signal_.deadline(), [this] { CheckGroup(); });
    spdlog::info(
        "worker rank {} ended by {} that mxrun did not send: waiting up to {} s for "
        "mxrun's own stop signal (a cancelled job) before counting it as a failure",
        failure.global_rank, DescribeExit(failure),
        settings_.await_own_stop_signal.count() / 1000.0);
  }
  return verdict != OwnStopSignalWait::Verdict::kJudge;
}

void ElasticAgent::AwaitOwnStopSignalAfter(const std::string& what) {
  if (settings_.await_own_stop_signal.count() <= 0 || stop_signal_ != 0) return;
  spdlog::info(
      "{}: waiting up to {} s for mxrun's own stop signal (a cancelled job: its master's "
      "host was stopped first) before counting it as a failure",
      what, settings_.await_own_stop_signal.count() / 1000.0);
  const auto deadline = std::chrono::steady_clock::now() + settings_.await_own_stop_signal;
  while (stop_signal_ == 0 && std::chrono::steady_clock::now() < deadline) {
    loop_->RunOnce(deadline);
  }
}

int ElasticAgent::JobFailed(const RendezvousEvent& event) {
  ReportJobFailure(event.first_failure,
                   {config_.entrypoint_name, event.restarts_spent, event.max_restarts},
                   config_.worker.json_logs, settings_.agent_error_file);
  if (event.same_failure_every_attempt && settings_.do_not_requeue_exit_code > 0) {
    spdlog::error(
        "every attempt ({} of them) failed the same way ({}): a requeue would too; "
        "exit code {} (do not requeue; --do_not_requeue_exit_code=0 exits 1 instead)",
        event.restarts_spent + 1, event.failure_signature, settings_.do_not_requeue_exit_code);
    return settings_.do_not_requeue_exit_code;
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
      Tell(
          [&](AgentObserver& o) { o.Registered(AgentObserver::Time::clock::now(), event.reason); });
      return std::nullopt;
    case Kind::kRoundReady: {
      if (phase_ != Phase::kJoining) return std::nullopt;  // stale: a newer request is pending
      phase_ = Phase::kRunning;
      own_signal_.Reset();
      health_.CheckWhile(*loop_, [this] { return phase_ == Phase::kRunning; });
      Tell([&](AgentObserver& o) {
        o.RoundReady(AgentObserver::Time::clock::now(), event.round, workers_ != nullptr);
      });
      if (workers_ != nullptr) {
        const std::string what =
            workers_->Reassign(event.round, failure_time_, SIGTERM, settings_.term_timeout,
                               [this] { ReapChildren(); });
        spdlog::warn("round {}: in-process restart: {}", event.round.round, what);
      } else {
        ReclaimGpuMemory();
        workers_ = std::make_unique<NodeWorkers>(
            config_.worker, *loop_, guardian_, event.round, failure_time_,
            NodeWorkers::AgentSide{[this](int local_rank) { hangs_->RankStarted(local_rank); },
                                   [this](WorkerGroup::ProgressReport r) {
                                     OnProgress(r.local_rank, r.global_rank, std::move(r.message));
                                   },
                                   [this] { return phase_ == Phase::kRunning; }});
      }
      failure_time_ = 0;
      stopped_for_next_round_.clear();
      hangs_->Watch(&workers_->group());
      progress_.Clear();
      round_ = event.round;
      const std::vector<WorkerGroup::WorkerStatus> workers = workers_->Workers();
      Tell([&](AgentObserver& o) {
        o.RoundStarted(AgentObserver::Time::clock::now(), event.round, workers);
      });
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
      Tell([&](AgentObserver& o) {
        o.Reforming(AgentObserver::Time::clock::now(), event.restart, event.reason);
      });
      if (event.restart) {
        Announce(spdlog::level::warn,
                 absl::StrCat("restarting the worker group (", event.restarts_spent, " of ",
                              event.max_restarts, " restarts): ", event.reason));
      } else {
        Announce(event.master_silent ? spdlog::level::warn : spdlog::level::info,
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
        return Exit(health_.exit_code(), "the node is unhealthy");
      }
      return std::nullopt;
    case Kind::kFlightRequest:  // another node judged a hang: this node's dumps, before any stop
      if (phase_ == Phase::kRunning && event.round.round == round_.round) {
        rendezvous_.OfferFlightRecords(
            hangs_->TakeFlightRecordsForPeer(round_.round, event.reason));
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
      Tell([](AgentObserver& o) { o.Status("job succeeded", /*stopping=*/true); });
      StopGroup(SIGTERM);  // normally already gone
      return Exit(kExitSuccess);
    case Kind::kJobFailed:
      NoteExcluded(event);
      Tell([](AgentObserver& o) {
        o.Status("job failed: the restart budget is spent", /*stopping=*/true);
      });
      if (std::vector<WorkerGroup::WorkerStatus> ended = StopGroup(SIGTERM); stop_signal_ != 0) {
        return Cancelled(std::move(ended));  // the failure was the cancellation reaching a peer
      }
      return Exit(JobFailed(event));
    case Kind::kError:
      AwaitOwnStopSignalAfter(absl::StrCat("the rendezvous failed (", event.error.message(), ")"));
      if (stop_signal_ == 0) {
        Announce(spdlog::level::err, absl::StrCat("rendezvous failed: ", event.error.message()),
                 /*stopping=*/true);
      }
      if (std::vector<WorkerGroup::WorkerStatus> ended = StopGroup(SIGTERM); stop_signal_ != 0) {
        return Cancelled(std::move(ended));  // the master's host was cancelled first
      }
      return Exit(kExitRendezvousFailed,
                  absl::StrCat("rendezvous failed: ", event.error.message()));
  }
  return std::nullopt;
}

// Cancelled by a stop signal (also when it came while the agent was stopping for another
// reason: under scancel, every node's workers get the signal too, so a peer's failure or its
// master's end may reach this node first). Says how each rank ended.
int ElasticAgent::Cancelled(const std::vector<WorkerGroup::WorkerStatus>& ended) {
  const int exit_code = 128 + stop_signal_;
  // No group now: the one stopped to re-form, if the signal came before the next round.
  const bool stopped_before = ended.empty() && !stopped_for_next_round_.empty();
  std::vector<StoppedWorker> stopped;
  for (const WorkerGroup::WorkerStatus& w : stopped_before ? stopped_for_next_round_ : ended) {
    stopped.push_back({w.global_rank, w.running, w.exit_code, w.term_signal, w.killed_after_grace});
  }
  rendezvous_.Leave();
  spdlog::warn("{}", FormatCancellation(stop_signal_, settings_.term_timeout, std::move(stopped),
                                        exit_code, stopped_before));
  return Exit(exit_code, absl::StrCat("received ", SignalName(stop_signal_)));
}

void ElasticAgent::NoteExcluded(const RendezvousEvent& event) {
  for (const std::string& line : event.excluded_nodes) {
    spdlog::warn("left out of the job's rounds during the job: {}", line);
  }
}

void ElasticAgent::ReclaimGpuMemory() {
  if (!reclaimer_) {
    std::set<int> stops;  // a stop signal ends the wait
    for (int signo : settings_.handled_signals) {
      if (!IsForwardOnlySignal(signo)) stops.insert(signo);
    }
    reclaimer_ =
        std::make_unique<GpuMemoryReclaimer>(settings_.gpu_reclaim, config_.gpu_entries, stops);
  }
  std::map<pid_t, int> ended;  // pid -> global rank of the group stopped before this round
  for (const WorkerGroup::WorkerStatus& worker : stopped_for_next_round_) {
    if (worker.pid > 0) ended[worker.pid] = worker.global_rank;
  }
  reclaimer_->Reclaim(std::move(ended));
}

bool ElasticAgent::Join() {
  if (!health_.Healthy()) return false;
  Tell([&](AgentObserver& o) { o.Joining(AgentObserver::Time::clock::now()); });
  waiting_reason_.clear();
  rendezvous_.Join();
  return true;
}

int ElasticAgent::Run() {
  std::vector<int> signals(settings_.handled_signals.begin(), settings_.handled_signals.end());
  signals.push_back(SIGCHLD);
  auto loop = EventLoop::Create(signals, [this](int signo) { OnSignal(signo); });
  if (!loop.ok()) {
    spdlog::error("{}", std::string(loop.status().message()));
    return kExitWorkersFailed;
  }
  loop_ = std::move(*loop);
  if (config_.timer_pipe) config_.worker.timer_file = config_.timer_pipe->path();
  // A hang judged here takes the other nodes' flight recorders through the rendezvous.
  config_.hang.flight.gather = [this](const FlightRecordSet& own, const std::set<int>& expected,
                                      std::chrono::milliseconds budget,
                                      const std::function<void()>& meanwhile) {
    return rendezvous_.GatherFlightRecords(own, expected, budget, meanwhile);
  };
  hangs_ = std::make_unique<HangMonitor>(config_.hang, *loop_, std::move(config_.timer_pipe));
  const TurnHooks::Hook check_group = loop_->AfterEachTurn([this] { CheckGroup(); });
  Tell([this](AgentObserver& o) { o.Started(*loop_); });
  // Events are buffered here as they arrive, also while a group is being stopped (a nested loop).
  loop_->Watch(rendezvous_.EventFd(), [this] {
    for (RendezvousEvent& event : rendezvous_.TakeEvents()) pending_.push_back(std::move(event));
  });

  phase_ = Phase::kJoining;
  if (!Join()) return Exit(health_.exit_code(), "the node is unhealthy");
  while (true) {
    if (stop_signal_ != 0) {
      const std::string stopping =
          absl::StrCat("stopping the workers on ", SignalName(stop_signal_));
      Tell([&](AgentObserver& o) { o.Status(stopping, /*stopping=*/true); });
      return Cancelled(StopGroup(stop_signal_));
    }
    if (health_.became_unhealthy()) {
      // Its workers would fail on it: they stop, the node leaves, the others re-form.
      StopGroup(SIGTERM);
      rendezvous_.Leave();
      return Exit(health_.exit_code(), "the node became unhealthy");
    }
    loop_->EndTurn();  // the hang checks, then CheckGroup, then the workers' progress and standbys
    if (!pending_.empty()) {
      RendezvousEvent event = std::move(pending_.front());
      pending_.pop_front();
      if (std::optional<int> exit_code = OnRendezvousEvent(event)) return *exit_code;
      continue;
    }
    // The loop wakes for its timers by itself: the watchdog, waiting notes, health checks,
    // --prestart's start and the hang monitor's checks.
    loop_->RunOnce(std::nullopt);
  }
}

}  // namespace mxrun

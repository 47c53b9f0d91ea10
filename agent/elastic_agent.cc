#include "agent/elastic_agent.h"

#include <sys/wait.h>

#include <cerrno>
#include <cstdio>

#include "agent/failure_report.h"
#include "common/signal_names.h"
#include "spdlog/spdlog.h"

namespace mxrun {

ElasticAgent::ElasticAgent(AgentConfig config, Rendezvous& rendezvous, DeathGuardian& guardian)
    : config_(std::move(config)), rendezvous_(rendezvous), guardian_(guardian) {}

void ElasticAgent::OnSignal(int signo) {
  if (signo == SIGCHLD) {
    ReapChildren();
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

int ElasticAgent::Run() {
  std::vector<int> signals(config_.handled_signals.begin(), config_.handled_signals.end());
  signals.push_back(SIGCHLD);
  auto loop = EventLoop::Create(signals, [this](int signo) { OnSignal(signo); });
  if (!loop.ok()) {
    spdlog::error("{}", std::string(loop.status().message()));
    return kExitWorkersFailed;
  }
  loop_ = std::move(*loop);
  auto reap = [this] { ReapChildren(); };

  while (true) {
    absl::StatusOr<RoundAssignment> round = rendezvous_.NextRound();
    if (!round.ok()) {
      spdlog::error("rendezvous failed: {}", std::string(round.status().message()));
      return kExitRendezvousFailed;
    }
    WorkerGroup group(config_.worker, *loop_, guardian_);
    group_ = &group;
    group.Start(*round);
    while (group.state() == WorkerGroup::State::kRunning && stop_signal_ == 0) {
      loop_->RunOnce(std::nullopt);
    }
    if (stop_signal_ != 0) {
      group.Stop(stop_signal_, config_.term_timeout, reap);
      group_ = nullptr;
      return 128 + stop_signal_;
    }
    if (group.state() == WorkerGroup::State::kSucceeded) {
      group.Finish();
      group_ = nullptr;
      absl::Status done = rendezvous_.ReportSuccess();
      if (!done.ok()) {
        spdlog::error("{}", std::string(done.message()));
        return kExitRendezvousFailed;
      }
      return kExitSuccess;
    }

    // A worker failed: stop the rest, then let the holder of the restart budget decide.
    const WorkerFailure failure = *group.first_failure();
    spdlog::warn("worker rank {} (local_rank {}, pid {}) failed: {}; stopping the group",
                 failure.global_rank, failure.local_rank, failure.pid, DescribeExit(failure));
    group.Stop(SIGTERM, config_.term_timeout, reap);
    group_ = nullptr;
    if (stop_signal_ != 0) return 128 + stop_signal_;
    absl::StatusOr<FailureDecision> decision = rendezvous_.ReportGroupFailure(failure);
    if (!decision.ok()) {
      spdlog::error("rendezvous failed: {}", std::string(decision.status().message()));
      return kExitRendezvousFailed;
    }
    if (decision->restart) {
      spdlog::warn("restarting the worker group ({} of {} restarts)", round->restart_count + 1,
                   round->max_restarts);
      continue;
    }
    SummaryContext context{config_.entrypoint_name, round->restart_count, round->max_restarts};
    std::string summary = FormatFailureSummary(decision->first_failure, context);
    std::fwrite(summary.data(), 1, summary.size(), stderr);
    std::fflush(stderr);
    if (!config_.agent_error_file.empty()) {
      if (!WriteAgentErrorFile(config_.agent_error_file, decision->first_failure)) {
        spdlog::warn("cannot write the error file {}", config_.agent_error_file);
      }
    }
    return kExitWorkersFailed;
  }
}

}  // namespace mxrun

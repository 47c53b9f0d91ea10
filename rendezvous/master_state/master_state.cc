#include "rendezvous/master_state/master_state.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

ToAgent MasterState::Message(NodeId node, ToAgent::Kind kind) {
  ToAgent m;
  m.node = node;
  m.kind = kind;
  return m;
}

ToAgent MasterState::Refusal(NodeId node, absl::Status status) {
  ToAgent m = Message(node, ToAgent::Kind::kRefused);
  m.refusal = std::move(status);
  m.close_session = true;
  return m;
}

namespace {

std::string NodeRange(const JobDesc& job) {
  return job.min_nodes == job.max_nodes ? absl::StrCat(job.min_nodes)
                                        : absl::StrCat(job.min_nodes, ":", job.max_nodes);
}

absl::Status ValidateJoin(const NodeDesc& desc, const JobDesc& job) {
  if (job.min_nodes < 1 || job.min_nodes > job.max_nodes || job.max_nodes > kMaxNodes) {
    return absl::InvalidArgumentError(absl::StrCat("node range ", job.min_nodes, ":", job.max_nodes,
                                                   " is not valid; accepted: 0 < "
                                                   "MIN <= MAX <= ",
                                                   kMaxNodes));
  }
  if (job.max_restarts < 0) return absl::InvalidArgumentError("max_restarts must be >= 0");
  if (desc.local_world_size < 1 || desc.local_world_size > kMaxLocalWorldSize) {
    return absl::InvalidArgumentError(absl::StrCat("local world size ", desc.local_world_size,
                                                   " is not valid; accepted: 1 to ",
                                                   kMaxLocalWorldSize));
  }
  if (desc.host.empty() || desc.host.size() > kMaxHostLength || desc.address.empty() ||
      desc.address.size() > kMaxHostLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name and address must have 1 to ", kMaxHostLength, " characters"));
  }
  if (desc.requested_rank < -1 || desc.requested_rank >= job.max_nodes) {
    return absl::InvalidArgumentError(
        absl::StrCat("node rank ", desc.requested_rank, " is not valid for a job of at most ",
                     job.max_nodes, " nodes; accepted: 0 to ", job.max_nodes - 1));
  }
  if (desc.master_port < 0 || desc.master_port > 65535) {
    return absl::InvalidArgumentError("master port must be 0 to 65535");
  }
  if (absl::Status topology = ValidateTopology(desc.topology); !topology.ok()) return topology;
  if (job.timeouts.heartbeat_interval.count() <= 0 || job.timeouts.missed_heartbeats < 1 ||
      job.timeouts.join_timeout.count() <= 0 || job.timeouts.last_call_timeout.count() < 0) {
    return absl::InvalidArgumentError(
        "time-outs must be positive (heartbeat interval, missed heartbeats, join timeout)");
  }
  const ExclusionRule& exclusion = job.exclusion;
  if (exclusion.after_failures < 0 || exclusion.after_failures > 1000 ||
      (exclusion.after_failures > 0 &&
       (exclusion.window.count() <= 0 || exclusion.backoff.count() <= 0 ||
        exclusion.backoff > std::chrono::hours(24 * 7)))) {
    return absl::InvalidArgumentError(
        "exclusion rule is not valid; accepted: 0 to 1000 failures, and with failures a positive "
        "window and a back-off of at most a week");
  }
  const StragglerRule& stragglers = job.stragglers;
  if (stragglers.steps < 0 ||
      (stragglers.steps > 0 && !(stragglers.factor > 1 && stragglers.factor <= 1000))) {
    return absl::InvalidArgumentError(
        "straggler rule is not valid; accepted: a factor above 1 (at most 1000) and 0 or more "
        "steps");
  }
  return absl::OkStatus();
}

}  // namespace

MasterState::Run* MasterState::FindRunOf(NodeId node) {
  auto it = node_runs_.find(node);
  if (it == node_runs_.end()) return nullptr;
  auto run = runs_.find(it->second);
  return run == runs_.end() ? nullptr : &run->second;
}

bool MasterState::IsMember(const Run& run, NodeId node) {
  auto it = run.nodes.find(node);
  return it != run.nodes.end() && it->second.member;
}

void MasterState::Count(Run& run, NodeState state, int delta) {
  switch (state) {
    case NodeState::kWaiting:
      run.waiting += delta;
      break;
    case NodeState::kStopping:
      run.stopping += delta;
      break;
    case NodeState::kSucceeded:
      run.succeeded += delta;
      break;
    case NodeState::kRunning:
    case NodeState::kExcluded:
      break;
  }
}

void MasterState::SetState(Run& run, Node& node, NodeState state) {
  Count(run, node.state, -1);
  node.state = state;
  Count(run, state, +1);
}

void MasterState::Seen(Run& run, Node& node, Time now) {
  node.last_seen = now;
  run.lease_check_at = std::min(run.lease_check_at, now + run.job.timeouts.lease());
}

void MasterState::ForgetNodes(Run& run) {
  run.nodes.clear();
  run.members.clear();
  run.requested_ranks.clear();
  run.waiting = run.stopping = run.succeeded = 0;
}

std::string MasterState::PhaseName(Phase phase) {
  switch (phase) {
    case Phase::kWaiting:
      return "waiting";
    case Phase::kRunning:
      return "running";
    case Phase::kSucceeded:
      return "succeeded";
    case Phase::kFailed:
      return "failed";
  }
  return "?";
}

std::string MasterState::NodeStateName(NodeState state) {
  switch (state) {
    case NodeState::kWaiting:
      return "waiting";
    case NodeState::kRunning:
      return "running";
    case NodeState::kSucceeded:
      return "succeeded";
    case NodeState::kStopping:
      return "stopping";
    case NodeState::kExcluded:
      return "excluded";
  }
  return "?";
}

MasterState::Out MasterState::Join(Time now, NodeId node, const std::string& run_id,
                                   const NodeDesc& desc, const JobDesc& job) {
  Out out;
  if (absl::Status status = ValidateRunId(run_id); !status.ok()) {
    out.push_back(Refusal(node, status));
    return out;
  }
  if (absl::Status status = ValidateJoin(desc, job); !status.ok()) {
    out.push_back(Refusal(node, status));
    return out;
  }
  if (auto known = node_runs_.find(node); known != node_runs_.end() && known->second != run_id) {
    out.push_back(Refusal(node, absl::InvalidArgumentError(
                                    "a session belongs to one run; open a new one for another")));
    return out;
  }
  auto [it, created] = runs_.try_emplace(run_id);
  Run& run = it->second;
  if (created) {
    run.id = run_id;
    run.job = job;
    run.waiting_since = now;
    run.progress = RunProgress(job.stragglers);
    run.exclusion = NodeExclusion(job.exclusion);
  }
  if (run.phase == Phase::kSucceeded || run.phase == Phase::kFailed) {
    out.push_back(
        Refusal(node, absl::FailedPreconditionError(absl::StrCat(
                          "run '", run_id, "' has already finished (", PhaseName(run.phase),
                          "); start a new job with another "
                          "--rdzv_id"))));
    return out;
  }
  if (job.min_nodes != run.job.min_nodes || job.max_nodes != run.job.max_nodes ||
      job.max_restarts != run.job.max_restarts) {
    out.push_back(Refusal(
        node, absl::FailedPreconditionError(absl::StrCat(
                  "this node was started with --nnodes=", NodeRange(job),
                  " --max_restarts=", job.max_restarts, " but run '", run_id,
                  "' has --nnodes=", NodeRange(run.job), " --max_restarts=", run.job.max_restarts,
                  "; start every node of a job with the same values"))));
    if (run.nodes.empty() && created) runs_.erase(it);
    return out;
  }
  if (!desc.unhealthy.empty()) {
    // A node that found itself unhealthy: listed in the run's status, never a member.
    const std::string line = absl::StrCat(desc.host, ": ", desc.unhealthy);
    run.unhealthy.push_back(line);
    if (run.unhealthy.size() > kHistory) run.unhealthy.erase(run.unhealthy.begin());
    Record(run, now, "unhealthy", line);
    out.push_back(Refusal(node, absl::FailedPreconditionError(
                                    "this node reported itself unhealthy; it does not join")));
    if (run.nodes.empty() && created) run.waiting_since = now;
    return out;
  }
  if (desc.requested_rank >= 0) {
    if (auto taken = run.requested_ranks.find(desc.requested_rank);
        taken != run.requested_ranks.end() && taken->second != node) {
      out.push_back(Refusal(node, absl::AlreadyExistsError(absl::StrCat(
                                      "node rank ", desc.requested_rank, " is already taken by ",
                                      run.nodes.at(taken->second).desc.host, " in run '", run_id,
                                      "'; give every node its own --node_rank"))));
      return out;
    }
  }

  auto [node_it, new_node] = run.nodes.try_emplace(node);
  Node& n = node_it->second;
  if (new_node) {
    n.join_order = next_join_order_++;
    Count(run, n.state, +1);
  }
  const NodeState previous = n.state;
  if (n.desc.requested_rank >= 0 && n.desc.requested_rank != desc.requested_rank) {
    run.requested_ranks.erase(n.desc.requested_rank);  // it asks for another rank now
  }
  if (desc.requested_rank >= 0) run.requested_ranks[desc.requested_rank] = node;
  n.desc = desc;
  Seen(run, n, now);
  const bool excluded = run.exclusion.Excluded(desc.agent_id);
  SetState(run, n, excluded ? NodeState::kExcluded : NodeState::kWaiting);
  n.node_rank = -1;
  node_runs_[node] = run_id;

  if (run.phase == Phase::kRunning && !excluded) {
    const bool member = IsMember(run, node);
    if (member) changed_ = true;  // a member's description and state are kept
    if (member && previous != NodeState::kStopping) {
      // A member asking to join again while its group runs: it lost its workers; re-form.
      StopMembers(now, run, absl::StrCat(desc.host, " re-joined"), false, out);
    } else if (!member) {
      const bool any_finished = run.succeeded > 0;  // only members of the round succeed
      if (static_cast<int>(run.members.size()) < run.job.max_nodes && !any_finished) {
        StopMembers(now, run, absl::StrCat(desc.host, " joined; re-forming the group to admit it"),
                    false, out);
      }
    }
  }
  MaybeCloseRound(now, run, out);
  if (n.state == NodeState::kWaiting || n.state == NodeState::kExcluded) {
    ToAgent ack = Message(node, ToAgent::Kind::kWaiting);
    ack.nodes_waiting = run.waiting;
    ack.excluded = run.exclusion.Why(desc.agent_id);
    out.push_back(ack);
  }
  return out;
}

MasterState::Out MasterState::Heartbeat(Time now, NodeId node, int round,
                                        const std::vector<RankReport>& ranks) {
  Out out;
  Run* run = FindRunOf(node);
  if (run == nullptr) return out;
  if (auto it = run->nodes.find(node); it != run->nodes.end()) Seen(*run, it->second, now);
  if (run->phase != Phase::kRunning || !IsMember(*run, node)) return out;
  run->progress.Report(now, node, round, ranks);
  if (run->failed_at) {
    if (std::optional<Time> first = run->progress.first_report_at()) {
      // The group's first step after the failure: what the failure cost until training resumed.
      // A report's age is the agent's estimate: never before the failure it recovers from.
      run->last_recovery = std::max(*first - *run->failed_at, Time::duration::zero());
      Record(
          *run, now, "recovered",
          absl::StrFormat("round %d reported its first steps %.1f s after the failure", run->round,
                          std::chrono::duration<double>(*run->last_recovery).count()));
      run->failed_at.reset();
    }
  }
  for (const StragglerVerdict& v : run->progress.Judge(now, run->job.timeouts.heartbeat_interval)) {
    const Node& n = run->nodes.at(v.node);
    const std::string text =
        absl::StrCat(DescribeStraggler(v.news), " (on ", n.desc.host, ", node ", n.node_rank, ")");
    Record(*run, now, "straggler", text);
    ToAgent notice = Message(v.node, ToAgent::Kind::kStraggler);
    notice.straggler = v.news;
    notice.straggler_round = run->round;
    notice.log_line = absl::StrCat("run '", run->id, "': ", text,
                                   "; --straggler_factor=", run->job.stragglers.factor,
                                   " --straggler_steps=", run->job.stragglers.steps);
    out.push_back(notice);
  }
  return out;
}

MasterState::Out MasterState::ReportFailure(Time now, NodeId node, int round,
                                            const WorkerFailure& failure) {
  Out out;
  Run* run = FindRunOf(node);
  if (run == nullptr) return out;
  Seen(*run, run->nodes[node], now);
  if (run->phase != Phase::kRunning || round != run->round || !IsMember(*run, node)) {
    return out;  // stale: that round was already stopped
  }
  ++run->failures[FailureCause(failure)];
  run->repeated.Add(failure);
  if (!run->failed_at) run->failed_at = now;  // recovery counts from the first failure
  if (run->restarts_spent < run->job.max_restarts) {
    ++run->restarts_spent;
    StopMembers(now, *run,
                absl::StrCat("worker rank ", failure.global_rank, " on ", failure.host, " failed (",
                             DescribeExit(failure), ")"),
                /*restart=*/true, out);
    MaybeExclude(now, *run, node, out);
    MaybeCloseRound(now, *run, out);
  } else {
    Finish(now, *run, /*success=*/false, failure, out);
  }
  return out;
}

MasterState::Out MasterState::ReportRestartPhases(Time now, NodeId node,
                                                  const RestartPhases& phases) {
  Run* run = FindRunOf(node);
  if (run == nullptr) return {};
  Node& n = run->nodes[node];
  Seen(*run, n, now);
  if (std::string wrong = run->restart_timings.Add(phases, run->round); !wrong.empty()) {
    Record(*run, now, "ignored", absl::StrCat(n.desc.host, "'s restart timing left out: ", wrong));
  }
  return {};
}

MasterState::Out MasterState::OfferFlightRecords(Time now, NodeId node, const FlightRecordSet& set,
                                                 bool request) {
  Out out;
  Run* run = FindRunOf(node);
  if (run == nullptr) return out;
  Node& n = run->nodes[node];
  Seen(*run, n, now);
  if (run->phase != Phase::kRunning || !IsMember(*run, node)) return out;
  std::vector<NodeId> running;
  for (NodeId member : run->members) {
    if (run->nodes.at(member).state == NodeState::kRunning) running.push_back(member);
  }
  FlightRecordSet offered = set;
  offered.host = n.desc.host;  // as the master knows it, whatever the agent wrote
  offered.node_rank = n.node_rank;
  FlightGathering::Step step =
      run->flight.Offer(node, std::move(offered), request, run->round, running);
  if (!step.ignored.empty()) {
    Record(*run, now, "ignored", absl::StrCat(n.desc.host, ": ", step.ignored));
    return out;
  }
  if (request) {
    Record(*run, now, "hang",
           absl::StrCat(n.desc.host,
                        " judged a hang and asked every node for "
                        "its ranks' flight recorders"));
  }
  for (NodeId member : step.ask) {
    ToAgent ask = Message(member, ToAgent::Kind::kFlightRequest);
    ask.flight.round = run->round;
    ask.flight.host = n.desc.host;
    out.push_back(std::move(ask));
  }
  for (auto& [to, records] : step.send) {
    ToAgent relay = Message(to, ToAgent::Kind::kFlightRecords);
    relay.flight = std::move(records);
    out.push_back(std::move(relay));
  }
  return out;
}

MasterState::Out MasterState::ReportSucceeded(Time now, NodeId node, int round) {
  Out out;
  Run* run = FindRunOf(node);
  if (run == nullptr) return out;
  Node& n = run->nodes[node];
  Seen(*run, n, now);
  if (run->phase != Phase::kRunning || round != run->round || n.state != NodeState::kRunning) {
    return out;
  }
  SetState(*run, n, NodeState::kSucceeded);
  changed_ = true;
  const int members = static_cast<int>(run->members.size());
  if (run->succeeded == members) {
    Finish(now, *run, /*success=*/true, std::nullopt, out);
    return out;
  }
  // The first member to finish starts the exit barrier of the others; later ones are no news
  // to them (telling every member of every success would be O(N^2) messages per round).
  if (run->succeeded > 1) return out;
  for (NodeId m : run->members) {
    if (run->nodes[m].state == NodeState::kSucceeded) continue;
    ToAgent peer = Message(m, ToAgent::Kind::kPeerFinished);
    peer.peer_host = n.desc.host;
    peer.peer_node_rank = n.node_rank;
    peer.nodes_finished = run->succeeded;
    peer.num_nodes = members;
    out.push_back(std::move(peer));
  }
  return out;
}

MasterState::Out MasterState::NodeGone(Time now, NodeId node, const std::string& why) {
  Out out;
  Run* run = FindRunOf(node);
  if (run == nullptr) return out;
  const std::string host = run->nodes[node].desc.host;
  const bool member = IsMember(*run, node);
  RemoveNode(*run, node);
  if (run->phase == Phase::kRunning && member) {
    ++run->failures["node_lost"];
    run->repeated.AddOther();
    if (!run->failed_at) run->failed_at = now;
    StopMembers(now, *run, absl::StrCat(host, " left (", why, ")"), false, out);
  }
  if (run->phase == Phase::kWaiting) MaybeCloseRound(now, *run, out);
  if (run->nodes.empty() && (run->phase == Phase::kWaiting || run->phase == Phase::kRunning)) {
    runs_.erase(run->id);  // nobody left to run it
  }
  return out;
}

MasterState::Out MasterState::Tick(Time now) {
  Out out;
  std::vector<std::string> run_ids;
  for (const auto& [id, run] : runs_) run_ids.push_back(id);
  for (const std::string& id : run_ids) {
    auto it = runs_.find(id);
    if (it == runs_.end()) continue;
    Run& run = it->second;
    if (run.phase == Phase::kSucceeded || run.phase == Phase::kFailed) {
      if (now - run.finished_at >= run.job.timeouts.finished_run_ttl) {
        for (const auto& [node, n] : run.nodes) node_runs_.erase(node);
        runs_.erase(it);
      }
      continue;
    }
    if (now > run.lease_check_at) {  // else no lease can have ended yet
      std::vector<NodeId> expired;
      Time next_check = Time::max();
      for (const auto& [node, n] : run.nodes) {
        const Time lease_end = n.last_seen + run.job.timeouts.lease();
        if (now > lease_end) {
          expired.push_back(node);
        } else {
          next_check = std::min(next_check, lease_end);
        }
      }
      run.lease_check_at = next_check;
      for (NodeId node : expired) {
        Out gone = NodeGone(
            now, node,
            absl::StrCat("no heartbeat for ", run.job.timeouts.lease().count() / 1000.0, " s"));
        out.insert(out.end(), gone.begin(), gone.end());
        if (runs_.find(id) == runs_.end()) break;
      }
    }
    if (auto again = runs_.find(id); again != runs_.end()) {
      Readmit(now, again->second, out);
      MaybeCloseRound(now, again->second, out);
    }
  }
  return out;
}

void MasterState::RemoveNode(Run& run, NodeId node) {
  auto it = run.nodes.find(node);
  if (it != run.nodes.end()) {
    Node& n = it->second;
    Count(run, n.state, -1);
    if (auto rank = run.requested_ranks.find(n.desc.requested_rank);
        rank != run.requested_ranks.end() && rank->second == node) {
      run.requested_ranks.erase(rank);
    }
    if (n.member) {
      run.members.erase(std::remove(run.members.begin(), run.members.end(), node),
                        run.members.end());
      changed_ = true;
    }
    run.nodes.erase(it);
  }
  node_runs_.erase(node);
}

void MasterState::Record(Run& run, Time now, std::string kind, std::string text) {
  run.history.push_back({now, std::move(kind), std::move(text)});
  if (run.history.size() > kHistory) run.history.pop_front();
}

void MasterState::StopMembers(Time now, Run& run, const std::string& reason, bool restart,
                              Out& out) {
  Record(run, now, restart ? "failure" : "reforming",
         absl::StrCat(reason, restart ? absl::StrCat("; restart ", run.restarts_spent, " of ",
                                                     run.job.max_restarts)
                                      : std::string("; the group re-forms")));
  run.stop_reason = reason;
  run.stop_restart = restart;
  for (NodeId m : run.members) {
    Node& n = run.nodes[m];
    SetState(run, n, NodeState::kStopping);
    n.member = false;
    ToAgent stop = Message(m, ToAgent::Kind::kStop);
    stop.reason = reason;
    stop.restart = restart;
    stop.restarts_spent = run.restarts_spent;
    stop.max_restarts = run.job.max_restarts;
    out.push_back(stop);
  }
  run.members.clear();
  run.phase = Phase::kWaiting;
  run.waiting_since = now;
  run.last_call_deadline.reset();
  changed_ = true;
}

void MasterState::Finish(Time now, Run& run, bool success,
                         const std::optional<WorkerFailure>& failure, Out& out) {
  Record(run, now, success ? "succeeded" : "failed",
         success ? std::string("every node's workers exited 0")
                 : absl::StrCat(failure ? absl::StrCat("worker rank ", failure->global_rank, " on ",
                                                       failure->host, " failed (",
                                                       DescribeExit(*failure), "); ")
                                        : std::string(),
                                "the restart budget (", run.job.max_restarts, ") is spent"));
  run.phase = success ? Phase::kSucceeded : Phase::kFailed;
  run.finished_at = now;
  changed_ = true;
  for (auto& [node, n] : run.nodes) {
    ToAgent done = Message(node, ToAgent::Kind::kFinished);
    done.success = success;
    done.first_failure = failure;
    done.excluded_nodes = run.exclusion.history();
    for (const std::string& line : run.unhealthy)
      done.excluded_nodes.push_back("unhealthy: " + line);
    if (!success && run.repeated.AllSame()) {
      done.same_failure = true;
      done.failure_signature = run.repeated.signature();
    }
    done.restarts_spent = run.restarts_spent;
    done.max_restarts = run.job.max_restarts;
    done.close_session = true;
    out.push_back(done);
    node_runs_.erase(node);
  }
  ForgetNodes(run);
}

void MasterState::MaybeCloseRound(Time now, Run& run, Out& out) {
  if (run.phase != Phase::kWaiting) return;
  // The waiting nodes are listed only when the round closes: once per round, not per event.
  auto close = [&] {
    std::vector<NodeId> waiting;
    waiting.reserve(run.waiting);
    for (const auto& [node, n] : run.nodes) {
      if (n.state == NodeState::kWaiting) waiting.push_back(node);
    }
    CloseRound(run, std::move(waiting), out);
    Record(run, now, "round",
           absl::StrCat("round ", run.round, " formed: ", run.members.size(), " nodes, world size ",
                        run.world_size));
  };
  const int count = run.waiting;
  if (count >= run.job.max_nodes) {
    close();
    return;
  }
  if (count >= run.job.min_nodes) {
    if (run.round >= 0 && run.stopping == 0) {  // re-forming and every survivor is back
      close();
      return;
    }
    if (!run.last_call_deadline) run.last_call_deadline = now + run.job.timeouts.last_call_timeout;
    if (now >= *run.last_call_deadline) close();
    return;
  }
  run.last_call_deadline.reset();
  if (now - run.waiting_since >= run.job.timeouts.join_timeout) {
    const absl::Status timeout = absl::DeadlineExceededError(absl::StrCat(
        "rendezvous of run '", run.id, "' timed out after ",
        run.job.timeouts.join_timeout.count() / 1000.0, " s waiting for nodes: ", count,
        " joined, at least ", run.job.min_nodes, " needed (--nnodes=", NodeRange(run.job), ")"));
    for (const auto& [node, n] : run.nodes) {
      out.push_back(Refusal(node, timeout));
      node_runs_.erase(node);
    }
    ForgetNodes(run);
    ++run.failures["rendezvous_timeout"];
    Record(run, now, "timeout", std::string(timeout.message()));
    run.phase = Phase::kFailed;
    run.finished_at = now;
  }
}

void MasterState::CloseRound(Run& run, std::vector<NodeId> waiting, Out& out) {
  // Who gets in when more than max_nodes wait: requested ranks first, then rank order.
  std::vector<RankOrder::Entry> entries;
  for (NodeId id : waiting) entries.push_back({&run.nodes[id].desc, run.nodes[id].join_order});
  const RankOrder order(entries);
  auto rank_order_less = [&order](const Node& x, const Node& y) {
    return order.Less({&x.desc, x.join_order}, {&y.desc, y.join_order});
  };
  std::sort(waiting.begin(), waiting.end(), [&](NodeId a, NodeId b) {
    const Node& na = run.nodes[a];
    const Node& nb = run.nodes[b];
    const bool ra = na.desc.requested_rank >= 0, rb = nb.desc.requested_rank >= 0;
    if (ra != rb) return ra;
    if (ra && rb) return na.desc.requested_rank < nb.desc.requested_rank;
    return rank_order_less(na, nb);
  });
  if (static_cast<int>(waiting.size()) > run.job.max_nodes) waiting.resize(run.job.max_nodes);
  const int n = static_cast<int>(waiting.size());

  // Requested ranks that fit take their slot; the rest fill the free slots in rank order.
  std::vector<NodeId> slots(n, 0);
  std::vector<bool> taken(n, false);
  std::vector<NodeId> rest;
  for (NodeId id : waiting) {
    int want = run.nodes[id].desc.requested_rank;
    if (want >= 0 && want < n && !taken[want]) {
      slots[want] = id;
      taken[want] = true;
    } else {
      rest.push_back(id);
    }
  }
  std::sort(rest.begin(), rest.end(),
            [&](NodeId a, NodeId b) { return rank_order_less(run.nodes[a], run.nodes[b]); });
  size_t next = 0;
  for (int rank = 0; rank < n; ++rank) {
    if (!taken[rank]) slots[rank] = rest[next++];
  }

  ++run.round;
  run.phase = Phase::kRunning;
  run.members = slots;
  changed_ = true;
  run.last_call_deadline.reset();
  int world_size = 0;
  for (NodeId id : slots) world_size += run.nodes[id].desc.local_world_size;
  run.world_size = world_size;
  const Node& first = run.nodes[slots[0]];
  int base = 0;
  for (int rank = 0; rank < n; ++rank) {
    Node& node = run.nodes[slots[rank]];
    SetState(run, node, NodeState::kRunning);
    node.member = true;
    node.node_rank = rank;
    ToAgent m = Message(slots[rank], ToAgent::Kind::kRound);
    RoundAssignment& r = m.round;
    r.run_id = run.id;
    r.round = run.round;
    r.node_rank = rank;
    r.num_nodes = n;
    r.local_world_size = node.desc.local_world_size;
    r.global_rank_base = base;
    r.world_size = world_size;
    r.master_addr = first.desc.address;
    r.master_port = first.desc.master_port;
    r.restart_count = run.restarts_spent;
    r.max_restarts = run.job.max_restarts;
    r.use_agent_store = first.desc.hosts_workers_store;
    out.push_back(m);
    base += node.desc.local_world_size;
  }
  TrackProgress(run);
}

void MasterState::MaybeExclude(Time now, Run& run, NodeId node, Out& out) {
  const Node& n = run.nodes.at(node);
  // The job must still meet its minimum without it: count the others that are not left out.
  int others = 0;
  for (const auto& [id, other] : run.nodes) {
    if (id != node && other.state != NodeState::kExcluded &&
        !run.exclusion.Excluded(other.desc.agent_id)) {
      ++others;
    }
  }
  const std::optional<std::string> why =
      run.exclusion.Failed(now, n.desc.agent_id, n.desc.host, others >= run.job.min_nodes);
  if (!why) return;
  Record(run, now, "excluded", absl::StrCat(n.desc.host, " (node ", n.node_rank, "): ", *why));
  for (ToAgent& m : out) {  // its stop says so in the master's log
    if (m.node == node && m.kind == ToAgent::Kind::kStop) {
      m.log_line = absl::StrCat("run '", run.id, "': leaving ", n.desc.host,
                                " out of the next "
                                "rounds: ",
                                *why);
    }
  }
}

void MasterState::Readmit(Time now, Run& run, Out& out) {
  const std::optional<Time> next = run.exclusion.NextEnd();
  if (!next || now < *next) return;
  for (const std::string& agent : run.exclusion.TakeEnded(now)) {
    for (auto& [id, n] : run.nodes) {
      if (n.desc.agent_id != agent || n.state != NodeState::kExcluded) continue;
      SetState(run, n, NodeState::kWaiting);
      Record(run, now, "readmitted", absl::StrCat(n.desc.host, ": its back-off ended"));
      ToAgent ack = Message(id, ToAgent::Kind::kWaiting);
      ack.nodes_waiting = run.waiting;
      out.push_back(ack);  // an empty `excluded`: it waits like any node again
      if (run.phase == Phase::kRunning && run.succeeded == 0 &&
          static_cast<int>(run.members.size()) < run.job.max_nodes) {
        StopMembers(
            now, run,
            absl::StrCat(n.desc.host, "'s exclusion ended; re-forming the group to admit it"),
            false, out);
      }
    }
  }
}

void MasterState::TrackProgress(Run& run) {
  std::map<NodeId, RunProgress::Ranks> owners;
  int base = 0;
  for (NodeId id : run.members) {
    const int count = run.nodes.at(id).desc.local_world_size;
    owners[id] = {base, count};
    base += count;
  }
  run.progress.NewRound(run.round, std::move(owners));
}

std::vector<RunSnapshot> MasterState::Snapshot(Time now, const std::string& run_id) const {
  std::vector<RunSnapshot> result;
  for (const auto& [id, run] : runs_) {
    if (!run_id.empty() && id != run_id) continue;
    RunSnapshot s;
    s.run_id = id;
    s.phase = PhaseName(run.phase);
    s.round = run.round;
    s.restarts_spent = run.restarts_spent;
    s.job = run.job;
    s.world_size = run.phase == Phase::kRunning ? run.world_size : 0;
    s.failures = run.failures;
    s.unhealthy = run.unhealthy;
    s.restarts = run.restart_timings.Slowest();
    if (run.last_recovery) {
      s.last_recovery_s = std::chrono::duration<double>(*run.last_recovery).count();
    }
    s.history.assign(run.history.begin(), run.history.end());
    for (const auto& [node, n] : run.nodes) {
      MemberSnapshot m;
      m.node = node;
      m.desc = n.desc;
      m.node_rank =
          n.state == NodeState::kWaiting || n.state == NodeState::kExcluded ? -1 : n.node_rank;
      m.state = NodeStateName(n.state);
      m.since_last_seen = std::chrono::duration_cast<std::chrono::milliseconds>(now - n.last_seen);
      if (n.state == NodeState::kExcluded) m.note = run.exclusion.Why(n.desc.agent_id);
      if (n.member) m.ranks = run.progress.RanksOf(node, now);
      s.members.push_back(m);
    }
    std::sort(s.members.begin(), s.members.end(),
              [](const MemberSnapshot& a, const MemberSnapshot& b) {
                if ((a.node_rank < 0) != (b.node_rank < 0)) return a.node_rank >= 0;
                return a.node_rank < b.node_rank;
              });
    result.push_back(std::move(s));
  }
  return result;
}

}  // namespace mxrun

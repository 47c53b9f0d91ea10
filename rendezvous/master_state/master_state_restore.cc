// MasterState across its own restart (a master with --state_dir or elected in etcd): what it
// keeps of running groups, how it restores them, and how reconnecting agents find their place
// again. The state machine itself is master_state.cc.

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

void MasterState::MoveNode(Time now, Run& run, NodeId from, NodeId to) {
  Node moved = run.nodes.at(from);
  Seen(run, moved, now);
  run.nodes.erase(from);
  node_runs_.erase(from);
  if (auto rank = run.requested_ranks.find(moved.desc.requested_rank);
      rank != run.requested_ranks.end() && rank->second == from) {
    rank->second = to;
  }
  run.nodes[to] = std::move(moved);  // same state: the counts stay
  node_runs_[to] = run.id;
  run.progress.MoveNode(from, to);
}

MasterState::Out MasterState::AgentGone(Time now, const std::string& agent_id,
                                        const std::string& why) {
  Out out;
  if (agent_id.empty()) return out;
  std::vector<NodeId> gone;
  for (const auto& [id, run] : runs_) {
    for (const auto& [node, n] : run.nodes) {
      if (node > next_detached_id_ && n.desc.agent_id == agent_id) gone.push_back(node);
    }
  }
  for (NodeId node : gone) {
    Out o = NodeGone(now, node, why);
    out.insert(out.end(), o.begin(), o.end());
  }
  return out;
}

MasterState::Out MasterState::Resume(Time now, NodeId node, const std::string& run_id,
                                     const NodeDesc& desc, int round) {
  auto it = runs_.find(run_id);
  if (it != runs_.end() && it->second.phase == Phase::kRunning && it->second.round == round &&
      !desc.agent_id.empty() && node_runs_.count(node) == 0) {
    Run& run = it->second;
    for (NodeId& member : run.members) {
      Node& n = run.nodes[member];
      if (n.desc.agent_id != desc.agent_id) continue;
      if (member <= next_detached_id_) break;  // a live session has it already
      // Re-attach: the member's entry moves to the new session's id; nothing else changes.
      MoveNode(now, run, member, node);
      member = node;
      changed_ = true;
      return {Message(node, ToAgent::Kind::kWaiting)};
    }
  }
  if (it != runs_.end() && it->second.phase == Phase::kWaiting && !desc.agent_id.empty() &&
      node_runs_.count(node) == 0) {
    // The restored group is re-forming (a member was known dead at restore): a restored member
    // being stopped moves to the new session and hears the stop it missed, so that the round
    // closes as soon as every survivor is back.
    Run& run = it->second;
    for (auto& [id, n] : run.nodes) {
      if (id <= next_detached_id_ || n.desc.agent_id != desc.agent_id ||
          n.state != NodeState::kStopping) {
        continue;
      }
      MoveNode(now, run, id, node);  // `n` and `id` are gone from here on
      ToAgent stop = Message(node, ToAgent::Kind::kStop);
      stop.reason = run.stop_reason;
      stop.restart = run.stop_restart;
      stop.restarts_spent = run.restarts_spent;
      stop.max_restarts = run.job.max_restarts;
      return {stop};
    }
  }
  // The round is not (or no longer) known here: the agent stops its workers and joins afresh.
  Out out;
  ToAgent stop = Message(node, ToAgent::Kind::kStop);
  stop.reason = absl::StrCat("the rendezvous master no longer knows round ", round, " of run '",
                             run_id, "'; re-forming the group");
  out.push_back(stop);
  return out;
}

std::vector<PersistedRun> MasterState::Persisted() const {
  std::vector<PersistedRun> runs;
  for (const auto& [id, run] : runs_) {
    if (run.phase != Phase::kRunning) continue;
    PersistedRun p;
    p.run_id = id;
    p.job = run.job;
    p.round = run.round;
    p.restarts_spent = run.restarts_spent;
    p.world_size = run.world_size;
    for (NodeId member : run.members) {
      const Node& n = run.nodes.at(member);
      p.members.push_back({n.desc, n.node_rank, n.state == NodeState::kSucceeded});
    }
    runs.push_back(std::move(p));
  }
  return runs;
}

void MasterState::Restore(Time now, const std::vector<PersistedRun>& runs) {
  if (!runs.empty()) changed_ = true;
  for (const PersistedRun& p : runs) {
    Run& run = runs_[p.run_id];
    run.id = p.run_id;
    run.job = p.job;
    run.phase = Phase::kRunning;
    run.round = p.round;
    run.restarts_spent = p.restarts_spent;
    run.world_size = p.world_size;
    run.waiting_since = now;
    for (const PersistedMember& m : p.members) {
      const NodeId id = next_detached_id_--;
      Node& n = run.nodes[id];
      n.desc = m.desc;
      Count(run, n.state, +1);  // a new entry, counted as it is before its state is set
      SetState(run, n, m.succeeded ? NodeState::kSucceeded : NodeState::kRunning);
      n.member = true;
      if (n.desc.requested_rank >= 0) run.requested_ranks[n.desc.requested_rank] = id;
      n.join_order = next_join_order_++;
      Seen(run, n, now);  // the lease starts now: the agent has that long to reconnect
      n.node_rank = m.node_rank;
      node_runs_[id] = p.run_id;
      run.members.push_back(id);
    }
    run.progress = RunProgress(run.job.stragglers);
    run.exclusion = NodeExclusion(run.job.exclusion);  // exclusions are not kept across restarts
    TrackProgress(run);
  }
}

}  // namespace mxrun

#include "rendezvous/master_state/flight_gathering.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mxrun {

FlightGathering::Step FlightGathering::Offer(NodeId from, FlightRecordSet set, bool request,
                                             int current_round,
                                             const std::vector<NodeId>& running) {
  Step step;
  if (set.round != current_round) {
    step.ignored = absl::StrCat("flight records of round ", set.round,
                                " while the run is in round ", current_round);
    return step;
  }
  if (round_ != set.round) {  // a new round: the last one's dumps are of no use
    round_ = set.round;
    sets_.clear();
    requesters_.clear();
    asked_.clear();
    bytes_ = 0;
  }
  if (auto old = sets_.find(from); old != sets_.end()) {
    bytes_ -= old->second.bytes();
    sets_.erase(old);
  }
  if (bytes_ + set.bytes() > kMaxBytes) {
    for (RankFlightRecord& rank : set.ranks) {
      if (rank.json.empty()) continue;
      rank.json.clear();
      rank.error = absl::StrCat("left out: the master keeps at most ", kMaxBytes >> 20,
                                " MiB of dumps per round");
    }
  }
  bytes_ += set.bytes();
  const FlightRecordSet& kept = sets_[from] = std::move(set);
  // Whoever asked before has this set now (a node that asks is also an answer to the others).
  for (NodeId requester : requesters_) {
    if (requester != from) step.send.emplace_back(requester, kept);
  }
  if (request) {
    requesters_.insert(from);
    for (const auto& [node, other] : sets_) {
      if (node != from) step.send.emplace_back(from, other);
    }
    for (NodeId member : running) {
      if (member == from || sets_.count(member) > 0 || !asked_.insert(member).second) continue;
      step.ask.push_back(member);
    }
  }
  return step;
}

}  // namespace mxrun

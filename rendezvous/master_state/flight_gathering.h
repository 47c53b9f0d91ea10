#pragma once
// The flight-recorder dumps of a run's round, gathered through the master for the nodes that
// judged a hang (agent/hang/flight_records.h). A node that judges a hang sends its own ranks'
// dumps asking for everyone's: it gets at once every set already here, and every running member
// not yet heard from is asked (once per round) for its own; each answer is passed on to every
// node that asked. So two nodes that judge the same hang at once, each waiting for the other,
// both get both sets without answering each other. Only the current round's sets are kept, and
// at most kMaxBytes of dumps (a set past it keeps its ranks' names and errors, not their dumps).
// Pure: the master's state machine calls it and turns its steps into messages.

#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "rendezvous/wire/wire.h"

namespace mxrun {

class FlightGathering {
 public:
  static constexpr size_t kMaxBytes = size_t{256} << 20;

  struct Step {
    std::vector<std::pair<NodeId, FlightRecordSet>> send;  // to whom, what
    std::vector<NodeId> ask;                               // to send their own
    std::string ignored;                                   // why the offer was not taken
  };

  // `from` offers its set of round `set.round` (`request`: it wants everyone's). `current_round`
  // is the run's; `running` the round's members whose workers run.
  Step Offer(NodeId from, FlightRecordSet set, bool request, int current_round,
             const std::vector<NodeId>& running);

  size_t bytes() const { return bytes_; }

 private:
  int round_ = -1;
  std::map<NodeId, FlightRecordSet> sets_;
  std::set<NodeId> requesters_;
  std::set<NodeId> asked_;
  size_t bytes_ = 0;
};

}  // namespace mxrun

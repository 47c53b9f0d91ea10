#include "rendezvous/master_state/flight_gathering.h"

#include <catch2/catch.hpp>

namespace mxrun {
namespace {

FlightRecordSet SetOf(int round, std::vector<int> ranks, size_t bytes = 10) {
  FlightRecordSet set;
  set.round = round;
  for (int rank : ranks) set.ranks.push_back({rank, std::string(bytes, 'x'), ""});
  return set;
}

std::vector<NodeId> Recipients(const FlightGathering::Step& step) {
  std::vector<NodeId> to;
  for (const auto& [node, set] : step.send) to.push_back(node);
  return to;
}

TEST_CASE(
    "the node that judged a hang asks every other running member once, and gets each "
    "answer",
    "[flight_gathering]") {
  FlightGathering gathering;
  FlightGathering::Step asked = gathering.Offer(1, SetOf(3, {0, 1}), true, 3, {1, 2, 3});
  CHECK(asked.send.empty());
  CHECK(asked.ask == std::vector<NodeId>{2, 3});
  FlightGathering::Step answer = gathering.Offer(2, SetOf(3, {2, 3}), false, 3, {1, 2, 3});
  CHECK(answer.ask.empty());
  REQUIRE(Recipients(answer) == std::vector<NodeId>{1});
  CHECK(answer.send[0].second.ranks.size() == 2);
  // Node 3 judges the hang too: it gets both sets already here, node 1 gets its, nobody is asked
  // again.
  FlightGathering::Step second = gathering.Offer(3, SetOf(3, {4}), true, 3, {1, 2, 3});
  CHECK(second.ask.empty());
  CHECK(Recipients(second) == std::vector<NodeId>{1, 3, 3});
}

TEST_CASE("two nodes that ask at once each get the other's set", "[flight_gathering]") {
  FlightGathering gathering;
  FlightGathering::Step first = gathering.Offer(5, SetOf(0, {1}), true, 0, {4, 5});
  CHECK(first.ask == std::vector<NodeId>{4});
  FlightGathering::Step second = gathering.Offer(4, SetOf(0, {0}), true, 0, {4, 5});
  CHECK(second.ask.empty());
  CHECK(Recipients(second) == std::vector<NodeId>{5, 4});  // 4's set to 5; 5's set to 4
}

TEST_CASE("a set of another round is not taken, and a new round forgets the last one's",
          "[flight_gathering]") {
  FlightGathering gathering;
  CHECK(gathering.Offer(1, SetOf(2, {0}), true, 3, {1, 2}).ignored ==
        "flight records of round 2 while the run is in round 3");
  gathering.Offer(1, SetOf(3, {0}), true, 3, {1, 2});
  CHECK(gathering.bytes() == 10);
  FlightGathering::Step next = gathering.Offer(2, SetOf(4, {1}), true, 4, {1, 2});
  CHECK(next.send.empty());                   // round 3's set is gone
  CHECK(next.ask == std::vector<NodeId>{1});  // and node 1 is asked again, for round 4
  CHECK(gathering.bytes() == 10);
}

TEST_CASE("past the master's limit a set keeps its ranks and errors, not their dumps",
          "[flight_gathering]") {
  FlightGathering gathering;
  gathering.Offer(1, SetOf(0, {0}, FlightGathering::kMaxBytes - 5), true, 0, {1, 2});
  FlightGathering::Step big = gathering.Offer(2, SetOf(0, {1, 2}, 100), false, 0, {1, 2});
  REQUIRE(big.send.size() == 1);
  const FlightRecordSet& sent = big.send[0].second;
  REQUIRE(sent.ranks.size() == 2);
  CHECK(sent.ranks[0].json.empty());
  CHECK(sent.ranks[1].error == "left out: the master keeps at most 256 MiB of dumps per round");
  // What is kept past the limit is the error texts (at most 4 KiB each, checked on arrival).
  CHECK(gathering.bytes() <= FlightGathering::kMaxBytes + sent.bytes());
  CHECK(sent.bytes() < 200);
}

}  // namespace
}  // namespace mxrun

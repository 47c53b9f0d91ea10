// Silent workers of a multi-node job wait for another node to name the culprit
// (agent/hang/peer_culprit_wait.h), with a fake clock.

#include <catch2/catch.hpp>

#include "agent/hang/peer_culprit_wait.h"

using mxrun::HangRule;
using mxrun::HangVerdict;
using mxrun::PeerCulpritWait;
using namespace std::chrono_literals;

namespace {

HangVerdict Verdict(int local_rank, HangRule rule = HangRule::kHeartbeat) {
  HangVerdict v;
  v.local_rank = local_rank;
  v.rule = rule;
  return v;
}

}  // namespace

TEST_CASE("silent running workers of a multi-node job are held for the grace, then judged",
          "[unit][hang]") {
  PeerCulpritWait wait(5000ms);
  const PeerCulpritWait::Time t0{};
  CHECK(wait.Sift({Verdict(0), Verdict(1)}, /*held_up_elsewhere=*/true, /*local_culprit=*/false, t0)
            .empty());
  REQUIRE(wait.deadline() == t0 + 5000ms);
  CHECK(wait.Sift({}, true, false, t0 + 4999ms).empty());
  const auto due = wait.Sift({}, true, false, t0 + 5000ms);
  REQUIRE(due.size() == 2);
  CHECK(due[0].local_rank == 0);
  CHECK_FALSE(wait.deadline().has_value());
}

TEST_CASE("a new round drops held verdicts, and no hold where the culprit is here or alone",
          "[unit][hang]") {
  PeerCulpritWait wait(5000ms);
  const PeerCulpritWait::Time t0{};
  CHECK(wait.Sift({Verdict(0)}, true, false, t0).empty());
  wait.Reset();  // the culprit's node reported; the group re-formed
  CHECK(wait.Sift({}, true, false, t0 + 6000ms).empty());
  // One node only, a local worker unable to run, another rule: acted on at once.
  CHECK(wait.Sift({Verdict(0)}, /*held_up_elsewhere=*/false, false, t0).size() == 1);
  CHECK(wait.Sift({Verdict(0)}, true, /*local_culprit=*/true, t0).size() == 1);
  CHECK(wait.Sift({Verdict(0, HangRule::kExitBarrier)}, true, false, t0).size() == 1);
  CHECK(PeerCulpritWait(0ms).Sift({Verdict(0)}, true, false, t0).size() == 1);
}

TEST_CASE("a verdict that is not held takes the held ones along, the held first", "[unit][hang]") {
  PeerCulpritWait wait(5000ms);
  const PeerCulpritWait::Time t0{};
  CHECK(wait.Sift({Verdict(0)}, true, false, t0).empty());
  const auto both = wait.Sift({Verdict(1, HangRule::kFileTimer)}, true, false, t0 + 1000ms);
  REQUIRE(both.size() == 2);
  CHECK(both[0].local_rank == 0);
  CHECK(both[1].rule == HangRule::kFileTimer);
}

TEST_CASE("first-step verdicts are silences: held like heartbeat ones", "[unit][hang]") {
  PeerCulpritWait wait(5000ms);
  const PeerCulpritWait::Time t0{};
  CHECK(wait.Sift({Verdict(0, HangRule::kFirstStep)}, true, false, t0).empty());
  CHECK(wait.Sift({}, true, false, t0 + 5000ms).size() == 1);
  CHECK(wait.Sift({Verdict(0, HangRule::kFirstStep)}, /*held_up_elsewhere=*/false, false, t0)
            .size() == 1);
}

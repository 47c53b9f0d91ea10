// Scenario tests of the hang bookkeeping (agent/hang/hang_watch.h) with fake clocks: no processes,
// no sleeps. Verdicts are rendered as one line each and compared with the expected lines.

#include <catch2/catch.hpp>

#include <csignal>

#include "absl/strings/str_cat.h"
#include "agent/hang/hang_watch.h"

using namespace std::chrono_literals;
using mxrun::FileTimerRequest;
using mxrun::HangSettings;
using mxrun::HangVerdict;
using mxrun::HangWatch;

namespace {

using Lines = std::vector<std::string>;

// A watch over `workers` workers (local rank i is global rank 10 + i) and two fake clocks that
// advance together: the steady one the agent judges by, and the wall clock of FileTimer requests.
class Scenario {
 public:
  explicit Scenario(HangSettings settings, int workers = 3) : watch(settings) {
    for (int i = 0; i < workers; ++i) watch.WorkerStarted(i, 10 + i, now);
  }
  void Advance(std::chrono::milliseconds by) {
    now += by;
    wall += by;
  }
  Lines Check() {
    Lines lines;
    for (const HangVerdict& v : watch.Check(now, wall)) {
      lines.push_back(
          absl::StrCat("local ", v.local_rank, " ", mxrun::HangRuleName(v.rule), ": ", v.detail));
    }
    return lines;
  }
  double WallSeconds(std::chrono::milliseconds from_now = 0ms) const {
    return std::chrono::duration<double>((wall + from_now).time_since_epoch()).count();
  }
  HangWatch::TimerResult Timer(int local_rank, pid_t pid, const std::string& scope,
                               double expiration_time, int signal = SIGKILL) {
    return watch.OnTimerRequest(local_rank, FileTimerRequest{pid, scope, expiration_time, signal},
                                wall);
  }
  std::chrono::milliseconds UntilDeadline() {
    std::optional<HangWatch::Time> deadline = watch.NextDeadline(now, wall);
    REQUIRE(deadline.has_value());
    return std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
  }

  HangWatch watch;
  HangWatch::Time now{1000s};
  HangWatch::WallTime wall{std::chrono::seconds(1'700'000'000)};
};

HangSettings Heartbeat(std::chrono::milliseconds timeout) {
  HangSettings s;
  s.heartbeat_timeout = timeout;
  s.exit_barrier_timeout = 0ms;
  return s;
}

HangSettings Barrier(std::chrono::milliseconds timeout) {
  HangSettings s;
  s.exit_barrier_timeout = timeout;
  return s;
}

HangSettings FileTimers() {
  HangSettings s;
  s.exit_barrier_timeout = 0ms;
  return s;
}

}  // namespace

TEST_CASE("heartbeat: a worker that never beat is never judged", "[hang]") {
  Scenario s(Heartbeat(10s), 1);
  s.Advance(1h);
  CHECK(s.Check().empty());
  CHECK_FALSE(s.watch.NextDeadline(s.now, s.wall).has_value());
}

TEST_CASE("heartbeat: silent for longer than the timeout after beating is hung", "[hang]") {
  Scenario s(Heartbeat(10s), 2);
  s.watch.HeartbeatSeen(0, s.now);
  s.watch.HeartbeatSeen(1, s.now);
  s.Advance(6s);
  s.watch.HeartbeatSeen(1, s.now);  // rank 1 keeps beating
  CHECK(s.UntilDeadline() == 4001ms);
  s.Advance(4s);
  CHECK(s.Check().empty());  // exactly the timeout: not longer than it
  s.Advance(1ms);
  CHECK(s.Check() == Lines{"local 0 heartbeat: no heartbeat for 10.0 s (--hang_timeout=10.0 s)"});
  s.Advance(20s);
  // Judged once; rank 1 stopped too, and is judged on its own deadline.
  CHECK(s.Check() == Lines{"local 1 heartbeat: no heartbeat for 24.0 s (--hang_timeout=10.0 s)"});
  CHECK(s.Check().empty());
}

TEST_CASE("heartbeat: a withdrawn verdict watches the worker again", "[hang]") {
  // The agent held rank 0's verdict (waiting for another node to name a culprit), rank 0 beat
  // again meanwhile, so the verdict was withdrawn; when rank 0 falls silent again later in the
  // same round, it is judged again.
  Scenario s(Heartbeat(10s), 1);
  s.watch.HeartbeatSeen(0, s.now);
  s.Advance(10001ms);
  CHECK(s.Check() == Lines{"local 0 heartbeat: no heartbeat for 10.0 s (--hang_timeout=10.0 s)"});
  s.Advance(3s);
  s.watch.HeartbeatSeen(0, s.now);
  CHECK(s.Check().empty());
  s.watch.VerdictWithdrawn(0);
  CHECK(s.UntilDeadline() == 10001ms);
  s.Advance(10001ms);
  CHECK(s.Check() == Lines{"local 0 heartbeat: no heartbeat for 10.0 s (--hang_timeout=10.0 s)"});
  CHECK(s.Check().empty());
}

TEST_CASE("heartbeat: the longest silence comes first", "[hang]") {
  Scenario s(Heartbeat(5s), 3);
  s.watch.HeartbeatSeen(2, s.now);
  s.Advance(2s);
  s.watch.HeartbeatSeen(0, s.now);
  s.Advance(1s);
  s.watch.HeartbeatSeen(1, s.now);
  s.Advance(10s);
  CHECK(s.Check() == Lines{"local 2 heartbeat: no heartbeat for 13.0 s (--hang_timeout=5.0 s)",
                           "local 0 heartbeat: no heartbeat for 11.0 s (--hang_timeout=5.0 s)",
                           "local 1 heartbeat: no heartbeat for 10.0 s (--hang_timeout=5.0 s)"});
}

TEST_CASE("heartbeat: workers that went silent together are judged together", "[hang]") {
  Scenario s(Heartbeat(5s), 3);
  s.watch.HeartbeatSeen(0, s.now);
  s.Advance(300ms);
  s.watch.HeartbeatSeen(1, s.now);  // silent 0.3 s after rank 0: within a tenth of the timeout
  s.Advance(300ms);
  s.watch.HeartbeatSeen(2, s.now);  // 0.6 s after: not together
  s.Advance(4401ms);
  CHECK(s.Check() == Lines{"local 0 heartbeat: no heartbeat for 5.0 s (--hang_timeout=5.0 s)",
                           "local 1 heartbeat: no heartbeat for 4.7 s, silent together with a "
                           "worker past --hang_timeout=5.0 s"});
  s.Advance(600ms);
  CHECK(s.Check() == Lines{"local 2 heartbeat: no heartbeat for 5.0 s (--hang_timeout=5.0 s)"});
}

TEST_CASE("heartbeat: an exited worker is not judged, and the rule can be off", "[hang]") {
  Scenario s(Heartbeat(5s), 2);
  s.watch.HeartbeatSeen(0, s.now);
  s.watch.WorkerExited(0, /*succeeded=*/false, s.now);
  s.Advance(1min);
  CHECK(s.Check().empty());

  Scenario off(Heartbeat(0ms), 1);
  off.watch.HeartbeatSeen(0, off.now);
  off.Advance(1h);
  CHECK(off.Check().empty());
}

TEST_CASE("exit barrier: workers still running after a peer exited 0 are hung", "[hang]") {
  Scenario s(Barrier(30s), 3);
  s.Advance(5s);
  s.watch.WorkerExited(1, /*succeeded=*/true, s.now);
  s.Advance(10s);
  s.watch.WorkerExited(0, /*succeeded=*/true, s.now);  // the first finisher started the barrier
  CHECK(s.UntilDeadline() == 20001ms);
  s.Advance(20s);
  CHECK(s.Check().empty());
  s.Advance(1ms);
  CHECK(s.Check() == Lines{"local 2 exit barrier: still running 30.0 s after rank 11 exited 0 "
                           "(--exit_barrier_timeout=30.0 s)"});
  CHECK(s.Check().empty());
}

TEST_CASE("exit barrier: a failed worker does not start it, a finished peer node does", "[hang]") {
  Scenario s(Barrier(30s), 2);
  s.watch.WorkerExited(0, /*succeeded=*/false, s.now);
  s.Advance(1min);
  CHECK(s.Check().empty());
  s.watch.PeersFinished("the workers of node 1 (b) exited 0", s.now);
  s.Advance(31s);
  CHECK(s.Check() == Lines{"local 1 exit barrier: still running 31.0 s after the workers of node 1 "
                           "(b) exited 0 (--exit_barrier_timeout=30.0 s)"});
}

TEST_CASE("exit barrier: 0 turns it off", "[hang]") {
  Scenario s(Barrier(0ms), 2);
  s.watch.WorkerExited(0, /*succeeded=*/true, s.now);
  s.Advance(1h);
  CHECK(s.Check().empty());
  CHECK_FALSE(s.watch.NextDeadline(s.now, s.wall).has_value());
}

TEST_CASE("FileTimer: released before expiry, nothing happens", "[hang][file_timer]") {
  Scenario s(FileTimers(), 1);
  CHECK(s.Timer(0, 500, "step", s.WallSeconds(5s)) == HangWatch::TimerResult::kSet);
  CHECK(s.UntilDeadline() == 5001ms);
  s.Advance(4s);
  CHECK(s.Timer(0, 500, "step", -1, 0) == HangWatch::TimerResult::kReleased);
  CHECK(s.Timer(0, 500, "step", -1, 0) == HangWatch::TimerResult::kReleaseUnknown);
  s.Advance(1min);
  CHECK(s.Check().empty());
  CHECK(s.watch.timer_count() == 0);
}

TEST_CASE("FileTimer: an expired timer names the pid, the scope and the signal",
          "[hang][file_timer]") {
  Scenario s(FileTimers(), 2);
  s.Timer(1, 777, "train.py#42", s.WallSeconds(2500ms), SIGTERM);
  s.Advance(2s);
  CHECK(s.Check().empty());
  s.Advance(500ms);
  std::vector<HangVerdict> verdicts = s.watch.Check(s.now, s.wall);
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].local_rank == 1);
  CHECK(verdicts[0].pid == 777);
  CHECK(verdicts[0].signal == SIGTERM);
  CHECK(verdicts[0].scope_id == "train.py#42");
  CHECK(verdicts[0].detail ==
        "timer 'train.py#42' of pid 777 expired at 2023-11-14 22:13:22.500 "
        "UTC (2.5 s after it was set; its signal: SIGTERM)");
  CHECK(s.watch.timer_count() == 0);
}

TEST_CASE("FileTimer: the earliest expired timer with a signal is used, as torchrun does",
          "[hang][file_timer]") {
  Scenario s(FileTimers(), 1);
  s.Timer(0, 600, "outer", s.WallSeconds(1s), 0);  // no signal: never reaps
  s.Timer(0, 600, "middle", s.WallSeconds(2s), SIGUSR1);
  s.Timer(0, 600, "inner", s.WallSeconds(3s), SIGKILL);
  s.Advance(5s);
  std::vector<HangVerdict> verdicts = s.watch.Check(s.now, s.wall);
  REQUIRE(verdicts.size() == 1);
  CHECK(verdicts[0].scope_id == "middle");
  CHECK(verdicts[0].signal == SIGUSR1);
  CHECK(s.watch.timer_count() == 0);  // every timer of that pid is cleared
}

TEST_CASE("FileTimer: expired timers without a signal are dropped without a verdict",
          "[hang][file_timer]") {
  Scenario s(FileTimers(), 1);
  s.Timer(0, 600, "watch only", s.WallSeconds(1s), 0);
  s.Advance(2s);
  CHECK(s.Check().empty());
  CHECK(s.watch.timer_count() == 0);
}

TEST_CASE("FileTimer: timers are keyed by pid and scope, a worker's end clears them",
          "[hang][file_timer]") {
  Scenario s(FileTimers(), 2);
  s.Timer(0, 600, "a", s.WallSeconds(1s));
  s.Timer(0, 601, "a", s.WallSeconds(1s));  // a descendant of worker 0, same scope
  s.Timer(1, 700, "a", s.WallSeconds(1s));
  CHECK(s.watch.timer_count() == 3);
  s.watch.WorkerExited(1, /*succeeded=*/false, s.now);
  CHECK(s.watch.timer_count() == 2);
  CHECK(s.Timer(1, 700, "b", s.WallSeconds(1s)) == HangWatch::TimerResult::kWorkerNotRunning);
  s.Advance(2s);
  Lines lines = s.Check();
  CHECK(lines.size() == 1);  // worker 0 is judged once, though two of its processes expired
}

TEST_CASE("FileTimer: the bookkeeping is bounded", "[hang][file_timer]") {
  Scenario s2(FileTimers(), 2);
  for (size_t i = 0; i < HangWatch::kMaxTimersPerWorker; ++i) {
    REQUIRE(s2.Timer(0, 600, std::to_string(i), s2.WallSeconds(1h)) ==
            HangWatch::TimerResult::kSet);
  }
  CHECK(s2.Timer(0, 600, "one more", s2.WallSeconds(1h)) == HangWatch::TimerResult::kTooMany);
  CHECK(s2.Timer(0, 600, "7", s2.WallSeconds(2h)) == HangWatch::TimerResult::kSet);  // a re-arm
  // Per worker: a leaking rank does not use up another's share.
  CHECK(s2.Timer(1, 700, "step", s2.WallSeconds(1h)) == HangWatch::TimerResult::kSet);
}

TEST_CASE("a worker gets one verdict, from the first rule that catches it", "[hang]") {
  HangSettings settings = Heartbeat(5s);
  settings.exit_barrier_timeout = 10s;
  Scenario s(settings, 2);
  s.watch.HeartbeatSeen(1, s.now);
  s.Timer(1, 900, "step", s.WallSeconds(3s));
  s.watch.WorkerExited(0, /*succeeded=*/true, s.now);
  s.Advance(20s);
  Lines lines = s.Check();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("local 1 FileTimer: timer 'step'"));
  s.watch.WorkerExited(1, /*succeeded=*/false, s.now);  // the timer's signal killed it
  CHECK(s.Check().empty());
}

TEST_CASE("a worker that survives its FileTimer's signal is still watched", "[hang][file_timer]") {
  Scenario s(Heartbeat(5s), 1);
  s.watch.HeartbeatSeen(0, s.now);
  s.Timer(0, 900, "child's scope", s.WallSeconds(1s), SIGUSR1);
  s.Advance(2s);
  Lines lines = s.Check();
  REQUIRE(lines.size() == 1);
  CHECK_THAT(lines[0], Catch::StartsWith("local 0 FileTimer"));
  s.Advance(4s);  // it handled SIGUSR1 and went on, silent
  CHECK(s.Check() == Lines{"local 0 heartbeat: no heartbeat for 6.0 s (--hang_timeout=5.0 s)"});
}

TEST_CASE("Reset forgets the previous group", "[hang]") {
  Scenario s(Barrier(1s), 2);
  s.watch.WorkerExited(0, /*succeeded=*/true, s.now);
  s.watch.Reset();
  s.watch.WorkerStarted(0, 0, s.now);
  s.Advance(1h);
  CHECK(s.Check().empty());
}

namespace {

// The next round of a scenario whose workers beat in this one: every worker taking it in-process
// (`kept`), or new processes.
void NextRound(Scenario& s, int workers, bool kept = true) {
  s.watch.Reset();
  for (int i = 0; i < workers; ++i) s.watch.WorkerStarted(i, 10 + i, s.now, kept);
}

// --hang_timeout=10 with --round_join_timeout=`join`.
HangSettings HeartbeatAndJoin(std::chrono::milliseconds join) {
  HangSettings s = Heartbeat(10s);
  s.round_join_timeout = join;
  return s;
}

// One worker that beat, then the next round (taken in-process unless `kept` is false).
void BeatThenNextRound(Scenario& s, bool kept = true) {
  s.watch.HeartbeatSeen(0, s.now);
  NextRound(s, 1, kept);
}

}  // namespace

TEST_CASE(
    "first step: after a round whose workers beat, a worker with no step since its round "
    "began is hung",
    "[hang]") {
  Scenario s(Heartbeat(10s), 2);
  s.watch.HeartbeatSeen(0, s.now);
  s.Advance(1s);
  NextRound(s, 2);  // an in-process round: a survivor and a new rank, neither has stepped yet
  CHECK(s.UntilDeadline() == 10001ms);
  s.Advance(3s);
  s.watch.HeartbeatSeen(0, s.now);  // rank 0 takes its first step; rank 1 blocks in its setup
  s.Advance(7s);
  CHECK(s.Check().empty());  // exactly the bound: not longer than it
  s.Advance(1ms);
  CHECK(s.Check() == Lines{"local 1 first step: no step reported in the 10.0 s since its round "
                           "began (--hang_timeout=10.0 s)"});
  CHECK(s.Check().empty());  // judged once
  // Rank 0 stepped: from now on the heartbeat rule judges it, from its last beat.
  CHECK(s.UntilDeadline() == 3000ms);
}

TEST_CASE("first step: a new process gets the round-join timeout, not --hang_timeout", "[hang]") {
  // It imports torch and loads its checkpoint before its first step: 600 s unless given.
  Scenario s(Heartbeat(10s), 1);
  BeatThenNextRound(s, /*kept=*/false);
  CHECK(s.UntilDeadline() == 600001ms);
  s.Advance(600001ms);
  CHECK(s.Check() == Lines{"local 0 first step: no step reported in the 600.0 s since its round "
                           "began (--round_join_timeout=600.0 s)"});
  Scenario t(HeartbeatAndJoin(20s), 1);
  BeatThenNextRound(t, /*kept=*/false);
  CHECK(t.UntilDeadline() == 20001ms);
}

TEST_CASE("first step: not in the job's first round, nor for workers that never reported",
          "[hang]") {
  Scenario s(Heartbeat(10s), 2);
  s.Advance(1h);
  CHECK(s.Check().empty());
  NextRound(s, 2);  // a restart of a script that reports nothing
  s.Advance(1h);
  CHECK(s.Check().empty());
  CHECK_FALSE(s.watch.NextDeadline(s.now, s.wall).has_value());
}

TEST_CASE(
    "first step: steps the mxrun module counted for the script arm it only when hang "
    "detection was asked for",
    "[hang]") {
  SECTION("no --hang_timeout nor --round_join_timeout: a restarted script may set up for hours") {
    Scenario s(Barrier(0ms), 1);
    s.watch.HeartbeatSeen(0, s.now, /*automatic=*/true);
    NextRound(s, 1, /*kept=*/false);
    s.Advance(2h);
    CHECK(s.Check().empty());
    CHECK_FALSE(s.watch.NextDeadline(s.now, s.wall).has_value());
  }
  SECTION("--round_join_timeout given: it judges them") {
    HangSettings join = Barrier(0ms);
    join.round_join_timeout = 20s;
    Scenario t(join, 1);
    t.watch.HeartbeatSeen(0, t.now, /*automatic=*/true);
    NextRound(t, 1, /*kept=*/false);
    t.Advance(20001ms);
    CHECK(t.Check() == Lines{"local 0 first step: no step reported in the 20.0 s since its round "
                             "began (--round_join_timeout=20.0 s)"});
  }
  SECTION("--hang_timeout given: the round-join default judges them") {
    Scenario s(Heartbeat(10s), 1);
    s.watch.HeartbeatSeen(0, s.now, /*automatic=*/true);
    NextRound(s, 1, /*kept=*/false);
    CHECK(s.UntilDeadline() == 600001ms);
  }
}

TEST_CASE("first step: the bound is --round_join_timeout, else --hang_timeout, else 600 s",
          "[hang]") {
  SECTION("no --hang_timeout: 600 s") {
    Scenario s(Barrier(0ms), 1);
    BeatThenNextRound(s);  // a progress report (the heartbeat rule is off)
    s.Advance(600s);
    CHECK(s.Check().empty());
    s.Advance(1ms);
    CHECK(s.Check() == Lines{"local 0 first step: no step reported in the 600.0 s since its "
                             "round began (--round_join_timeout=600.0 s)"});
  }
  SECTION("--round_join_timeout wins over --hang_timeout") {
    Scenario s(HeartbeatAndJoin(30s), 1);
    BeatThenNextRound(s);
    CHECK(s.UntilDeadline() == 30001ms);
    s.Advance(30001ms);
    CHECK(s.Check() == Lines{"local 0 first step: no step reported in the 30.0 s since its round "
                             "began (--round_join_timeout=30.0 s)"});
  }
  SECTION("--round_join_timeout=0 turns it off") {
    Scenario s(HeartbeatAndJoin(0ms), 1);
    BeatThenNextRound(s);
    s.Advance(1h);
    CHECK(s.Check().empty());
  }
}

TEST_CASE("first step: an exited worker is not judged", "[hang]") {
  Scenario s(Heartbeat(10s), 2);
  s.watch.HeartbeatSeen(0, s.now);
  NextRound(s, 2);
  s.watch.WorkerExited(0, /*succeeded=*/false, s.now);
  s.watch.HeartbeatSeen(1, s.now);
  s.Advance(1h);
  CHECK(s.Check() == Lines{"local 1 heartbeat: no heartbeat for 3600.0 s (--hang_timeout=10.0 s)"});
}

// Scenario tests of the uninterruptible-sleep bookkeeping (agent/hang/uninterruptible_watch.h) with
// a fake clock: no processes, no /proc, no sleeps. Each pass is one line of "local_rank:pid:state"
// observations ('?' for a state that could not be read); its verdicts come back as lines.

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "agent/hang/uninterruptible_watch.h"
#include "agent/process/proc_stat.h"

using namespace std::chrono_literals;
using mxrun::ParseUninterruptibleTimeout;
using mxrun::UninterruptibleWatch;

namespace {

using Lines = std::vector<std::string>;

class Scenario {
 public:
  explicit Scenario(std::chrono::milliseconds timeout) : watch(timeout) {}

  // "0:100:S 1:101:D": local rank 0 (pid 100) sleeps, local rank 1 (pid 101) is in D.
  Lines Pass(const std::string& observations) {
    std::vector<UninterruptibleWatch::Observation> pass;
    for (absl::string_view item : absl::StrSplit(observations, ' ', absl::SkipEmpty())) {
      std::vector<std::string> parts = absl::StrSplit(item, ':');
      REQUIRE(parts.size() == 3);
      pass.push_back(
          {std::stoi(parts[0]), std::stoi(parts[1]), parts[2] == "?" ? '\0' : parts[2][0]});
    }
    Lines lines;
    UninterruptibleWatch::Verdicts verdicts = watch.Observe(pass, now);
    for (const auto& e : verdicts.entered) {
      lines.push_back(absl::StrCat("entered: local ", e.local_rank, " pid ", e.pid));
    }
    for (const auto& s : verdicts.stuck) {
      lines.push_back(absl::StrCat("stuck: local ", s.local_rank, " pid ", s.pid, ": ", s.detail));
    }
    return lines;
  }
  // Time until the next verdict could be due; -1 ms: none pending.
  std::chrono::milliseconds UntilDeadline() const {
    std::optional<UninterruptibleWatch::Time> deadline = watch.NextDeadline();
    if (!deadline) return -1ms;
    return std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - now);
  }

  UninterruptibleWatch watch;
  UninterruptibleWatch::Time now{1000s};
};

}  // namespace

TEST_CASE("D state: a worker in D for the timeout is stuck once and named with its time",
          "[unit][hang][dstate]") {
  Scenario s(10s);
  CHECK(s.Pass("0:100:S 1:101:S") == Lines{});
  s.now += 1s;
  CHECK(s.Pass("0:100:S 1:101:D") == Lines{"entered: local 1 pid 101"});
  CHECK(s.UntilDeadline() == 10s);
  s.now += 9999ms;
  CHECK(s.Pass("0:100:R 1:101:D") == Lines{});
  CHECK(s.UntilDeadline() == 1ms);
  s.now += 2301ms;  // polled late: the time is what was measured
  CHECK(s.Pass("0:100:S 1:101:D") ==
        Lines{"stuck: local 1 pid 101: in D state for 12.3 s, at least "
              "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=10 s"});
  // Judged once: still in D later, no second verdict, nothing pending.
  CHECK(s.UntilDeadline() == -1ms);
  s.now += 20s;
  CHECK(s.Pass("0:100:S 1:101:D") == Lines{});
}

TEST_CASE("D state: exactly the timeout is enough as in torchrun", "[unit][hang][dstate]") {
  Scenario s(1500ms);
  CHECK(s.Pass("0:7:D") == Lines{"entered: local 0 pid 7"});
  s.now += 1500ms;
  CHECK(s.Pass("0:7:D") == Lines{"stuck: local 0 pid 7: in D state for 1.5 s, at least "
                                 "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1.5 s"});
}

TEST_CASE("D state: leaving D forgets the time and entering again starts it anew",
          "[unit][hang][dstate]") {
  Scenario s(2s);
  CHECK(s.Pass("0:100:D") == Lines{"entered: local 0 pid 100"});
  s.now += 1900ms;
  CHECK(s.Pass("0:100:S") == Lines{});  // its I/O completed in time
  CHECK(s.UntilDeadline() == -1ms);
  s.now += 100ms;
  CHECK(s.Pass("0:100:D") == Lines{"entered: local 0 pid 100"});
  s.now += 1900ms;
  CHECK(s.Pass("0:100:D") == Lines{});  // 3.9 s since it first entered, but not in one stretch
  s.now += 100ms;
  CHECK(s.Pass("0:100:D").size() == 1);
}

TEST_CASE("D state: an unreadable state keeps the bookkeeping and an ended worker is forgotten",
          "[unit][hang][dstate]") {
  Scenario s(1s);
  CHECK(s.Pass("0:100:D 1:101:D") == Lines{"entered: local 0 pid 100", "entered: local 1 pid 101"});
  s.now += 600ms;
  // Rank 0's stat could not be read (torchrun: None, nothing changes); rank 1 is gone.
  CHECK(s.Pass("0:100:?") == Lines{});
  s.now += 400ms;
  CHECK(s.Pass("0:100:D") == Lines{"stuck: local 0 pid 100: in D state for 1.0 s, at least "
                                   "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1 s"});
  // Rank 1 again, as a new process (a restart): its time starts from now.
  CHECK(s.Pass("1:201:D") == Lines{"entered: local 1 pid 201"});
  s.now += 999ms;
  CHECK(s.Pass("1:201:D") == Lines{});
}

TEST_CASE("D state: a new pid on a local rank is a new process whose time starts anew",
          "[unit][hang][dstate]") {
  Scenario s(1s);
  CHECK(s.Pass("0:100:D") == Lines{"entered: local 0 pid 100"});
  s.now += 900ms;
  CHECK(s.Pass("0:300:D") == Lines{"entered: local 0 pid 300"});
  s.now += 900ms;
  CHECK(s.Pass("0:300:D") == Lines{});
}

TEST_CASE("D state: workers stuck in one pass come longest first and then by local rank",
          "[unit][hang][dstate]") {
  Scenario s(1s);
  CHECK(s.Pass("2:12:D").size() == 1);
  s.now += 500ms;
  CHECK(s.Pass("0:10:D 1:11:D 2:12:D").size() == 2);
  s.now += 1s;
  const Lines lines = s.Pass("0:10:D 1:11:D 2:12:D");
  REQUIRE(lines.size() == 3);
  CHECK_THAT(lines[0], Catch::StartsWith("stuck: local 2 pid 12: in D state for 1.5 s"));
  CHECK_THAT(lines[1], Catch::StartsWith("stuck: local 0 pid 10: in D state for 1.0 s"));
  CHECK_THAT(lines[2], Catch::StartsWith("stuck: local 1 pid 11: in D state for 1.0 s"));
}

TEST_CASE("D state: a watch with timeout 0 is off and tracks nothing", "[unit][hang][dstate]") {
  Scenario s(0ms);
  CHECK_FALSE(s.watch.enabled());
  CHECK(s.Pass("0:100:D") == Lines{});
  s.now += 3600s;
  CHECK(s.Pass("0:100:D") == Lines{});
  CHECK(s.UntilDeadline() == -1ms);
}

TEST_CASE("D state: Reset forgets the previous group's workers", "[unit][hang][dstate]") {
  Scenario s(1s);
  CHECK(s.Pass("0:100:D").size() == 1);
  s.watch.Reset();
  s.now += 2s;
  CHECK(s.Pass("0:100:D") == Lines{"entered: local 0 pid 100"});
}

TEST_CASE("TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT is read as torchrun reads it",
          "[unit][hang][dstate]") {
  auto ms = [](const std::string& text) -> long {
    absl::StatusOr<std::chrono::milliseconds> t = ParseUninterruptibleTimeout(text);
    return t.ok() ? static_cast<long>(t->count()) : -1;  // -1: unparsable
  };
  // Seconds as a float.
  CHECK(ms("10") == 10'000);
  CHECK(ms(" 2.5 ") == 2'500);
  CHECK(ms("1e1") == 10'000);
  CHECK(ms("+.25") == 250);
  CHECK(ms("0.0001") == 1);  // on, however small
  // Unset/empty, zero or negative: off.
  CHECK(ms("") == 0);
  CHECK(ms("0") == 0);
  CHECK(ms("-1") == 0);
  CHECK(ms("-inf") == 0);
  // Infinity: on, never firing (as float('inf') in torchrun).
  CHECK(ms("inf") == 1'000'000'000'000L);
  CHECK(ms("1e300") == 1'000'000'000'000L);
  // Not a number: an error the launcher reports before turning the check off, as torchrun does.
  CHECK(ms("ten") == -1);
  CHECK(ms("10s") == -1);
  CHECK(ms("nan") == -1);
  CHECK(ParseUninterruptibleTimeout("ten").status().message() ==
        "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT='ten' is not a number of seconds");
}

TEST_CASE("D state: polled every tenth of the timeout within 100 ms to 1 s",
          "[unit][hang][dstate]") {
  CHECK(mxrun::UninterruptiblePollPeriod(300s) == 1s);
  CHECK(mxrun::UninterruptiblePollPeriod(5s) == 500ms);
  CHECK(mxrun::UninterruptiblePollPeriod(1s) == 100ms);
  CHECK(mxrun::UninterruptiblePollPeriod(1ms) == 100ms);
}

TEST_CASE("a kernel stack from /proc/PID/stack is read as function names", "[unit][hang][dstate]") {
  CHECK(mxrun::ParseKernelStack("[<0>] kernel_clone+0x1d3/0x400\n"
                                "[<0>] __do_sys_vfork+0x66/0x90\n"
                                "[<ffffffffa1b2c3d4>] do_syscall_64+0x71/0x290\n"
                                "[<0>] entry_SYSCALL_64_after_hwframe+0x76/0x7e\n") ==
        std::vector<std::string>{"kernel_clone", "__do_sys_vfork", "do_syscall_64",
                                 "entry_SYSCALL_64_after_hwframe"});
  CHECK(mxrun::ParseKernelStack("").empty());
  CHECK(mxrun::ParseKernelStack("[<0>] nfs_wait_bit_killable [nfs]\n") ==
        std::vector<std::string>{"nfs_wait_bit_killable"});
}

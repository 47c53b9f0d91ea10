// JudgeScratchMark: what a scratch folder's .owner mark lets the next mxrun conclude. The pid
// lookup is injected, so no process is needed.

#include <catch2/catch.hpp>

#include <map>
#include <optional>

#include "launcher/scratch_sweep.h"

using mxrun::JudgeScratchMark;
using mxrun::ScratchHost;
using mxrun::ScratchOwner;

namespace {

const ScratchHost kHere{"pid:[4026531836]", "6f1c7c2e-0d1f-4c55-9b1a-2f4f5c6d7e8f"};

// Live processes, pid -> start time.
auto Processes(std::map<pid_t, unsigned long long> live) {
  return [live](pid_t pid) -> std::optional<unsigned long long> {
    auto found = live.find(pid);
    if (found == live.end()) return std::nullopt;
    return found->second;
  };
}

}  // namespace

TEST_CASE("a scratch mark of this namespace and boot: kept while its process runs", "[unit]") {
  const std::string mark = "100 555 pid:[4026531836] 6f1c7c2e-0d1f-4c55-9b1a-2f4f5c6d7e8f\n";
  CHECK(JudgeScratchMark(mark, kHere, Processes({{100, 555}})) == ScratchOwner::kRuns);
  CHECK(JudgeScratchMark(mark, kHere, Processes({})) == ScratchOwner::kGone);
  // The pid taken by another process since: another start time.
  CHECK(JudgeScratchMark(mark, kHere, Processes({{100, 777}})) == ScratchOwner::kGone);
}

TEST_CASE("a scratch mark of another PID namespace is never judged by this one's pids", "[unit]") {
  // A container sharing $TMPDIR: its mxrun's pid 100 is nobody here, and its job still runs.
  const std::string mark = "100 555 pid:[4026532999] 6f1c7c2e-0d1f-4c55-9b1a-2f4f5c6d7e8f";
  CHECK(JudgeScratchMark(mark, kHere, Processes({})) == ScratchOwner::kNotOursToJudge);
  CHECK(JudgeScratchMark(mark, kHere, Processes({{100, 555}})) == ScratchOwner::kNotOursToJudge);
  // A namespace unreadable then, or now: not judged either.
  CHECK(JudgeScratchMark("100 555 - 6f1c7c2e-0d1f-4c55-9b1a-2f4f5c6d7e8f", kHere, Processes({})) ==
        ScratchOwner::kNotOursToJudge);
  CHECK(JudgeScratchMark("100 555 pid:[4026531836] 6f1c7c2e-0d1f-4c55-9b1a-2f4f5c6d7e8f",
                         ScratchHost{"", kHere.boot_id},
                         Processes({})) == ScratchOwner::kNotOursToJudge);
}

TEST_CASE("a scratch mark of an earlier boot is gone, whatever its namespace", "[unit]") {
  CHECK(JudgeScratchMark("100 555 pid:[4026532999] 11111111-2222-3333-4444-555555555555", kHere,
                         Processes({{100, 555}})) == ScratchOwner::kGone);
  // An unreadable boot id, then or now, proves nothing.
  CHECK(JudgeScratchMark("100 555 pid:[4026532999] -", kHere, Processes({})) ==
        ScratchOwner::kNotOursToJudge);
}

TEST_CASE("an older mxrun's two-field scratch mark is judged by pid and start time", "[unit]") {
  CHECK(JudgeScratchMark("100 555", kHere, Processes({{100, 555}})) == ScratchOwner::kRuns);
  CHECK(JudgeScratchMark("100 555\n", kHere, Processes({})) == ScratchOwner::kGone);
}

TEST_CASE("a malformed scratch mark is not judged", "[unit]") {
  for (const char* mark : {"", "100", "abc 555", "0 555", "-4 555", "100 x", "100 555 pid:[1]",
                           "100 555 a b c", "100 555 pid:[4026531836] boot extra"}) {
    INFO(mark);
    CHECK(JudgeScratchMark(mark, kHere, Processes({{100, 555}})) == ScratchOwner::kNotOursToJudge);
  }
}

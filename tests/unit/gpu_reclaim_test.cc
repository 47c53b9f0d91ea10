#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <deque>

#include "agent/node/gpu_reclaim.h"

using mxrun::GpuProcess;
using mxrun::GpuReclaimConfig;
using mxrun::GpuReclaimHooks;
using mxrun::GpuState;
using namespace std::chrono_literals;

namespace {

// NVML's answers in turn (the last one repeats), on a fake clock that sleeps advance.
class ScriptedReader : public mxrun::GpuReader {
 public:
  explicit ScriptedReader(std::deque<std::optional<std::vector<GpuState>>> answers)
      : answers_(std::move(answers)) {}
  std::optional<std::vector<GpuState>> Read(const std::vector<std::string>&) override {
    ++reads;
    auto answer = answers_.front();
    if (answers_.size() > 1) answers_.pop_front();
    return answer;
  }
  int reads = 0;

 private:
  std::deque<std::optional<std::vector<GpuState>>> answers_;
};

struct FakeClock {
  std::chrono::steady_clock::time_point now{};
  bool stop = false;
  GpuReclaimHooks Hooks() {
    GpuReclaimHooks h;
    h.now = [this] { return now; };
    h.sleep = [this](std::chrono::milliseconds d) { now += d; };
    h.stop = [this] { return stop; };
    h.describe_pid = [](pid_t pid) {
      return pid == 666 ? std::string("state Z: a zombie, its parent has not reaped it")
                        : std::string("gone");
    };
    return h;
  }
};

GpuState Gpu(unsigned long long used_mib, std::vector<GpuProcess> processes = {}) {
  return {"0", used_mib << 20, std::move(processes)};
}

}  // namespace

TEST_CASE("gpu reclaim: waits while an old worker holds the GPU, then says what it waited for",
          "[gpu_reclaim]") {
  ScriptedReader reader({std::vector<GpuState>{Gpu(9000, {{4242, 9000ull << 20}})},
                         std::vector<GpuState>{Gpu(9000, {{4242, 9000ull << 20}})},
                         std::vector<GpuState>{Gpu(300)}});
  FakeClock clock;
  const auto outcome =
      mxrun::WaitForGpuMemory(reader, {"0"}, {{4242, 3}}, GpuReclaimConfig{}, clock.Hooks());
  CHECK(outcome.waited);
  CHECK(outcome.released);
  CHECK(outcome.seconds == Approx(4.0));  // two polls of 2 s
  CHECK(outcome.text ==
        "GPU memory released after 4.0 s (it was GPU 0: 9000 MiB used, held by "
        "pid 4242 (rank 3's worker, gone) with 9000 MiB)");
  CHECK(reader.reads == 3);
}

TEST_CASE("gpu reclaim: at the time-out it names every holder, a zombie among them, and goes on",
          "[gpu_reclaim]") {
  ScriptedReader reader({std::vector<GpuState>{Gpu(2048, {{666, 2048ull << 20}})}});
  FakeClock clock;
  GpuReclaimConfig config;
  config.timeout = 10s;
  const auto outcome = mxrun::WaitForGpuMemory(reader, {"0"}, {{666, 1}}, config, clock.Hooks());
  CHECK(outcome.waited);
  CHECK_FALSE(outcome.released);
  CHECK(outcome.seconds == Approx(10.0));
  CHECK(outcome.text ==
        "GPU memory still held after 10.0 s (--gpu_reclaim_timeout): GPU 0: 2048 "
        "MiB used, held by pid 666 (rank 1's worker, state Z: a zombie, its parent "
        "has not reaped it) with 2048 MiB; starting the workers anyway (they may "
        "run out of GPU memory)");
}

TEST_CASE(
    "gpu reclaim: nothing to wait for without NVML, with a free GPU, or for another job's "
    "memory",
    "[gpu_reclaim]") {
  FakeClock clock;
  ScriptedReader none({std::nullopt});
  CHECK_FALSE(mxrun::WaitForGpuMemory(none, {"0"}, {{1, 0}}, {}, clock.Hooks()).waited);
  ScriptedReader free_gpu({std::vector<GpuState>{Gpu(100)}});
  CHECK_FALSE(mxrun::WaitForGpuMemory(free_gpu, {"0"}, {{1, 0}}, {}, clock.Hooks()).waited);
  ScriptedReader stranger({std::vector<GpuState>{Gpu(30000, {{777, 30000ull << 20}})}});
  CHECK_FALSE(mxrun::WaitForGpuMemory(stranger, {"0"}, {{1, 0}}, {}, clock.Hooks()).waited);
  GpuReclaimConfig off;
  off.timeout = 0ms;
  ScriptedReader held({std::vector<GpuState>{Gpu(9000, {{1, 9000ull << 20}})}});
  CHECK_FALSE(mxrun::WaitForGpuMemory(held, {"0"}, {{1, 0}}, off, clock.Hooks()).waited);
  CHECK(held.reads == 0);
}

TEST_CASE(
    "gpu reclaim: memory nobody listed (another PID namespace) is waited for, and a stop "
    "signal ends the wait",
    "[gpu_reclaim]") {
  FakeClock clock;
  ScriptedReader unlisted({std::vector<GpuState>{Gpu(6000)}, std::vector<GpuState>{Gpu(400)}});
  const auto released = mxrun::WaitForGpuMemory(unlisted, {"0"}, {{1, 0}}, {}, clock.Hooks());
  CHECK(released.released);
  CHECK(released.text == "GPU memory released after 2.0 s (it was GPU 0: 6000 MiB used)");
  ScriptedReader stuck({std::vector<GpuState>{Gpu(6000, {{1, 6000ull << 20}})}});
  clock.stop = true;
  const auto stopped = mxrun::WaitForGpuMemory(stuck, {"0"}, {{1, 0}}, {}, clock.Hooks());
  CHECK_FALSE(stopped.released);
  CHECK(stopped.seconds == Approx(0.0));
  CHECK_THAT(stopped.text, Catch::Contains("(stopping)"));
}

TEST_CASE("gpu reclaim: a real zombie is named as one", "[gpu_reclaim]") {
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  // Wait for its exit without reaping it: until the waitpid below it is a zombie.
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  CHECK(mxrun::DescribeProcessState(child) == "state Z: a zombie, its parent has not reaped it");
  CHECK(mxrun::DescribeProcessState(getpid()) == "state R: alive");
  REQUIRE(waitpid(child, nullptr, 0) == child);
  CHECK(mxrun::DescribeProcessState(child) == "gone");
}

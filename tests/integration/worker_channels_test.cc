// A worker cannot take its agent down through the channels it is given (issue 39, item 4): an
// oversize or malformed control message, a flood of progress reports, a FileTimer request for a
// pid that is not a worker's. Each gets a clear line, the message is dropped, the agent's memory
// stays bounded and the job goes on. Real mxrun, real workers (test_child --abuse).

#include <signal.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include <catch2/catch.hpp>

#include "tests/metrics_client.h"
#include "tests/sanitizer.h"
#include "tests/subprocess.h"

using mxrun::testing::AgentMetricsEndpoint;
using mxrun::testing::CountOccurrences;
using mxrun::testing::PageWithSamples;
using mxrun::testing::ProcessResult;
using mxrun::testing::SamplesByLabel;
using mxrun::testing::Subprocess;
using namespace std::chrono_literals;

namespace {

// The agent's peak resident memory with a worker abusing its channel: mxrun holds at most one
// 64 KiB line of it and starts at ~8 MiB; under ASan it starts at ~160 MiB of shadow memory; the
// same bound held under TSan.
constexpr long kAgentPeakKiB =
    mxrun::testing::kSanitizer == mxrun::testing::Sanitizer::kNone ? 64 * 1024 : 320 * 1024;

// A two-worker job whose rank 0 abuses its control channel once set up; both then sleep 3 s and
// report progress. Returns the agent's peak memory (KiB) seen after the abuse, and its result.
struct Abused {
  long peak_kib;
  std::string rank0_step;
  ProcessResult result;
};
Abused RunAbused(const std::string& kind) {
  Subprocess job(mxrun::testing::MxrunWithChild(
      {"--standalone", "--nproc_per_node=2", "--metrics_port=0"},
      {"--ready", "--abuse=" + kind, "--sleep=3", "--progress=0.5"}));
  const std::string endpoint = AgentMetricsEndpoint(job);
  REQUIRE(job.WaitForStdout("abused rank=0 kind=" + kind, 1, 30s));
  // The step after the junk (7), or the reports after it: the channel still works.
  const std::string page = PageWithSamples(endpoint, "mxrun_worker_step", 2);
  Abused out;
  out.rank0_step = SamplesByLabel(page, "mxrun_worker_step", "rank")["0"];
  out.peak_kib = mxrun::testing::ProcStatusKiB(job.pid(), "VmHWM");
  out.result = job.Wait(30s);
  return out;
}

}  // namespace

TEST_CASE(
    "a worker's oversize control line is dropped whole with one clear line, and its channel "
    "goes on",
    "[channels]") {
  Abused run = RunAbused("oversize");
  INFO(run.result.err);
  CHECK(run.result.exit_code == 0);
  CHECK(CountOccurrences(run.result.err,
                         "dropped a control message: a line of 1048588 bytes, "
                         "over the 65536 accepted") == 1);
  CHECK(CountOccurrences(run.result.err, "dropped a control message") == 1);
  CHECK_FALSE(run.rank0_step.empty());
  CHECK(run.peak_kib > 0);
  CHECK(run.peak_kib < kAgentPeakKiB);
}

TEST_CASE(
    "10,000 malformed control lines: the first five are named, the rest counted, and the job "
    "goes on",
    "[channels]") {
  Abused run = RunAbused("malformed");
  INFO(run.result.err);
  CHECK(run.result.exit_code == 0);
  CHECK(CountOccurrences(run.result.err, "dropped a control message: ") == 5);
  CHECK(CountOccurrences(run.result.err, "further dropped messages are counted, not logged") == 1);
  CHECK_THAT(run.result.err,
             Catch::Contains("9995 more control messages were dropped (10000 in all)"));
  CHECK_FALSE(run.rank0_step.empty());
  CHECK(run.peak_kib < kAgentPeakKiB);
}

TEST_CASE(
    "a flood of progress reports does not hold the agent: another worker's failure stops the "
    "flooding worker at once",
    "[channels]") {
  // Rank 0 floods for up to 10 s; 1 s in, the test kills rank 1. An agent whose loop the flood
  // held would see that failure only when the flood ended ("flood done"). (On this machine the
  // agent's reads kept up with this writer even before they were bounded per wake-up.)
  Subprocess job(
      mxrun::testing::MxrunWithChild({"--standalone", "--nproc_per_node=2", "--max_restarts=0"},
                                     {"--ready", "--abuse=flood", "--sleep=30"}));
  REQUIRE(job.WaitForStdout("ready rank=1", 1, 30s));
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  std::this_thread::sleep_for(1s);
  const std::string& out = job.out();
  const int rank1 = mxrun::testing::IntsAfter(out.substr(out.find("ready rank=1")), "pid").at(0);
  REQUIRE(kill(rank1, SIGKILL) == 0);
  const ProcessResult r = job.Wait(60s);
  INFO(r.out << r.err);
  CHECK(r.exit_code == 1);
  CHECK_THAT(r.out, Catch::Contains("caught SIGTERM rank=0 during the flood sent="));
  CHECK_THAT(r.out, !Catch::Contains("flood done"));
  CHECK(mxrun::testing::IntsAfter(r.out, "during the flood sent").at(0) > 1000);
}

TEST_CASE(
    "a FileTimer request for a pid that is not a worker's (the agent's own) is refused with a "
    "line, and nothing is signalled",
    "[channels][hang]") {
  Subprocess job(mxrun::testing::MxrunWithChild({"--standalone", "--nproc_per_node=2"},
                                                {"--ready", "--abuse=timer-foreign", "--sleep=2"}),
                 {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}});
  const ProcessResult r = job.Wait(60s);
  INFO(r.out << r.err);
  CHECK_THAT(r.out,
             Catch::Contains("kind=timer-foreign pid=" + std::to_string(job.pid()) + " written=1"));
  CHECK(r.exit_code == 0);  // an agent that trusted it would have SIGKILLed itself
  CHECK_THAT(r.err,
             Catch::Contains("FileTimer: ignored a request from pid " + std::to_string(job.pid()) +
                             " (scope 'abuse'): it is not one "
                             "of this agent's running workers or their descendants"));
}

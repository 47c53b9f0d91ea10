#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "agent/metrics/agent_metrics.h"
#include "agent/process/proc_stat.h"
#include "common/control_protocol.h"
#include "trainer/progress_report.h"

using mxrun::AgentMetrics;
using mxrun::ExpositionFormat;
using Time = mxrun::AgentObserver::Time;
using std::chrono::milliseconds;

namespace {

mxrun::RoundAssignment Round(int round, int restarts, int base = 2) {
  mxrun::RoundAssignment r;
  r.run_id = "job7";
  r.round = round;
  r.node_rank = 1;
  r.num_nodes = 2;
  r.local_world_size = 2;
  r.global_rank_base = base;
  r.world_size = 4;
  r.restart_count = restarts;
  r.max_restarts = 3;
  return r;
}

std::vector<mxrun::WorkerGroup::WorkerStatus> Workers(pid_t first_pid) {
  std::vector<mxrun::WorkerGroup::WorkerStatus> workers(2);
  for (int i = 0; i < 2; ++i) {
    workers[i].local_rank = i;
    workers[i].global_rank = 2 + i;
    workers[i].pid = first_pid + i;
    workers[i].running = true;
  }
  return workers;
}

mxrun::WorkerControlMessage Step(long long step, double seconds = -1) {
  return mxrun::ParseWorkerControlLine(mxrun::ProgressLine(step, seconds));
}

bool Has(const std::string& page, const std::string& line) {
  return page.find(line + "\n") != std::string::npos;
}

}  // namespace

TEST_CASE("agent metrics: rounds, restarts, failures by cause, steps, recovery, CPU and memory",
          "[metrics]") {
  std::map<pid_t, mxrun::ProcessUsage> usage{
      {100, {1.5, 4096}}, {101, {2.0, 8192}}, {200, {0.25, 1024}}};
  AgentMetrics metrics(
      "job7",
      [&](pid_t pid) -> std::optional<mxrun::ProcessUsage> {
        auto it = usage.find(pid);
        if (it == usage.end()) return std::nullopt;
        return it->second;
      },
      [](const std::string&) -> std::optional<double> { return std::nullopt; });
  const Time t0{};
  metrics.RoundStarted(t0, Round(0, 0), Workers(100));
  metrics.Progress(t0 + milliseconds(1000), 0, 2, Step(1, 0.5));
  metrics.Progress(t0 + milliseconds(1000), 1, 3, Step(1));
  metrics.Progress(t0 + milliseconds(1400), 1, 3,
                   mxrun::ParseWorkerControlLine(
                       "{\"step\": 3, \"step_seconds\": 0.2, \"busy_seconds\": 0.125}"));
  std::string page = metrics.Render(ExpositionFormat::kPrometheusText, t0 + milliseconds(1500));
  INFO(page);
  CHECK(Has(page, "mxrun_agent_rounds_total{run_id=\"job7\",node=\"1\"} 1"));
  CHECK(Has(page, "mxrun_agent_world_size{run_id=\"job7\",node=\"1\"} 4"));
  CHECK(Has(page, "mxrun_agent_restarts_remaining{run_id=\"job7\",node=\"1\"} 3"));
  CHECK(Has(page, "mxrun_worker_step{run_id=\"job7\",node=\"1\",rank=\"3\"} 3"));
  CHECK(Has(page, "mxrun_worker_step_seconds{run_id=\"job7\",node=\"1\",rank=\"2\"} 0.5"));
  CHECK(Has(page, "mxrun_worker_step_seconds{run_id=\"job7\",node=\"1\",rank=\"3\"} 0.2"));
  CHECK(Has(page, "mxrun_worker_busy_seconds{run_id=\"job7\",node=\"1\",rank=\"3\"} 0.125"));
  CHECK(page.find("mxrun_worker_busy_seconds{run_id=\"job7\",node=\"1\",rank=\"2\"}") ==
        std::string::npos);  // rank 2 never said
  CHECK(Has(page, "mxrun_worker_heartbeat_age_seconds{run_id=\"job7\",node=\"1\",rank=\"2\"} 0.5"));
  CHECK(Has(page, "mxrun_worker_cpu_seconds_total{run_id=\"job7\",node=\"1\",rank=\"3\"} 2"));
  CHECK(
      Has(page, "mxrun_worker_resident_memory_bytes{run_id=\"job7\",node=\"1\",rank=\"2\"} 4096"));
  CHECK(Has(page, "mxrun_agent_workers_running{run_id=\"job7\",node=\"1\"} 2"));

  // Rank 2 is killed by a signal at 2 s; the restarted group's first step comes at 5 s.
  mxrun::WorkerFailure failure;
  failure.global_rank = 2;
  failure.term_signal = 9;
  metrics.WorkerFailed(t0 + milliseconds(2000), failure);
  metrics.Progress(t0 + milliseconds(2500), 1, 3, Step(4));  // the old group: not a recovery
  auto restarted = Workers(100);
  restarted[0].pid = 200;  // rank 2 is a new process; rank 3 was kept in-process
  metrics.RoundStarted(t0 + milliseconds(4000), Round(1, 1), restarted);
  metrics.Progress(t0 + milliseconds(5000), 1, 3, Step(5));
  page = metrics.Render(ExpositionFormat::kPrometheusText, t0 + milliseconds(5000));
  CHECK(Has(page, "mxrun_agent_rounds_total{run_id=\"job7\",node=\"1\"} 2"));
  CHECK(Has(page, "mxrun_agent_restarts_total{run_id=\"job7\",node=\"1\"} 1"));
  CHECK(Has(page, "mxrun_agent_restarts_remaining{run_id=\"job7\",node=\"1\"} 2"));
  CHECK(Has(page,
            "mxrun_agent_worker_failures_total{run_id=\"job7\",node=\"1\",cause=\"signal\"} 1"));
  CHECK(
      Has(page, "mxrun_agent_worker_failures_total{run_id=\"job7\",node=\"1\",cause=\"exit\"} 0"));
  CHECK(Has(page, "mxrun_agent_recovery_seconds_bucket{run_id=\"job7\",node=\"1\",le=\"2.5\"} 0"));
  CHECK(Has(page, "mxrun_agent_recovery_seconds_bucket{run_id=\"job7\",node=\"1\",le=\"5\"} 1"));
  CHECK(Has(page, "mxrun_agent_recovery_seconds_sum{run_id=\"job7\",node=\"1\"} 3"));
  // The new process's CPU adds to what the rank's earlier one used; its step is not reported yet.
  CHECK(Has(page, "mxrun_worker_cpu_seconds_total{run_id=\"job7\",node=\"1\",rank=\"2\"} 1.75"));
  CHECK(page.find("mxrun_worker_step{run_id=\"job7\",node=\"1\",rank=\"2\"}") == std::string::npos);
  CHECK(Has(page, "mxrun_worker_step{run_id=\"job7\",node=\"1\",rank=\"3\"} 5"));
}

TEST_CASE("agent metrics: another node's failure starts the recovery clock too", "[metrics]") {
  AgentMetrics metrics(
      "r", [](pid_t) { return std::optional<mxrun::ProcessUsage>(); },
      [](const std::string&) -> std::optional<double> { return std::nullopt; });
  const Time t0{};
  metrics.RoundStarted(t0, Round(0, 0), Workers(10));
  metrics.Reforming(t0 + milliseconds(100), true, "node 0's worker failed");
  metrics.RoundStarted(t0 + milliseconds(200), Round(1, 1), Workers(20));
  metrics.Progress(t0 + milliseconds(350), 0, 2, Step(7));
  const std::string page = metrics.Render(ExpositionFormat::kOpenMetrics, t0 + milliseconds(400));
  INFO(page);
  CHECK(Has(page, "mxrun_agent_recovery_seconds_count{run_id=\"job7\",node=\"1\"} 1"));
  CHECK(Has(page, "mxrun_agent_recovery_seconds_sum{run_id=\"job7\",node=\"1\"} 0.25"));
  CHECK(Has(page, "# TYPE mxrun_agent_worker_failures counter"));
  CHECK(page.substr(page.size() - 6) == "# EOF\n");
}

TEST_CASE("progress reports: step, step_seconds and busy_seconds validated, with clear errors",
          "[metrics]") {
  auto report = mxrun::ParseWorkerControlLine("{\"step\": 12, \"step_seconds\": 0.25}");
  CHECK(report.kind == mxrun::WorkerControlMessage::Kind::kProgress);
  CHECK(report.step == 12);
  CHECK(report.step_seconds == 0.25);
  CHECK(mxrun::ParseWorkerControlLine("{\"step\": 0}").step_seconds == -1);
  CHECK(report.busy_seconds == -1);
  CHECK(mxrun::ParseWorkerControlLine("{\"step\": 2, \"busy_seconds\": 0.125}").busy_seconds ==
        0.125);
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"step\": 2, \"busy_seconds\": -0.5}"),
                    Catch::Contains("'busy_seconds' must be a number of seconds from 0 to 1e6, "
                                    "got -0.5"));
  CHECK_FALSE(report.automatic);
  CHECK(mxrun::ParseWorkerControlLine("{\"step\": 3, \"auto\": true}").automatic);
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"step\": 3, \"auto\": 1}"),
                    Catch::Contains("'auto' must be true or false, got 1"));
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"step\": -1}"),
                    Catch::Contains("'step' must be a non-negative integer"));
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"step\": 1.5}"),
                    Catch::Contains("'step' must be a non-negative integer"));
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"step\": 1, \"step_seconds\": \"x\"}"),
                    Catch::Contains("'step_seconds' must be a number of seconds"));
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"stepp\": 1}"),
                    Catch::Contains("expected \"hello\", \"joined\", \"step\" or \"leaving\""));
  CHECK(mxrun::ParseWorkerControlLine(mxrun::LeavingLine()).kind ==
        mxrun::WorkerControlMessage::Kind::kLeaving);
  CHECK_THROWS_WITH(mxrun::ParseWorkerControlLine("{\"leaving\": false}"),
                    Catch::Contains("'leaving' must be true, got false"));
}

TEST_CASE("proc stat: CPU ticks and resident pages are read from their fields", "[metrics]") {
  // Fields 3.. of a real line: state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime cutime cstime priority nice threads itrealvalue starttime vsize rss
  auto stat = mxrun::ParseProcStat(
      "42 (python3 (x)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 4 0 9999 123456 789 "
      "18446744073709551615");
  REQUIRE(stat.has_value());
  CHECK(stat->user_ticks == 250);
  CHECK(stat->system_ticks == 50);
  CHECK(stat->start_time == 9999);
  CHECK(stat->rss_pages == 789);
}

TEST_CASE("the trainer's progress reports: throttled, mean step time, none across a restart",
          "[metrics]") {
  int fds[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
  using Clock = mxrun::trainer::ProgressReport::Clock;
  const Clock::time_point t0{};
  {
    mxrun::trainer::ProgressReport report(fds[0]);
    report.Step(1, t0);
    report.Step(2, t0 + milliseconds(10));   // within 50 ms of the last report: not sent
    report.Step(3, t0 + milliseconds(100));  // 2 steps in 100 ms
    report.Restart();
    report.Step(4, t0 + milliseconds(900));  // after an evaluation: no step time
  }
  char buffer[256] = {};
  const ssize_t n = read(fds[1], buffer, sizeof buffer - 1);
  close(fds[0]);
  close(fds[1]);
  REQUIRE(n > 0);
  std::vector<mxrun::WorkerControlMessage> reports;
  std::string text(buffer, static_cast<size_t>(n));
  for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos;
       start = end + 1) {
    reports.push_back(mxrun::ParseWorkerControlLine(text.substr(start, end - start)));
  }
  REQUIRE(reports.size() == 3);
  CHECK(reports[0].step == 1);
  CHECK(reports[0].step_seconds == -1);
  CHECK(reports[1].step == 3);
  CHECK(reports[1].step_seconds == Approx(0.05));
  CHECK(reports[2].step == 4);
  CHECK(reports[2].step_seconds == -1);
}

#include <catch2/catch.hpp>

#include "rendezvous/master_server/status_page.h"

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST_CASE(
    "the status page: runs, nodes with their ranks, late nodes marked, the timeline, "
    "everything escaped, nothing external",
    "[status_page]") {
  const auto now = std::chrono::steady_clock::time_point{} + seconds(100);
  mxrun::RunSnapshot run;
  run.run_id = "job<1>";
  run.phase = "running";
  run.round = 1;
  run.restarts_spent = 1;
  run.job.min_nodes = 2;
  run.job.max_nodes = 2;
  run.job.max_restarts = 3;
  run.world_size = 4;
  run.failures = {{"signal", 1}};
  for (int i = 0; i < 2; ++i) {
    mxrun::MemberSnapshot m;
    m.node_rank = i;
    m.desc.host = i == 0 ? "node-a" : "node-b";
    m.desc.address = "10.0.0." + std::to_string(i + 1);
    m.desc.local_world_size = 2;
    m.state = "running";
    m.since_last_seen = milliseconds(i == 0 ? 400 : 4500);
    for (int local = 0; local < 2; ++local) {
      mxrun::RankSnapshot r;
      r.global_rank = 2 * i + local;
      r.local_rank = local;
      r.step = 120 + local;
      r.step_seconds = r.global_rank == 3 ? 0.5 : 0.125;
      r.since_report_s = 0.3;
      r.straggler = r.global_rank == 3;
      m.ranks.push_back(r);
    }
    run.members.push_back(m);
  }
  run.history = {
      {now - seconds(60), "round", "round 0 formed: 2 nodes, world size 4"},
      {now - seconds(20), "failure", "worker rank 3 on node-b failed (Signal 9 (SIGKILL))"},
      {now - seconds(19), "round", "round 1 formed: 2 nodes, world size 4"}};
  run.restarts = {
      mxrun::RestartPhases{1, "rank 3 failed: <signal>", false, 0.25, 1.5, 0.0625, -1, 2}};
  const std::string page = mxrun::RenderStatusPage({run}, now);
  INFO(page);
  // Each restart phase by phase, the slowest node's; unknown phases shown as such.
  CHECK_THAT(page, Catch::Contains("<tr><td>1</td><td>rank 3 failed: &lt;signal&gt;</td>"
                                   "<td>0.250 s</td><td>1.500 s</td><td>0.062 s</td><td>?</td>"
                                   "<td>1.812 s</td><td>2</td></tr>"));
  CHECK_THAT(page, Catch::StartsWith("<!DOCTYPE html>"));
  CHECK_THAT(page, Catch::Contains("run job&lt;1&gt;: <span class=\"phase-running\">running"));
  CHECK_THAT(page, Catch::Contains("restarts 1 of 3; failures: signal 1"));
  CHECK_THAT(page, Catch::Contains("<td>node-a</td><td>10.0.0.1</td><td>0-1</td>"));
  CHECK_THAT(page, Catch::Contains("<tr class=\"late\"><td>1</td><td>node-b</td><td>10.0.0.2</td>"
                                   "<td>2-3</td>"));
  // Ranks with their step rates and report ages; the straggler marked.
  CHECK_THAT(page,
             Catch::Contains("<tr><td>0</td><td>node-a</td><td>0</td><td>120</td>"
                             "<td>0.125 s</td><td>8.00</td><td>0.3 s ago</td><td></td></tr>"));
  CHECK_THAT(page, Catch::Contains("<tr class=\"straggler\"><td>3</td><td>node-b</td><td>1</td>"
                                   "<td>121</td><td>0.500 s</td><td>2.00</td><td>0.3 s ago</td>"
                                   "<td>straggler</td></tr>"));
  // Newest first, with how long ago.
  const size_t newest = page.find("19 s ago, round: round 1 formed");
  const size_t failure = page.find("20 s ago, failure: worker rank 3 on node-b failed");
  const size_t oldest = page.find("60 s ago, round: round 0 formed");
  CHECK(newest != std::string::npos);
  CHECK(failure != std::string::npos);
  CHECK(oldest != std::string::npos);
  CHECK(newest < failure);
  CHECK(failure < oldest);
  CHECK_THAT(page, Catch::Contains("left:0.0%"));  // the oldest event at the left edge
  CHECK_THAT(page, !Catch::Contains("<script"));
  CHECK_THAT(page, !Catch::Contains("http://"));
  CHECK_THAT(page, !Catch::Contains("https://"));
  CHECK_THAT(mxrun::RenderStatusPage({}, now), Catch::Contains("No runs yet."));
}

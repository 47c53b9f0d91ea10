#include "rendezvous/master_server/master_metrics.h"

#include <functional>
#include <map>

namespace mxrun {

std::string RenderMasterMetrics(const std::vector<RunSnapshot>& runs, ExpositionFormat format,
                                bool leading) {
  MetricsWriter w(format);
  auto run_labels = [](const RunSnapshot& run) { return MetricLabels{{"run_id", run.run_id}}; };

  w.Family("mxrun_master_leading", MetricType::kGauge,
           "1 while this process serves as the rendezvous master (an etcd-elected replica: while "
           "it leads), else 0.");
  w.Sample({}, leading ? 1 : 0);

  w.Family("mxrun_master_runs", MetricType::kGauge,
           "Runs the master holds, by phase (waiting, running, succeeded, failed; finished runs "
           "are kept for finished_run_ttl).");
  std::map<std::string, int> phases{
      {"waiting", 0}, {"running", 0}, {"succeeded", 0}, {"failed", 0}};
  for (const RunSnapshot& run : runs) ++phases[run.phase];
  for (const auto& [phase, count] : phases) w.Sample({{"phase", phase}}, count);

  w.Family("mxrun_run_info", MetricType::kGauge, "1 for every run, its phase as a label.");
  for (const RunSnapshot& run : runs) {
    w.Sample({{"run_id", run.run_id}, {"phase", run.phase}}, 1);
  }
  w.Family("mxrun_run_rounds_total", MetricType::kCounter,
           "Rounds formed: the first one and every re-formation after a failure, a lost node or "
           "a new one.");
  for (const RunSnapshot& run : runs) w.Sample(run_labels(run), run.round + 1);
  w.Family("mxrun_run_world_size", MetricType::kGauge,
           "Workers in the current round (0 while no round runs).");
  for (const RunSnapshot& run : runs) w.Sample(run_labels(run), run.world_size);
  w.Family("mxrun_run_nodes", MetricType::kGauge,
           "Nodes of the run by state: waiting (for a round), running, succeeded, stopping.");
  for (const RunSnapshot& run : runs) {
    std::map<std::string, int> states{
        {"waiting", 0}, {"running", 0}, {"succeeded", 0}, {"stopping", 0}};
    for (const MemberSnapshot& m : run.members) ++states[m.state];
    for (const auto& [state, count] : states) {
      w.Sample({{"run_id", run.run_id}, {"state", state}}, count);
    }
  }
  w.Family("mxrun_run_min_nodes", MetricType::kGauge, "--nnodes' minimum.");
  for (const RunSnapshot& run : runs) w.Sample(run_labels(run), run.job.min_nodes);
  w.Family("mxrun_run_max_nodes", MetricType::kGauge, "--nnodes' maximum.");
  for (const RunSnapshot& run : runs) w.Sample(run_labels(run), run.job.max_nodes);
  w.Family("mxrun_run_restarts_total", MetricType::kCounter,
           "Restarts of the worker group spent (failures while restarts remained).");
  for (const RunSnapshot& run : runs) w.Sample(run_labels(run), run.restarts_spent);
  w.Family("mxrun_run_restarts_remaining", MetricType::kGauge,
           "Restarts left before a failure ends the run (--max_restarts minus those spent).");
  for (const RunSnapshot& run : runs) {
    w.Sample(run_labels(run), run.job.max_restarts - run.restarts_spent);
  }
  w.Family("mxrun_run_failures_total", MetricType::kCounter,
           "Failures by cause: exit (a worker's non-zero exit), signal, hang, straggler "
           "(--straggler_restart), node_lost (a node left or went silent while the group ran), "
           "rendezvous_timeout (no round within the join timeout).");
  for (const RunSnapshot& run : runs) {
    for (const char* cause :
         {"exit", "signal", "hang", "straggler", "node_lost", "rendezvous_timeout"}) {
      auto it = run.failures.find(cause);
      w.Sample({{"run_id", run.run_id}, {"cause", cause}},
               it == run.failures.end() ? 0 : static_cast<double>(it->second));
    }
  }
  w.Family("mxrun_run_last_recovery_seconds", MetricType::kGauge,
           "Seconds from the run's last failure (a worker's, or a node lost) to the re-formed "
           "group's first reported step (absent before the first recovery).");
  for (const RunSnapshot& run : runs) {
    if (run.last_recovery_s >= 0) w.Sample(run_labels(run), run.last_recovery_s);
  }
  w.Family("mxrun_node_heartbeat_age_seconds", MetricType::kGauge,
           "Seconds since the master last heard from a node of the current round (its lease "
           "ends at heartbeat_interval x missed_heartbeats).");
  for (const RunSnapshot& run : runs) {
    for (const MemberSnapshot& m : run.members) {
      // Nodes still waiting have no rank to tell them apart (several may share a host).
      if (m.node_rank < 0) continue;
      w.Sample(
          {{"run_id", run.run_id}, {"node", std::to_string(m.node_rank)}, {"host", m.desc.host}},
          static_cast<double>(m.since_last_seen.count()) / 1000.0);
    }
  }
  // Every rank of the round, from the progress the agents pass on with their heartbeats.
  auto for_each_rank = [&](const std::function<void(const MetricLabels&, const RankSnapshot&)>& f) {
    for (const RunSnapshot& run : runs) {
      for (const MemberSnapshot& m : run.members) {
        for (const RankSnapshot& r : m.ranks) {
          f({{"run_id", run.run_id},
             {"node", std::to_string(m.node_rank)},
             {"rank", std::to_string(r.global_rank)}},
            r);
        }
      }
    }
  };
  w.Family("mxrun_rank_step", MetricType::kGauge,
           "The last step a rank reported completed, as its agent passed it on.");
  for_each_rank([&](const MetricLabels& l, const RankSnapshot& r) {
    w.Sample(l, static_cast<double>(r.step));
  });
  w.Family("mxrun_rank_step_seconds", MetricType::kGauge, "How long a rank's last steps took.");
  for_each_rank([&](const MetricLabels& l, const RankSnapshot& r) {
    if (r.step_seconds >= 0) w.Sample(l, r.step_seconds);
  });
  w.Family("mxrun_rank_report_age_seconds", MetricType::kGauge,
           "Seconds since a rank's last progress report (its heartbeat age as the master sees "
           "it).");
  for_each_rank(
      [&](const MetricLabels& l, const RankSnapshot& r) { w.Sample(l, r.since_report_s); });
  w.Family("mxrun_rank_straggler", MetricType::kGauge,
           "1 while the master names a rank a straggler (step time above --straggler_factor "
           "times the other ranks' median for --straggler_steps steps), else 0.");
  for_each_rank(
      [&](const MetricLabels& l, const RankSnapshot& r) { w.Sample(l, r.straggler ? 1 : 0); });
  return w.Finish();
}

}  // namespace mxrun

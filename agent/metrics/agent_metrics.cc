#include "agent/metrics/agent_metrics.h"

#include <sys/stat.h>
#include <unistd.h>

#include <ctime>

#include "agent/process/proc_stat.h"

namespace mxrun {
namespace {

// Seconds since `path` was last modified (a heartbeat file's touch); nullopt when it is absent.
std::optional<double> ModifiedAgo(const std::string& path) {
  struct stat st {};
  if (path.empty() || stat(path.c_str(), &st) != 0) return std::nullopt;
  timespec now{};
  clock_gettime(CLOCK_REALTIME, &now);
  const double ago = static_cast<double>(now.tv_sec - st.st_mtim.tv_sec) +
                     static_cast<double>(now.tv_nsec - st.st_mtim.tv_nsec) / 1e9;
  return ago > 0 ? ago : 0;
}

double Seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

std::optional<ProcessUsage> ReadProcessUsage(pid_t pid) {
  std::optional<ProcStat> stat = ReadProcStat(pid);
  if (!stat) return std::nullopt;
  static const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  static const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  return ProcessUsage{static_cast<double>(stat->user_ticks + stat->system_ticks) / ticks,
                      static_cast<double>(stat->rss_pages) * page};
}

const std::vector<double>& AgentMetrics::PhaseBuckets() {
  // Finer at the low end than a whole recovery: a stop or a start takes milliseconds.
  static const std::vector<double> buckets{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 120, 600};
  return buckets;
}

void AgentMetrics::RestartTimed(const RestartPhases& phases) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (const std::string& phase : RestartPhaseNames()) {
    const double seconds = PhaseSeconds(phases, phase);
    if (seconds < 0) continue;  // unknown: no sample rather than a guess
    restart_phases_.try_emplace(phase, PhaseBuckets()).first->second.Observe(seconds);
  }
}

const std::vector<double>& AgentMetrics::RecoveryBuckets() {
  static const std::vector<double> buckets{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600};
  return buckets;
}

AgentMetrics::AgentMetrics(std::string run_id, UsageReader usage, FileAge file_age)
    : usage_(std::move(usage)),
      file_age_(file_age ? std::move(file_age) : FileAge(ModifiedAgo)),
      run_id_(std::move(run_id)) {}

void AgentMetrics::RoundStarted(Time now, const RoundAssignment& round,
                                const std::vector<WorkerGroup::WorkerStatus>& workers) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!round.run_id.empty()) run_id_ = round.run_id;
  node_rank_ = round.node_rank;
  ++rounds_;
  world_size_ = round.world_size;
  num_nodes_ = round.num_nodes;
  restarts_spent_ = round.restart_count;
  max_restarts_ = round.max_restarts;
  if (recovering_since_) round_started_since_failure_ = true;
  std::map<int, Rank> next;
  for (const WorkerGroup::WorkerStatus& worker : workers) {
    if (!worker.running) continue;
    Rank rank;
    if (auto it = ranks_.find(worker.global_rank); it != ranks_.end()) {
      rank = it->second;  // a kept worker keeps its counters; a new process adds to them
      if (rank.pid != worker.pid) {
        rank.cpu_seconds_before += rank.last_cpu_seconds;
        rank.last_cpu_seconds = 0;
        rank.step = -1;
        rank.step_seconds = -1;
        rank.busy_seconds = -1;
        rank.last_report.reset();
      }
    }
    rank.local_rank = worker.local_rank;
    rank.pid = worker.pid;
    rank.running = true;
    rank.straggling = false;  // judged afresh in every round
    rank.heartbeat_file = worker.heartbeat_file;
    rank.started = now;
    next[worker.global_rank] = rank;
  }
  // Ranks this node no longer holds keep their CPU counter only while they are listed; a
  // counter that disappears is what Prometheus expects of a series that ended.
  ranks_ = std::move(next);
}

void AgentMetrics::WorkerFailed(Time now, const WorkerFailure& failure) {
  std::lock_guard<std::mutex> lock(mutex_);
  ++failures_[FailureCause(failure)];
  if (!recovering_since_) recovering_since_ = now;
  round_started_since_failure_ = false;
  for (auto& [global_rank, rank] : ranks_) {
    if (global_rank == failure.global_rank) rank.running = false;
  }
}

void AgentMetrics::Reforming(Time now, bool /*restart*/, const std::string& /*reason*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  // Another node's failure (or a node lost) costs this node's training as much as its own.
  if (!recovering_since_) recovering_since_ = now;
  round_started_since_failure_ = false;
}

void AgentMetrics::Progress(Time now, int local_rank, int global_rank,
                            const WorkerControlMessage& report) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranks_.find(global_rank);
  if (it == ranks_.end()) return;  // a report racing a re-formation
  Rank& rank = it->second;
  rank.local_rank = local_rank;
  if (report.step_seconds >= 0) rank.step_seconds = report.step_seconds;
  if (report.busy_seconds >= 0) rank.busy_seconds = report.busy_seconds;
  rank.step = report.step;
  rank.last_report = now;
  if (recovering_since_ && round_started_since_failure_) {
    last_recovery_seconds_ = Seconds(now - *recovering_since_);
    recovery_.Observe(last_recovery_seconds_);
    recovering_since_.reset();
    round_started_since_failure_ = false;
  }
}

void AgentMetrics::GroupSucceeded(Time /*now*/,
                                  const std::vector<WorkerGroup::WorkerStatus>& /*workers*/) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [global_rank, rank] : ranks_) rank.running = false;
}

void AgentMetrics::StragglerChanged(Time /*now*/, const StragglerNews& news) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (news.straggling) ++stragglers_named_;
  if (auto it = ranks_.find(news.rank); it != ranks_.end()) it->second.straggling = news.straggling;
}

void AgentMetrics::GoodputChanged(const GoodputClock& clock) {
  std::lock_guard<std::mutex> lock(mutex_);
  goodput_ = clock;
}

std::string AgentMetrics::Render(ExpositionFormat format, Time now) const {
  std::lock_guard<std::mutex> lock(mutex_);
  MetricsWriter w(format);
  const std::string node = node_rank_ >= 0 ? std::to_string(node_rank_) : "";
  const MetricLabels job{{"run_id", run_id_}, {"node", node}};
  auto per_rank = [&](int global_rank) {
    MetricLabels labels = job;
    labels.emplace_back("rank", std::to_string(global_rank));
    return labels;
  };

  w.Family("mxrun_agent_rounds_total", MetricType::kCounter,
           "Rounds (rendezvous results) this node took part in.");
  w.Sample(job, rounds_);
  w.Family("mxrun_agent_world_size", MetricType::kGauge,
           "Workers in the job's current round, every node together.");
  w.Sample(job, world_size_);
  w.Family("mxrun_agent_nodes", MetricType::kGauge, "Nodes in the job's current round.");
  w.Sample(job, num_nodes_);
  w.Family("mxrun_agent_restarts_total", MetricType::kCounter,
           "Restarts of the job's worker group spent so far (TORCHELASTIC_RESTART_COUNT).");
  w.Sample(job, restarts_spent_);
  w.Family("mxrun_agent_restarts_remaining", MetricType::kGauge,
           "Restarts left before a failure ends the job (--max_restarts minus those spent).");
  w.Sample(job, max_restarts_ - restarts_spent_);
  w.Family("mxrun_agent_worker_failures_total", MetricType::kCounter,
           "Failures of this node's workers, by cause: exit (non-zero exit code), signal, hang, "
           "straggler (--straggler_restart).");
  for (const char* cause : {"exit", "signal", "hang", "straggler"}) {
    MetricLabels labels = job;
    labels.emplace_back("cause", cause);
    auto it = failures_.find(cause);
    w.Sample(labels, it == failures_.end() ? 0 : static_cast<double>(it->second));
  }
  w.Family("mxrun_agent_recovery_seconds", MetricType::kHistogram,
           "Seconds from a failure (here or on another node) to the first step reported after "
           "the group re-formed.");
  w.HistogramSamples(job, recovery_);
  w.Family("mxrun_agent_restart_phase_seconds", MetricType::kHistogram,
           "Seconds of each phase of this node's restarts: stop (failure seen to the old "
           "workers stopped), reform (to the new round), start (to its workers running), "
           "first_step (to their first progress report; only restarts whose workers report).");
  for (const std::string& phase : RestartPhaseNames()) {
    MetricLabels labels = job;
    labels.emplace_back("phase", phase);
    auto it = restart_phases_.find(phase);
    w.HistogramSamples(labels,
                       it == restart_phases_.end() ? Histogram(PhaseBuckets()) : it->second);
  }
  w.Family("mxrun_agent_workers_running", MetricType::kGauge, "Workers running on this node.");
  int running = 0;
  for (const auto& [global_rank, rank] : ranks_) running += rank.running ? 1 : 0;
  w.Sample(job, running);

  const GoodputReport goodput = goodput_ ? goodput_->Report(now) : GoodputReport{};
  w.Family("mxrun_agent_goodput_seconds_total", MetricType::kCounter,
           "This node's wall time by what it went to: training, rendezvous, startup, restart, "
           "lost_work (steps done again after a restart).");
  for (const auto& [state, seconds] :
       std::vector<std::pair<const char*, double>>{{"training", goodput.training},
                                                   {"rendezvous", goodput.rendezvous},
                                                   {"startup", goodput.startup},
                                                   {"restart", goodput.restart},
                                                   {"lost_work", goodput.lost_work}}) {
    MetricLabels labels = job;
    labels.emplace_back("state", state);
    w.Sample(labels, seconds);
  }
  w.Family("mxrun_agent_goodput_ratio", MetricType::kGauge,
           "Training time over wall time since the agent started (effective training time "
           "ratio).");
  w.Sample(job, goodput.ratio());
  w.Family("mxrun_agent_steps_redone_total", MetricType::kCounter,
           "Steps trained again after restarts (reported before a failure, then again after).");
  w.Sample(job, static_cast<double>(goodput.steps_redone));

  w.Family("mxrun_worker_step", MetricType::kGauge,
           "The last step a worker reported completed (control channel progress reports).");
  for (const auto& [global_rank, rank] : ranks_) {
    if (rank.step >= 0) w.Sample(per_rank(global_rank), static_cast<double>(rank.step));
  }
  w.Family("mxrun_worker_step_seconds", MetricType::kGauge,
           "How long a worker's last reported step took.");
  for (const auto& [global_rank, rank] : ranks_) {
    if (rank.step_seconds >= 0) w.Sample(per_rank(global_rank), rank.step_seconds);
  }
  w.Family("mxrun_worker_busy_seconds", MetricType::kGauge,
           "The rank's own work in its last reported step (input and forward, no collective; "
           "the mxrun module's busy_seconds), which stragglers are judged by where known.");
  for (const auto& [global_rank, rank] : ranks_) {
    if (rank.busy_seconds >= 0) w.Sample(per_rank(global_rank), rank.busy_seconds);
  }
  w.Family("mxrun_worker_straggler", MetricType::kGauge,
           "1 while a rank is named a straggler (its step time above --straggler_factor times "
           "the other ranks' median for --straggler_steps steps), else 0.");
  for (const auto& [global_rank, rank] : ranks_) {
    if (rank.running) w.Sample(per_rank(global_rank), rank.straggling ? 1 : 0);
  }
  w.Family("mxrun_agent_stragglers_total", MetricType::kCounter,
           "Times a rank of this node was named a straggler.");
  w.Sample(job, static_cast<double>(stragglers_named_));
  w.Family("mxrun_worker_heartbeat_age_seconds", MetricType::kGauge,
           "Seconds since a running worker last gave a sign of progress: a progress report or a "
           "touch of its heartbeat file, whichever is later (absent before the first).");
  for (const auto& [global_rank, rank] : ranks_) {
    if (!rank.running) continue;
    std::optional<double> age;
    if (rank.last_report) age = Seconds(now - *rank.last_report);
    if (!rank.heartbeat_file.empty()) {
      if (std::optional<double> file = file_age_(rank.heartbeat_file)) {
        if (!age || *file < *age) age = file;
      }
    }
    if (age) w.Sample(per_rank(global_rank), *age);
  }
  // CPU and memory: read once now, for the running workers.
  std::map<int, double> resident;
  for (auto& [global_rank, rank] : ranks_) {
    if (!rank.running) continue;
    if (std::optional<ProcessUsage> usage = usage_(rank.pid)) {
      rank.last_cpu_seconds = usage->cpu_seconds;
      resident[global_rank] = usage->resident_bytes;
    }
  }
  w.Family("mxrun_worker_cpu_seconds_total", MetricType::kCounter,
           "CPU time (user and system) of a rank's worker processes on this node.");
  for (const auto& [global_rank, rank] : ranks_) {
    w.Sample(per_rank(global_rank), rank.cpu_seconds_before + rank.last_cpu_seconds);
  }
  w.Family("mxrun_worker_resident_memory_bytes", MetricType::kGauge,
           "Resident memory of a running worker process.");
  for (const auto& [global_rank, bytes] : resident) w.Sample(per_rank(global_rank), bytes);
  return w.Finish();
}

}  // namespace mxrun

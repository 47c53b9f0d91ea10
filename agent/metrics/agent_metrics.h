#pragma once
// An agent's Prometheus metrics (`--metrics_port`): what the agent's loop observes
// (agent_observer.h) kept under a mutex, and rendered on the metrics server's thread at each
// scrape. docs/guide/operating.md ("Metrics") lists every metric with its type and meaning.
//
// Labels: run_id, node (this node's rank in the current round) and, per worker, rank (global).
// Per-worker values come from the worker's progress reports on its control channel
// ({"step": N, "step_seconds": S}), its heartbeat file (MXRUN_HEARTBEAT_FILE, when hang detection
// is on) and /proc (CPU time and resident memory of the worker process).
//
// Recovery time: from a failure (this node's worker, or the rendezvous' word that another node's
// failed) to the first progress report after the group re-formed.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_observer.h"
#include "common/http/metrics_text.h"

namespace mxrun {

// CPU seconds (user + system) and resident bytes of a process; nullopt once it is gone.
struct ProcessUsage {
  double cpu_seconds = 0;
  double resident_bytes = 0;
};
std::optional<ProcessUsage> ReadProcessUsage(pid_t pid);

class AgentMetrics : public AgentObserver {
 public:
  using UsageReader = std::function<std::optional<ProcessUsage>(pid_t)>;
  using FileAge = std::function<std::optional<double>(const std::string& path)>;  // seconds

  // `run_id` until the first round names it; readers injectable for tests.
  explicit AgentMetrics(std::string run_id, UsageReader usage = ReadProcessUsage,
                        FileAge file_age = nullptr);

  void RoundStarted(Time now, const RoundAssignment& round,
                    const std::vector<WorkerGroup::WorkerStatus>& workers) override;
  void WorkerFailed(Time now, const WorkerFailure& failure) override;
  void Reforming(Time now, bool restart, const std::string& reason) override;
  void Progress(Time now, int local_rank, int global_rank,
                const WorkerControlMessage& report) override;
  void GroupSucceeded(Time now, const std::vector<WorkerGroup::WorkerStatus>& workers) override;
  void GoodputChanged(const GoodputClock& clock) override;
  void StragglerChanged(Time now, const StragglerNews& news) override;
  void RestartTimed(const RestartPhases& phases) override;

  // The page, as of `now`. Thread-safe.
  std::string Render(ExpositionFormat format, Time now) const;

  static const std::vector<double>& RecoveryBuckets();
  static const std::vector<double>& PhaseBuckets();  // a restart's phases

 private:
  struct Rank {
    int local_rank = 0;
    pid_t pid = -1;
    bool running = false;
    std::string heartbeat_file;
    long long step = -1;       // -1: no report yet
    double step_seconds = -1;  // the last step's time (-1: unknown)
    double busy_seconds = -1;  // its own work in it (busy_seconds; -1: unknown)
    std::optional<Time> last_report;
    Time started;
    double cpu_seconds_before = 0;  // of earlier processes of this rank (the counter grows)
    double last_cpu_seconds = 0;    // of the current process, as last read
    bool straggling = false;
  };

  UsageReader usage_;
  FileAge file_age_;
  mutable std::mutex mutex_;
  std::string run_id_;
  int node_rank_ = -1;
  int rounds_ = 0;
  int world_size_ = 0;
  int num_nodes_ = 0;
  int restarts_spent_ = 0;
  int max_restarts_ = 0;
  std::map<std::string, long long> failures_;  // by cause: exit, signal, hang
  std::optional<Time> recovering_since_;       // a failure not yet recovered from
  bool round_started_since_failure_ = false;
  Histogram recovery_{RecoveryBuckets()};
  double last_recovery_seconds_ = -1;
  // Per phase (RestartPhaseNames()), the known seconds of each timed restart.
  std::map<std::string, Histogram> restart_phases_;
  mutable std::map<int, Rank> ranks_;    // by global rank (mutable: CPU read at render)
  std::optional<GoodputClock> goodput_;  // the agent's, as of its last change
  long long stragglers_named_ = 0;
};

}  // namespace mxrun

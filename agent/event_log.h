#pragma once
// torchrun 2.x's --event-log-handler: torchelastic's event records
// (torch.distributed.elastic.events), in the JSON shape SimpleElasticAgent builds them
// (_construct_event), one object per line. `null` (the default) records nothing; `console` writes
// each record, and nothing else, as one line on stderr, as torchelastic's console handler does.
//
// What is recorded (torchelastic's names, "torchelastic.worker.status.<STATE>"):
//   AGENT RENDEZVOUS (with duration_ms) and ASSIGN_WORKER_RANKS for every round this node joins;
//   WORKER START for each worker of a round; WORKER FAILED for the worker whose failure ends an
//   attempt (at once, where torchelastic records only the last attempt's end), WORKER TERMINATED
//   for the workers the agent then stops, WORKER SUCCEEDED for each worker of a group that
//   succeeded; AGENT SUCCEEDED when the job ended (its workers may have failed, as in torchelastic)
//   and AGENT FAILED when the agent itself failed (a signal, the rendezvous).

#include <sys/types.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>

#include "rendezvous/rendezvous.h"

namespace mxrun {

// One record: torchelastic's Event with the metadata of _construct_event.
struct ElasticEvent {
  std::string state;         // "RENDEZVOUS", "START", "SUCCEEDED", ...: the name's last part
  bool from_worker = false;  // source "WORKER" (else "AGENT")
  std::string run_id;
  std::optional<int> global_rank;
  std::optional<int> group_rank;
  std::optional<pid_t> worker_pid;  // worker_id (as a string), and in the inner metadata
  std::string role;
  std::string hostname;
  long total_run_time = 0;  // seconds since the agent started
  std::string rdzv_backend;
  std::optional<std::string> raw_error;  // the failed worker's error file (JSON text), or why
  int agent_restarts = 0;
  std::optional<double> duration_ms;
  // The inner "metadata" (a JSON text, as torchelastic has it).
  std::optional<int> group_world_size;
  std::string entry_point;
  std::optional<int> local_rank;  // worker events: these four, each as a one-element list
  std::optional<int> role_rank;
  std::optional<int> role_world_size;
  std::optional<int> exit_code;
};

// The record as one line of JSON (without '\n'), laid out as Python's json.dumps writes it.
std::string SerializeEvent(const ElasticEvent& event);

// True for the handler names mxrun has: "null" and "console".
bool IsEventLogHandler(const std::string& name);

struct EventLogConfig {
  std::string handler = "null";
  std::string run_id;
  std::string role = "default";
  std::string rdzv_backend = "static";
  std::string entry_point;  // what the workers run (torchelastic: the entrypoint's name)
  int console_fd = STDERR_FILENO;
};

// Records the agent's events; what a round, a worker or a failure adds comes with each call.
class ElasticEventLog {
 public:
  explicit ElasticEventLog(EventLogConfig config);

  bool enabled() const { return enabled_; }
  void SetRound(const RoundAssignment& round) { round_ = round; }
  void Agent(const std::string& state, std::optional<double> duration_ms = std::nullopt,
             std::optional<std::string> raw_error = std::nullopt) const;
  void Worker(const std::string& state, int local_rank, std::optional<pid_t> pid,
              std::optional<int> exit_code = std::nullopt,
              std::optional<std::string> raw_error = std::nullopt) const;

 private:
  ElasticEvent Base(const std::string& state) const;
  void Write(const ElasticEvent& event) const;

  EventLogConfig config_;
  bool enabled_ = false;
  std::string hostname_;  // the fully qualified name, as torchelastic's socket.getfqdn()
  std::optional<RoundAssignment> round_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
};

}  // namespace mxrun

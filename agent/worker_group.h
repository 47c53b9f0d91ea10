#pragma once
// The workers of one node for one attempt: starting them with the environment contract, relaying
// their output, recording how each one ended, and stopping them (signal to each process group, a
// grace period per worker, SIGKILL, reap, then kill any descendants left behind).
//
// States: running -> (all exited 0) succeeded | (first non-zero exit or death by signal) failed.
// The first failure is the one the agent saw first; workers stopped by the agent afterwards are not
// failures. Single-threaded, driven by the agent's EventLoop.

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/death_guardian.h"
#include "agent/event_loop.h"
#include "agent/log_spec.h"
#include "agent/output_relay.h"
#include "common/env_contract.h"
#include "common/worker_failure.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

// What to run and how; the same for every attempt.
struct WorkerSpec {
  std::string executable;              // resolved path for execve
  std::vector<std::string> argv;       // argv[0] included; "${local_rank}" is substituted
  EnvMap base_env;                     // the agent's environment
  std::string role = "default";
  std::string host_name;
  LogSpec logs;
  std::string attempts_dir;            // per-attempt folders (error files, logs) are made here
  bool attempts_dir_kept = false;      // false: a scratch folder removed at exit (paths not shown)
  size_t last_lines = 10;              // kept per worker for the failure summary
  bool json_logs = false;              // --log_format=json: console lines as JSON objects, and the
                                       // agent's failure summary as one log record
};

class WorkerGroup {
 public:
  enum class State { kRunning, kSucceeded, kFailed };

  WorkerGroup(const WorkerSpec& spec, EventLoop& loop, DeathGuardian& guardian);
  ~WorkerGroup();

  // Spawns every worker of `round`. A worker that cannot be executed becomes the group's failure
  // (exit code 127 with the errno text as its message); no further workers are started then.
  void Start(const RoundAssignment& round);

  // Called with every reaped child; returns false when `pid` is not one of this group's workers.
  bool OnChildExit(pid_t pid, int wait_status);

  State state() const;
  const std::optional<WorkerFailure>& first_failure() const { return first_failure_; }

  // Sends `signo` to every running worker's process group, waits up to `grace` per worker while
  // still relaying output, SIGKILLs the rest, reaps them, kills leftover descendants and closes the
  // output streams. `reap` is called to reap children while waiting. Returns when all are gone.
  // Calling `Escalate()` (from a signal callback) while this runs skips the rest of the grace.
  void Stop(int signo, std::chrono::milliseconds grace, const std::function<void()>& reap);
  void Escalate() { escalate_ = true; }

  // After every worker has exited on its own: kill leftover descendants, flush and close output.
  void Finish();

 private:
  struct Worker;
  void SpawnWorker(Worker& worker, const RoundAssignment& round);
  void RecordExit(Worker& worker, int exit_code, int term_signal);
  void CleanUp();

  const WorkerSpec& spec_;
  EventLoop& loop_;
  DeathGuardian& guardian_;
  std::vector<std::unique_ptr<Worker>> workers_;
  std::optional<WorkerFailure> first_failure_;
  int node_rank_ = 0;
  int attempt_ = 0;
  bool escalate_ = false;
  bool cleaned_up_ = false;
};

}  // namespace mxrun

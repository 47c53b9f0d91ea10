#pragma once
// The agent's loop: join a round, start the workers, watch them, and on a failure stop them and ask
// the rendezvous whether to restart. Signals the agent receives are forwarded to the workers, which
// get their grace period; the agent then exits with 128 + the signal number.
//
// Exit codes (docs/CONTRACT.md): 0 every worker succeeded; 1 workers failed after the restart budget;
// 3 rendezvous failed; 128+N stopped by signal N.

#include <chrono>
#include <set>
#include <string>

#include "agent/death_guardian.h"
#include "agent/worker_group.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

struct AgentConfig {
  WorkerSpec worker;
  std::string entrypoint_name;              // for the summary's headline
  std::chrono::milliseconds term_timeout{30000};
  std::set<int> handled_signals;            // forwarded to the workers, then the agent exits
  std::string agent_error_file;             // mxrun's own TORCHELASTIC_ERROR_FILE (may be empty)
};

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitWorkersFailed = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitRendezvousFailed = 3;

class ElasticAgent {
 public:
  ElasticAgent(AgentConfig config, Rendezvous& rendezvous, DeathGuardian& guardian);

  // Runs the job to its end and returns the process exit code.
  int Run();

 private:
  void OnSignal(int signo);
  void ReapChildren();

  AgentConfig config_;
  Rendezvous& rendezvous_;
  DeathGuardian& guardian_;
  std::unique_ptr<EventLoop> loop_;
  WorkerGroup* group_ = nullptr;     // the running group, while there is one
  int stop_signal_ = 0;              // first handled signal received
};

}  // namespace mxrun

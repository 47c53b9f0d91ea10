#pragma once
// Where a restart's time went, phase by phase (issue 37): the failure seen -> the old workers
// stopped -> the group re-formed (the rendezvous gave the new round) -> the new workers running
// (spawned, or standbys and kept workers told their ranks) -> their first step (the first progress
// report after). Each agent times its own node's restarts (agent/restart_clock.h) and sends them
// to its master, which keeps the slowest node's figure per phase (rendezvous/master_state). A phase
// that could not be timed is -1 and is said to be unknown, never guessed: the first step of
// workers that send no progress reports, above all.

#include <string>
#include <vector>

namespace mxrun {

struct RestartPhases {
  int round = -1;            // the round the restart formed
  std::string cause;         // what was seen: "rank 1 failed: exit code 3", the rendezvous' word
  bool in_process = false;   // kept workers and standbys took the round (no full restart)
  double stop_s = -1;        // failure seen -> old workers stopped
  double reform_s = -1;      // stopped -> the new round arrived
  double start_s = -1;       // the round arrived -> its workers running
  double first_step_s = -1;  // running -> first progress report (-1: none came)
  int nodes = 1;             // how many nodes' timings these are (the master's slowest-of)

  // Failure seen to first step; to running when no step was reported.
  double TotalSeconds() const;
};

// The phases' names, as the metrics' `phase` label and the JSON keys use them:
// stop, reform, start, first_step.
const std::vector<std::string>& RestartPhaseNames();
// The phase's seconds by name (RestartPhaseNames()).
double PhaseSeconds(const RestartPhases& phases, const std::string& name);

// "restart 2 (round 3; rank 1 failed: exit code 3): stop 0.020 s, re-form 0.310 s, start 0.050 s,
// first step 1.200 s; 1.580 s in all". `number`: the restart's count in this job (0: not said).
std::string FormatRestartPhases(const RestartPhases& phases, int number);

// The master's view of one restart from its nodes' reports: per phase, the slowest node's (the
// group waits for it); the cause is the first report's; `nodes` counts the reports.
RestartPhases SlowestOf(const std::vector<RestartPhases>& reports);

// Checks what an agent sent: finite, non-negative or -1, below a day each; a round >= 0. Returns
// what is wrong, empty when it is fine.
std::string CheckRestartPhases(const RestartPhases& phases);

}  // namespace mxrun

#pragma once
// The one line an agent prints when it is cancelled (SIGTERM from scancel or systemd, Ctrl-C):
// which signal, and how each of its ranks ended: on its own after the signal (exit code), killed
// by a signal, or SIGKILLed when the grace ran out. Ranks that ended the same way are listed as
// ranges: "cancelled by SIGTERM: ranks 0-2 exited 0, rank 3 was SIGKILLed after the 27 s grace;
// exit code 143".

#include <chrono>
#include <string>
#include <vector>

namespace mxrun {

struct StoppedWorker {
  int global_rank = 0;
  bool running = false;  // still there (in uninterruptible sleep past the SIGKILL)
  int exit_code = -1;    // -1: a signal ended it
  int term_signal = 0;
  bool killed_after_grace = false;
};

// `workers` in any order; empty when no group runs here (none started yet, or it finished).
// `stopped_before`: the workers were stopped before the signal came, as the group re-formed
// (a peer left, or a worker failed), and the node was waiting for its next round: the line says
// so, since how they ended is then not the signal's doing.
std::string FormatCancellation(int signo, std::chrono::milliseconds grace,
                               std::vector<StoppedWorker> workers, int exit_code,
                               bool stopped_before = false);

}  // namespace mxrun

#pragma once
// What a fault did to a job, as a person reading mxrun's console would tell it, and its comparison
// with the catalogue's ground truth (tests/faults/catalogue.h). Pure: text in, text out.

#include <optional>
#include <string>
#include <vector>

#include "tests/faults/catalogue.h"

namespace mxrun::faults {

struct Outcome {
  int exit_code = -1;  // the job's (mxrun's) exit code; -1: killed or timed out
  // One cause per recovery, in order, from mxrun's "restart N (round R; CAUSE)" lines; a failed
  // job's root cause ("exit : ...") last.
  std::vector<std::string> causes;
  int restarts = 0;  // recoveries seen (restart lines), or "restarts spent" of a failure
  Recovery recovery = Recovery::kNone;  // how the last recovery went
  std::vector<std::string> left_out;    // "left out of the job's rounds" lines, in order
  std::vector<std::string> notices;     // mxrun's other lines, its summary's included
  int steps_lost = kNotCounted;         // completed steps trained again, counted by the workload
  // Whether the final state equals the fault-free run's (nullopt: not compared).
  std::optional<bool> same_state;
};

// The console (mxrun's stderr; several agents' may be concatenated) read into an outcome; the
// caller adds exit_code, steps_lost and same_state from what it observed itself.
Outcome ReadConsole(const std::string& console);

// "" when `outcome` is what `fault`'s ground truth says; otherwise every difference, each naming
// the row, what was expected and what was observed.
std::string Mismatch(const Fault& fault, const Outcome& outcome);

}  // namespace mxrun::faults

// Which rank is a straggler (common/straggler_watch.h); what happens to it is failure_flags.cc's.

#include "absl/strings/numbers.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup StragglerFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"straggler_factor", "", false,
       "a rank is a straggler when its step time stays above this many times the other ranks' "
       "median (progress reports; the master judges every rank of a multi-node job)",
       "1.5"},
      {"straggler_steps", "", false, "... for this many consecutive steps (0: never judge)", "20"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    double factor = 0;
    if (!absl::SimpleAtod(v.Trimmed("straggler_factor"), &factor) || !(factor > 1.0) ||
        factor > 1000) {
      return v.Invalid("straggler_factor", "not a factor above 1",
                       "a number above 1 and at most 1000, such as 1.5");
    }
    absl::StatusOr<int> steps =
        v.Int("straggler_steps", 0, 1'000'000, "0 (never) to 1000000 steps");
    if (!steps.ok()) return steps.status();
    o.agent.stragglers = {factor, *steps};
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

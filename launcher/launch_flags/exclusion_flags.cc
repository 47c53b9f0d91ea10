// Repeat offenders left out of a multi-node job's next rounds
// (rendezvous/master_state/node_exclusion.h).

#include "absl/strings/str_cat.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup ExclusionFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"exclude_after", "", false,
       "a multi-node job leaves a node out of its next rounds after this many worker failures "
       "there within --exclude_window, while the others meet the minimum of --nnodes (0: never)",
       "2"},
      {"exclude_window", "", false, "... within this many seconds", "3600"},
      {"exclude_backoff", "", false,
       "seconds a node is left out; doubled at each exclusion of the same node; it is admitted "
       "again after",
       "300"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    absl::StatusOr<int> after = v.Int("exclude_after", 0, 1000, "0 (never) to 1000 failures");
    if (!after.ok()) return after.status();
    absl::StatusOr<double> window = v.Seconds("exclude_window");
    if (!window.ok()) return window.status();
    absl::StatusOr<double> backoff = v.Seconds("exclude_backoff");
    if (!backoff.ok()) return backoff.status();
    if (*window <= 0 || *backoff <= 0 || *backoff > 7 * 86400) {
      return absl::InvalidArgumentError(
          absl::StrCat("--exclude_window=", v.Text("exclude_window"),
                       " --exclude_backoff=", v.Text("exclude_backoff"),
                       " are not valid; accepted: a window above 0 s and a "
                       "back-off above 0 s, at most a week (604800)"));
    }
    o.exclusion.after_failures = *after;
    o.exclusion.window = std::chrono::milliseconds(static_cast<long long>(*window * 1000));
    o.exclusion.backoff = std::chrono::milliseconds(static_cast<long long>(*backoff * 1000));
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

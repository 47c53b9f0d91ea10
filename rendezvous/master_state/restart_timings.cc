#include "rendezvous/master_state/restart_timings.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mxrun {

std::string RestartTimings::Add(const RestartPhases& phases, int current_round) {
  if (std::string wrong = CheckRestartPhases(phases); !wrong.empty()) return wrong;
  if (phases.round > current_round) {
    return absl::StrCat("round ", phases.round, " has not formed (the run is at round ",
                        current_round, ")");
  }
  RestartPhases report = phases;
  report.nodes = 1;
  auto it = std::lower_bound(rounds_.begin(), rounds_.end(), phases.round,
                             [](const RestartPhases& r, int round) { return r.round < round; });
  if (it != rounds_.end() && it->round == phases.round) {
    *it = SlowestOf({*it, report});
    return "";
  }
  if (rounds_.size() >= kKept && it == rounds_.begin()) {
    return absl::StrCat("round ", phases.round, " is older than the ", kKept, " kept");
  }
  rounds_.insert(it, std::move(report));
  if (rounds_.size() > kKept) rounds_.pop_front();
  return "";
}

std::vector<RestartPhases> RestartTimings::Slowest() const {
  return {rounds_.begin(), rounds_.end()};
}

}  // namespace mxrun

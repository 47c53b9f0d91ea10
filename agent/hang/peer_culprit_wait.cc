#include "agent/hang/peer_culprit_wait.h"

#include <algorithm>
#include <iterator>

namespace mxrun {

std::vector<HangVerdict> PeerCulpritWait::Sift(std::vector<HangVerdict> verdicts,
                                               bool held_up_elsewhere, bool local_culprit,
                                               Time now) {
  const bool only_heartbeats = std::all_of(verdicts.begin(), verdicts.end(),
                                           [](const HangVerdict& v) { return IsSilence(v.rule); });
  const bool hold = !verdicts.empty() && held_.empty() && held_up_elsewhere && !local_culprit &&
                    only_heartbeats && grace_.count() > 0;
  if (hold) {
    held_ = std::move(verdicts);
    until_ = now + grace_;
    return {};
  }
  if (held_.empty()) return verdicts;
  if (verdicts.empty() && now < until_) return {};  // still waiting for word from elsewhere
  // Due, or something else to act on: the held ones go with it (the root cause first).
  std::vector<HangVerdict> out = std::move(held_);
  held_.clear();
  std::move(verdicts.begin(), verdicts.end(), std::back_inserter(out));
  return out;
}

std::optional<PeerCulpritWait::Time> PeerCulpritWait::deadline() const {
  if (held_.empty()) return std::nullopt;
  return until_;
}

void PeerCulpritWait::Reset() { held_.clear(); }

}  // namespace mxrun

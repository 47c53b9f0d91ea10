#pragma once
// Repeat offenders kept out (issue 27): a node whose workers failed `after_failures` times within
// `window` is left out of the job's next rounds for a back-off that doubles with each exclusion
// (as Horovod's elastic mode treats failing hosts), while the job can still meet its minimum node
// count; its agent keeps running and is admitted again when the back-off ends. Pure, one per run
// inside MasterState, keyed by agent id (one agent per node; its host names it in messages).

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/wire/wire.h"

namespace mxrun {

class NodeExclusion {
 public:
  using Time = std::chrono::steady_clock::time_point;
  explicit NodeExclusion(ExclusionRule rule = {}) : rule_(rule) {}

  // A worker of agent `agent` (on `host`) failed. When that makes it a repeat offender and
  // `can_exclude` (the others still meet the minimum), it is excluded: returns why, in words
  // ("2 worker failures within 3600 s: left out for 300 s, exclusion 1").
  std::optional<std::string> Failed(Time now, const std::string& agent, const std::string& host,
                                    bool can_exclude);
  bool Excluded(const std::string& agent) const;
  std::string Why(const std::string& agent) const;  // "" when not excluded
  // The agents whose back-off has ended by `now`: admitted again (their failures start afresh).
  std::vector<std::string> TakeEnded(Time now);
  std::optional<Time> NextEnd() const;
  // Every exclusion so far, one line each ("h3: 2 worker failures within 3600 s: ..."), for the
  // summary at the end of the job.
  const std::vector<std::string>& history() const { return history_; }
  const ExclusionRule& rule() const { return rule_; }

 private:
  struct Offender {
    std::vector<Time> failures;  // within the window, oldest first
    int exclusions = 0;
    std::optional<Time> excluded_until;
    std::string why;
  };
  ExclusionRule rule_;
  std::map<std::string, Offender> offenders_;
  std::vector<std::string> history_;
};

}  // namespace mxrun

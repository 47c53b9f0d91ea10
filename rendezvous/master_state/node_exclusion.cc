#include "rendezvous/master_state/node_exclusion.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace mxrun {

namespace {

double Seconds(std::chrono::milliseconds d) { return static_cast<double>(d.count()) / 1000.0; }

}  // namespace

std::optional<std::string> NodeExclusion::Failed(Time now, const std::string& agent,
                                                 const std::string& host, bool can_exclude) {
  if (rule_.after_failures <= 0 || agent.empty()) return std::nullopt;
  Offender& o = offenders_[agent];
  o.failures.erase(std::remove_if(o.failures.begin(), o.failures.end(),
                                  [&](Time t) { return now - t > rule_.window; }),
                   o.failures.end());
  o.failures.push_back(now);
  if (static_cast<int>(o.failures.size()) < rule_.after_failures || !can_exclude) {
    return std::nullopt;
  }
  // The back-off doubles with each exclusion (capped, so that it never overflows).
  const std::chrono::milliseconds backoff = rule_.backoff * (1LL << std::min(o.exclusions, 20));
  ++o.exclusions;
  o.excluded_until = now + backoff;
  o.why = absl::StrCat(o.failures.size(), " worker failures within ", Seconds(rule_.window),
                       " s: left out for ", Seconds(backoff), " s (exclusion ", o.exclusions,
                       "; --exclude_after=", rule_.after_failures, ")");
  o.failures.clear();
  history_.push_back(absl::StrCat(host, ": ", o.why));
  return o.why;
}

bool NodeExclusion::Excluded(const std::string& agent) const {
  auto it = offenders_.find(agent);
  return it != offenders_.end() && it->second.excluded_until.has_value();
}

std::string NodeExclusion::Why(const std::string& agent) const {
  auto it = offenders_.find(agent);
  return it != offenders_.end() && it->second.excluded_until ? it->second.why : "";
}

std::vector<std::string> NodeExclusion::TakeEnded(Time now) {
  std::vector<std::string> ended;
  for (auto& [agent, o] : offenders_) {
    if (o.excluded_until && now >= *o.excluded_until) {
      o.excluded_until.reset();
      o.why.clear();
      ended.push_back(agent);
    }
  }
  return ended;
}

std::optional<NodeExclusion::Time> NodeExclusion::NextEnd() const {
  std::optional<Time> next;
  for (const auto& [agent, o] : offenders_) {
    if (o.excluded_until && (!next || *o.excluded_until < *next)) next = o.excluded_until;
  }
  return next;
}

}  // namespace mxrun

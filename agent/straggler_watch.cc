#include "agent/straggler_watch.h"

#include <algorithm>
#include <cstdio>

namespace mxrun {

std::optional<StragglerNews> StragglerWatch::Report(int rank, long long step,
                                                    double step_seconds) {
  Rank& r = ranks_[rank];
  const long long advanced = r.step >= 0 && step > r.step ? step - r.step : 1;
  r.step = step;
  if (step_seconds < 0) return std::nullopt;  // no time for this report: nothing to judge
  r.step_seconds = step_seconds;
  std::vector<double> others;
  for (const auto& [other, o] : ranks_) {
    if (other != rank && o.step_seconds >= 0) others.push_back(o.step_seconds);
  }
  if (others.empty()) return std::nullopt;  // nobody to compare with (yet)
  std::sort(others.begin(), others.end());
  const size_t n = others.size();
  const double median = n % 2 == 1 ? others[n / 2] : (others[n / 2 - 1] + others[n / 2]) / 2;
  const bool slow = step_seconds > rule_.factor * median;
  r.slow_steps = slow ? r.slow_steps + advanced : 0;
  StragglerNews news{rank, false, step_seconds, median, r.slow_steps};
  if (!r.straggling && r.slow_steps >= rule_.steps) {
    r.straggling = true;
    news.straggling = true;
    return news;
  }
  if (r.straggling && !slow) {
    r.straggling = false;
    return news;
  }
  return std::nullopt;
}

std::vector<int> StragglerWatch::Stragglers() const {
  std::vector<int> out;
  for (const auto& [rank, r] : ranks_) {
    if (r.straggling) out.push_back(rank);
  }
  return out;
}

std::string DescribeStraggler(const StragglerNews& news) {
  char text[256];
  if (news.straggling) {
    std::snprintf(text, sizeof text,
                  "rank %d is a straggler: %.3f s a step, %.1fx the other ranks' median (%.3f s), "
                  "for %lld steps",
                  news.rank, news.step_seconds,
                  news.others_median > 0 ? news.step_seconds / news.others_median : 0.0,
                  news.others_median, news.steps);
  } else {
    std::snprintf(text, sizeof text,
                  "rank %d is no longer a straggler: %.3f s a step, the other ranks' median %.3f s",
                  news.rank, news.step_seconds, news.others_median);
  }
  return text;
}

}  // namespace mxrun

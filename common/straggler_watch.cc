#include "common/straggler_watch.h"

#include <algorithm>
#include <cstdio>

namespace mxrun {

namespace {

// The median of `sorted` without one element equal to `own` (which it holds); nullopt when
// nothing is left.
std::optional<double> MedianWithout(const std::vector<double>& sorted, double own) {
  const size_t n = sorted.size();
  if (n < 2) return std::nullopt;
  const size_t skip =
      static_cast<size_t>(std::lower_bound(sorted.begin(), sorted.end(), own) - sorted.begin());
  const size_t m = n - 1;  // the others
  auto other = [&](size_t k) { return sorted[k < skip ? k : k + 1]; };
  return m % 2 == 1 ? other(m / 2) : (other(m / 2 - 1) + other(m / 2)) / 2;
}

}  // namespace

void StragglerWatch::Record(int rank_id, long long step, double step_seconds, double busy_seconds) {
  Rank& r = ranks_[rank_id];
  const long long advanced = r.step >= 0 && step > r.step ? step - r.step : 1;
  r.step = step;
  const bool busy = busy_seconds >= 0;
  const double seconds = busy ? busy_seconds : step_seconds;
  if (seconds < 0) return;               // no time for this report: nothing to judge
  if (busy != r.busy) r.slow_steps = 0;  // another kind of time: the count starts again
  r.busy = busy;
  r.step_seconds = seconds;
  r.unjudged_steps += advanced;
}

std::optional<StragglerNews> StragglerWatch::Report(int rank_id, long long step,
                                                    double step_seconds, double busy_seconds) {
  Record(rank_id, step, step_seconds, busy_seconds);
  Rank& r = ranks_[rank_id];
  if (r.unjudged_steps == 0) return std::nullopt;
  return JudgeRank(rank_id, r, SortedTimes(r.busy));
}

std::vector<StragglerNews> StragglerWatch::Judge() {
  std::vector<StragglerNews> news;
  const std::vector<double> step_times = SortedTimes(false);
  const std::vector<double> busy_times = SortedTimes(true);
  for (auto& [rank_id, r] : ranks_) {
    if (r.unjudged_steps == 0) continue;
    if (std::optional<StragglerNews> n = JudgeRank(rank_id, r, r.busy ? busy_times : step_times)) {
      news.push_back(*n);
    }
  }
  return news;
}

std::vector<double> StragglerWatch::SortedTimes(bool busy) const {
  std::vector<double> times;
  times.reserve(ranks_.size());
  for (const auto& [rank_id, r] : ranks_) {
    if (r.step_seconds >= 0 && r.busy == busy) times.push_back(r.step_seconds);
  }
  std::sort(times.begin(), times.end());
  return times;
}

std::optional<StragglerNews> StragglerWatch::JudgeRank(int rank_id, Rank& r,
                                                       const std::vector<double>& sorted) {
  const long long steps = r.unjudged_steps;
  r.unjudged_steps = 0;
  const std::optional<double> median = MedianWithout(sorted, r.step_seconds);
  if (!median) return std::nullopt;  // nobody to compare with (yet)
  const bool slow = r.step_seconds > rule_.factor * *median;
  r.slow_steps = slow ? r.slow_steps + steps : 0;
  r.fast_steps = r.straggling && !slow ? r.fast_steps + steps : 0;
  StragglerNews news{rank_id, false, r.step_seconds, *median, r.slow_steps, r.busy};
  if (!r.straggling && rule_.steps > 0 && r.slow_steps >= rule_.steps) {
    r.straggling = true;
    news.straggling = true;
    return news;
  }
  if (r.straggling && r.fast_steps >= rule_.steps) {
    r.straggling = false;
    r.fast_steps = 0;
    news.steps = rule_.steps;
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

bool StragglerWatch::IsStraggler(int rank) const {
  auto it = ranks_.find(rank);
  return it != ranks_.end() && it->second.straggling;
}

std::string DescribeStraggler(const StragglerNews& news) {
  char text[320];
  // Busy: the ranks' own work (input and forward) per step, the collectives' waits left out.
  const char* what = news.busy ? " of its own work (input and forward)" : "";
  if (news.straggling) {
    std::snprintf(text, sizeof text,
                  "rank %d is a straggler: %.3f s%s a step, %.1fx the other ranks' median "
                  "(%.3f s), for %lld steps",
                  news.rank, news.step_seconds, what,
                  news.others_median > 0 ? news.step_seconds / news.others_median : 0.0,
                  news.others_median, news.steps);
  } else {
    std::snprintf(text, sizeof text,
                  "rank %d is no longer a straggler: %.3f s%s a step, the other ranks' median "
                  "%.3f s, for %lld steps",
                  news.rank, news.step_seconds, what, news.others_median, news.steps);
  }
  return text;
}

}  // namespace mxrun

#include "agent/rank_progress_book.h"

namespace mxrun {

WorkerControlMessage RankProgressBook::Record(int local_rank, int global_rank,
                                              WorkerControlMessage report, Time now) {
  Rank& rank = ranks_[global_rank];
  std::deque<Seen>& seen = rank.seen;
  if (report.step_seconds < 0) {
    // The newest earlier report at least kMinSpan before this one.
    for (auto it = seen.rbegin(); it != seen.rend(); ++it) {
      if (now - it->at < kMinSpan) continue;
      if (report.step > it->step) {
        report.step_seconds = std::chrono::duration<double>(now - it->at).count() /
                              static_cast<double>(report.step - it->step);
      }
      break;
    }
  }
  seen.push_back({report.step, now});
  // Kept: the newest report at least kMinSpan old, and the ones after it.
  while (seen.size() > 1 && now - seen[1].at >= kMinSpan) seen.pop_front();
  // A flood: the oldest after the one kept to time against goes.
  if (seen.size() > kMaxKept) seen.erase(seen.begin() + 1);
  rank.latest = {global_rank,         local_rank,          report.step,
                 report.step_seconds, report.busy_seconds, now};
  return report;
}

std::vector<RankProgress> RankProgressBook::Latest() const {
  std::vector<RankProgress> out;
  out.reserve(ranks_.size());
  for (const auto& [global_rank, rank] : ranks_) out.push_back(rank.latest);
  return out;
}

}  // namespace mxrun

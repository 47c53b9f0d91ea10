#include "agent/rank_progress_book.h"

namespace mxrun {

WorkerControlMessage RankProgressBook::Record(int local_rank, int global_rank,
                                              WorkerControlMessage report, Time now) {
  auto last = ranks_.find(global_rank);
  if (report.step_seconds < 0 && last != ranks_.end() && report.step > last->second.step) {
    report.step_seconds = std::chrono::duration<double>(now - last->second.at).count() /
                          static_cast<double>(report.step - last->second.step);
  }
  ranks_[global_rank] = {global_rank,         local_rank,          report.step,
                         report.step_seconds, report.busy_seconds, now};
  return report;
}

std::vector<RankProgress> RankProgressBook::Latest() const {
  std::vector<RankProgress> out;
  out.reserve(ranks_.size());
  for (const auto& [rank, progress] : ranks_) out.push_back(progress);
  return out;
}

}  // namespace mxrun

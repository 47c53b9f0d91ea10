#include "rendezvous/master_state/run_progress.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace mxrun {

namespace {

// A day a step, or a report a day old: anything beyond is a broken agent, not a slow rank.
constexpr double kMaxSeconds = 86'400;

bool Plausible(const RankReport& r) {
  return r.step >= 0 && std::isfinite(r.step_seconds) && r.step_seconds <= kMaxSeconds &&
         std::isfinite(r.busy_seconds) && r.busy_seconds <= kMaxSeconds && std::isfinite(r.age_s) &&
         r.age_s >= 0 && r.age_s <= kMaxSeconds && r.local_rank >= 0;
}

}  // namespace

void RunProgress::NewRound(int round, std::map<NodeId, Ranks> owners) {
  round_ = round;
  owners_ = std::move(owners);
  ranks_.clear();
  first_report_at_.reset();
  owner_ranges_.clear();
  owner_ranges_.reserve(owners_.size());
  for (const auto& [node, range] : owners_)
    owner_ranges_.push_back({range.first, range.count, node});
  std::sort(owner_ranges_.begin(), owner_ranges_.end(),
            [](const Owner& a, const Owner& b) { return a.first < b.first; });
  stragglers_.Reset();
}

void RunProgress::MoveNode(NodeId from, NodeId to) {
  auto it = owners_.find(from);
  if (it == owners_.end()) return;
  owners_[to] = it->second;
  owners_.erase(it);
  if (auto r = ranks_.find(from); r != ranks_.end()) {
    ranks_[to] = std::move(r->second);
    ranks_.erase(r);
  }
  for (Owner& owner : owner_ranges_) {
    if (owner.node == from) owner.node = to;
  }
}

void RunProgress::Report(Time now, NodeId node, int round, const std::vector<RankReport>& ranks) {
  if (round != round_ || ranks.empty()) return;
  auto owner = owners_.find(node);
  if (owner == owners_.end()) return;
  const Ranks& range = owner->second;
  std::map<int, Rank>& mine = ranks_[node];
  for (const RankReport& r : ranks) {
    if (r.global_rank < range.first || r.global_rank >= range.first + range.count ||
        !Plausible(r)) {
      continue;
    }
    const Time made =
        now - std::chrono::duration_cast<Time::duration>(std::chrono::duration<double>(r.age_s));
    if (!first_report_at_ || made < *first_report_at_) first_report_at_ = made;
    Rank& kept = mine[r.global_rank];
    const bool news = kept.received == Time{} || r.step != kept.report.step;
    kept.report = r;
    kept.received = now;
    // The same report again (no step since the last heartbeat) is no new evidence.
    if (news) stragglers_.Record(r.global_rank, r.step, r.step_seconds, r.busy_seconds);
  }
}

std::vector<StragglerVerdict> RunProgress::Judge(Time now, std::chrono::milliseconds every) {
  std::vector<StragglerVerdict> verdicts;
  if (stragglers_.rule().steps <= 0 || now < next_judgement_) return verdicts;
  next_judgement_ = now + every;
  for (const StragglerNews& news : stragglers_.Judge()) {
    if (std::optional<NodeId> owner = OwnerOf(news.rank)) verdicts.push_back({*owner, news});
  }
  return verdicts;
}

std::optional<NodeId> RunProgress::OwnerOf(int rank) const {
  auto after = std::upper_bound(owner_ranges_.begin(), owner_ranges_.end(), rank,
                                [](int r, const Owner& o) { return r < o.first; });
  if (after == owner_ranges_.begin()) return std::nullopt;
  const Owner& owner = *std::prev(after);
  if (rank >= owner.first + owner.count) return std::nullopt;
  return owner.node;
}

std::vector<RankSnapshot> RunProgress::RanksOf(NodeId node, Time now) const {
  std::vector<RankSnapshot> out;
  auto it = ranks_.find(node);
  if (it == ranks_.end()) return out;
  for (const auto& [global_rank, rank] : it->second) {
    RankSnapshot s;
    s.global_rank = global_rank;
    s.local_rank = rank.report.local_rank;
    s.step = rank.report.step;
    s.step_seconds = rank.report.step_seconds;
    s.since_report_s =
        rank.report.age_s + std::chrono::duration<double>(now - rank.received).count();
    s.straggler = stragglers_.IsStraggler(global_rank);
    out.push_back(s);
  }
  return out;
}

}  // namespace mxrun

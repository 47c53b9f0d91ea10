#include "agent/workers/console_collapse.h"

#include <algorithm>

namespace mxrun {
namespace {

std::string KeyOf(const ConsoleSource& from, std::string_view line) {
  std::string key = std::to_string(from.console_fd);
  key.push_back(from.is_stderr ? 'e' : 'o');
  key.append(std::to_string(from.node_rank)).push_back(':');
  key.append(line);
  return key;
}

void InsertSorted(std::vector<int>& values, int value) {
  values.insert(std::upper_bound(values.begin(), values.end(), value), value);
}

}  // namespace

ConsoleCollapse::Pending* ConsoleCollapse::Find(uint64_t seq) {
  if (seq < first_seq_ || seq - first_seq_ >= pending_.size()) return nullptr;
  return &pending_[seq - first_seq_];
}

void ConsoleCollapse::Offer(Time now, const ConsoleSource& from, std::string_view line) {
  std::string key = KeyOf(from, line);
  auto latest = latest_.find(key);
  if (latest != latest_.end()) {
    Pending* earlier = Find(latest->second);
    auto mine = last_of_rank_.find(from.global_rank);
    const bool rank_has_later = mine != last_of_rank_.end() && mine->second > latest->second &&
                                Find(mine->second) != nullptr;
    if (earlier != nullptr && now < earlier->due && !rank_has_later &&
        !std::binary_search(earlier->line.ranks.begin(), earlier->line.ranks.end(),
                            from.global_rank)) {
      InsertSorted(earlier->line.ranks, from.global_rank);
      InsertSorted(earlier->line.local_ranks, from.local_rank);
      last_of_rank_[from.global_rank] = latest->second;
      return;
    }
  }
  const uint64_t seq = first_seq_ + pending_.size();
  Pending p;
  p.due = now + window_;
  p.line.console_fd = from.console_fd;
  p.line.is_stderr = from.is_stderr;
  p.line.node_rank = from.node_rank;
  p.line.ranks = {from.global_rank};
  p.line.local_ranks = {from.local_rank};
  p.line.text.assign(line);
  bytes_ += line.size();
  pending_.push_back(std::move(p));
  latest_[std::move(key)] = seq;
  last_of_rank_[from.global_rank] = seq;
}

CollapsedLine ConsoleCollapse::PopFront() {
  const uint64_t seq = first_seq_;
  CollapsedLine line = std::move(pending_.front().line);
  pending_.pop_front();
  ++first_seq_;
  bytes_ -= line.text.size();
  // The indexes forget what went out, so that they hold pending lines only (bounded with them).
  ConsoleSource source;
  source.console_fd = line.console_fd;
  source.is_stderr = line.is_stderr;
  source.node_rank = line.node_rank;
  auto latest = latest_.find(KeyOf(source, line.text));
  if (latest != latest_.end() && latest->second == seq) latest_.erase(latest);
  for (int rank : line.ranks) {
    auto last = last_of_rank_.find(rank);
    if (last != last_of_rank_.end() && last->second == seq) last_of_rank_.erase(last);
  }
  return line;
}

std::vector<CollapsedLine> ConsoleCollapse::TakeDue(Time now) {
  std::vector<CollapsedLine> out;
  while (!pending_.empty() && (pending_.front().due <= now || bytes_ > kMaxPendingBytes)) {
    out.push_back(PopFront());
  }
  return out;
}

std::vector<CollapsedLine> ConsoleCollapse::TakeAll() {
  std::vector<CollapsedLine> out;
  while (!pending_.empty()) out.push_back(PopFront());
  return out;
}

std::optional<ConsoleCollapse::Time> ConsoleCollapse::NextDue() const {
  if (pending_.empty()) return std::nullopt;
  return pending_.front().due;
}

std::string RankList(const std::vector<int>& ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (!out.empty()) out.push_back(',');
    if (j - i >= 2) {
      out += std::to_string(ranks[i]) + "-" + std::to_string(ranks[j]);
      i = j + 1;
    } else {
      out += std::to_string(ranks[i]);
      ++i;
    }
  }
  return out;
}

}  // namespace mxrun

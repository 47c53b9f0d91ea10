#include "agent/workers/log_spec.h"

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxrun {
namespace {

absl::StatusOr<int> ParseStdValue(absl::string_view text, absl::string_view whole) {
  int value = -1;
  if (!absl::SimpleAtoi(text, &value) || value < 0 || value > 3) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", whole,
                     "' is not valid: expected 0 (none), 1 (stdout), 2 (stderr) or 3 (both), "
                     "for every rank ('3') or per local rank ('0:1,1:2')"));
  }
  return value;
}

}  // namespace

int PerRankStd::For(int local_rank) const {
  if (all) return *all;
  auto it = per_rank.find(local_rank);
  return it == per_rank.end() ? kStdNone : it->second;
}

absl::StatusOr<PerRankStd> ParsePerRankStd(absl::string_view text) {
  PerRankStd result;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) {
    result.all = kStdNone;
    return result;
  }
  if (text.find(':') == absl::string_view::npos) {
    absl::StatusOr<int> value = ParseStdValue(text, text);
    if (!value.ok()) return value.status();
    result.all = *value;
    return result;
  }
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    std::pair<absl::string_view, absl::string_view> kv =
        absl::StrSplit(item, absl::MaxSplits(':', 1));
    int rank = -1;
    if (!absl::SimpleAtoi(kv.first, &rank) || rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat("'", text, "' is not valid: '", kv.first,
                                                     "' is not a local rank (an integer >= 0)"));
    }
    absl::StatusOr<int> value = ParseStdValue(kv.second, text);
    if (!value.ok()) return value.status();
    result.per_rank[rank] = *value;
  }
  return result;
}

absl::StatusOr<std::set<int>> ParseLocalRanksFilter(absl::string_view text) {
  std::set<int> ranks;
  text = absl::StripAsciiWhitespace(text);
  if (text.empty()) return ranks;
  for (absl::string_view item : absl::StrSplit(text, ',')) {
    int rank = -1;
    if (!absl::SimpleAtoi(item, &rank) || rank < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "'", text, "' is not valid: expected local ranks (integers >= 0) separated by commas"));
    }
    ranks.insert(rank);
  }
  return ranks;
}

StreamRouting LogSpec::Route(int local_rank, StdMask stream) const {
  const bool redirected = (redirects.For(local_rank) & stream) != 0;
  const bool teed = (tee.For(local_rank) & stream) != 0;
  const bool shown = console_ranks.empty() || console_ranks.count(local_rank) > 0;
  StreamRouting routing;
  routing.to_file = !log_dir.empty() || redirected || teed;
  routing.to_console = shown && (!redirected || teed);
  return routing;
}

bool LogSpec::NeedsFiles() const {
  auto any = [](const PerRankStd& s) {
    if (s.all) return *s.all != kStdNone;
    for (const auto& [rank, value] : s.per_rank) {
      if (value != kStdNone) return true;
    }
    return false;
  };
  return !log_dir.empty() || any(redirects) || any(tee) || !duplicate_stdout_filters.empty() ||
         !duplicate_stderr_filters.empty();
}

}  // namespace mxrun

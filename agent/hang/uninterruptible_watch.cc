#include "agent/hang/uninterruptible_watch.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mxrun {
namespace {

using std::chrono::milliseconds;

constexpr double kMaxSeconds = 1e9;  // about 31 years: on, and never firing

double Seconds(milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

}  // namespace

absl::StatusOr<milliseconds> ParseUninterruptibleTimeout(std::string_view text) {
  const absl::string_view value =
      absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size()));
  if (value.empty()) return milliseconds(0);
  double seconds = 0;
  if (!absl::SimpleAtod(value, &seconds) || std::isnan(seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat(kUninterruptibleTimeoutEnv, "='", value, "' is not a number of seconds"));
  }
  if (seconds <= 0) return milliseconds(0);
  seconds = std::min(seconds, kMaxSeconds);
  return std::max(milliseconds(1),
                  milliseconds(static_cast<int64_t>(std::llround(seconds * 1000))));
}

milliseconds UninterruptiblePollPeriod(milliseconds timeout) {
  return std::clamp(timeout / 10, milliseconds(100), milliseconds(1000));
}

UninterruptibleWatch::Verdicts UninterruptibleWatch::Observe(const std::vector<Observation>& pass,
                                                             Time now) {
  Verdicts verdicts;
  if (!enabled()) return verdicts;
  // Workers missing from the pass have ended; a new pid for a rank is a new process.
  std::map<int, Worker> seen;
  for (const Observation& o : pass) {
    auto it = workers_.find(o.local_rank);
    Worker worker;
    if (it != workers_.end() && it->second.pid == o.pid) {
      worker = it->second;
    } else {
      worker.pid = o.pid;
    }
    if (o.state == '\0') {  // unreadable: the bookkeeping stays as it was
      seen[o.local_rank] = worker;
      continue;
    }
    if (o.state != 'D') {
      worker.since.reset();
      seen[o.local_rank] = worker;
      continue;
    }
    if (!worker.since) {
      worker.since = now;
      verdicts.entered.push_back({o.local_rank, o.pid});
    }
    const milliseconds in_d = std::chrono::duration_cast<milliseconds>(now - *worker.since);
    if (!worker.judged && in_d >= timeout_) {
      worker.judged = true;
      verdicts.stuck.push_back(
          {o.local_rank, o.pid, in_d,
           absl::StrFormat("in D state for %.1f s, at least %s=%g s", Seconds(in_d),
                           kUninterruptibleTimeoutEnv, Seconds(timeout_))});
    }
    seen[o.local_rank] = worker;
  }
  workers_ = std::move(seen);
  std::sort(verdicts.entered.begin(), verdicts.entered.end(),
            [](const Entered& a, const Entered& b) { return a.local_rank < b.local_rank; });
  std::sort(verdicts.stuck.begin(), verdicts.stuck.end(), [](const Stuck& a, const Stuck& b) {
    return a.in_d != b.in_d ? a.in_d > b.in_d : a.local_rank < b.local_rank;
  });
  return verdicts;
}

std::optional<UninterruptibleWatch::Time> UninterruptibleWatch::NextDeadline() const {
  std::optional<Time> next;
  for (const auto& [local_rank, worker] : workers_) {
    if (!worker.since || worker.judged) continue;
    const Time due = *worker.since + timeout_;
    if (!next || due < *next) next = due;
  }
  return next;
}

}  // namespace mxrun

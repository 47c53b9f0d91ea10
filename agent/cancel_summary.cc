#include "agent/cancel_summary.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/signal_names.h"

namespace mxrun {
namespace {

std::string Outcome(const StoppedWorker& w, std::chrono::milliseconds grace) {
  if (w.running) return "still running after SIGKILL (uninterruptible sleep?)";
  if (w.killed_after_grace) {
    return absl::StrCat("SIGKILLed after the ", static_cast<double>(grace.count()) / 1000.0,
                        " s grace");
  }
  if (w.term_signal != 0) return absl::StrCat("ended by ", SignalName(w.term_signal));
  return absl::StrCat("exited ", w.exit_code);
}

}  // namespace

std::string FormatCancellation(int signo, std::chrono::milliseconds grace,
                               std::vector<StoppedWorker> workers, int exit_code,
                               bool stopped_before) {
  std::string line = absl::StrCat("cancelled by ", SignalName(signo));
  if (workers.empty()) {
    return absl::StrCat(line, ", no worker running here; exit code ", exit_code);
  }
  std::sort(workers.begin(), workers.end(), [](const StoppedWorker& a, const StoppedWorker& b) {
    return a.global_rank < b.global_rank;
  });
  // Outcomes in the order of their first rank, each with its ranks as ranges.
  std::vector<std::pair<std::string, std::vector<std::pair<int, int>>>> outcomes;
  for (const StoppedWorker& w : workers) {
    const std::string outcome = Outcome(w, grace);
    auto it = std::find_if(outcomes.begin(), outcomes.end(),
                           [&](const auto& o) { return o.first == outcome; });
    if (it == outcomes.end()) {
      outcomes.push_back({outcome, {{w.global_rank, w.global_rank}}});
    } else if (it->second.back().second + 1 == w.global_rank) {
      it->second.back().second = w.global_rank;
    } else {
      it->second.push_back({w.global_rank, w.global_rank});
    }
  }
  std::vector<std::string> parts;
  for (const auto& [outcome, ranges] : outcomes) {
    std::vector<std::string> texts;
    bool several = false;
    for (const auto& [first, last] : ranges) {
      texts.push_back(first == last ? absl::StrCat(first) : absl::StrCat(first, "-", last));
      several = several || first != last;
    }
    several = several || ranges.size() > 1;
    parts.push_back(
        absl::StrCat(several ? "ranks " : "rank ", absl::StrJoin(texts, ","), " ", outcome));
  }
  return absl::StrCat(line, ": ", absl::StrJoin(parts, ", "),
                      stopped_before ? " (stopped before the signal, as the group re-formed)" : "",
                      "; exit code ", exit_code);
}

}  // namespace mxrun

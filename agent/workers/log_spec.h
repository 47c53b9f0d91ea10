#pragma once
// Where each worker's stdout and stderr go, from torchrun's --redirects, --tee, --log_dir and
// --local_ranks_filter. Pure parsing and decisions; the agent applies them.
//
// A stream of a local rank:
//   - goes to its log file when --log_dir is given or the stream is redirected or teed;
//   - goes to the console unless it is redirected (and not teed) or the rank is filtered out.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"

namespace mxrun {

// torchrun's Std: 0 none, 1 stdout, 2 stderr, 3 both.
enum StdMask : int { kStdNone = 0, kStdOut = 1, kStdErr = 2, kStdAll = 3 };

// "3" (every rank) or "0:1,1:2" (per local rank; ranks not listed get none).
struct PerRankStd {
  std::optional<int> all;       // set for the "3" form
  std::map<int, int> per_rank;  // set for the "0:1,1:2" form
  int For(int local_rank) const;
};

absl::StatusOr<PerRankStd> ParsePerRankStd(absl::string_view text);
// "0,1,2" -> {0,1,2}; empty -> every rank.
absl::StatusOr<std::set<int>> ParseLocalRanksFilter(absl::string_view text);

struct StreamRouting {
  bool to_console = true;
  bool to_file = false;
};

struct LogSpec {
  std::string log_dir;  // empty: no --log_dir
  PerRankStd redirects;
  PerRankStd tee;
  std::set<int> console_ranks;  // empty: every local rank reaches the console
  // torchrun 2.x's --duplicate-std*-filters: matching lines of every rank also go to
  // attempt_<N>/filtered_stdout.log / filtered_stderr.log (empty: no such file).
  std::vector<std::string> duplicate_stdout_filters;
  std::vector<std::string> duplicate_stderr_filters;
  // --log_collapse_window: a console line that several ranks print within it goes out once, with
  // their ranks (console_collapse.h); 0: every line at once, as torchrun.
  std::chrono::milliseconds collapse_window{0};

  // `stream` is kStdOut or kStdErr.
  StreamRouting Route(int local_rank, StdMask stream) const;
  bool NeedsFiles() const;  // some stream of some rank would be written to a file
};

}  // namespace mxrun

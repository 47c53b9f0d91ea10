// The workers' output: where each stream goes (files per attempt, the console, both), what the
// console shows, and torchrun 2.x's line prefix and duplicated lines (agent/workers/log_spec.h,
// agent/workers/output_relay.h).

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "launcher/launch_flags/groups.h"
#include "launcher/launch_flags/value_parsers.h"

namespace mxrun {

absl::StatusOr<std::vector<std::string>> ParseFilterList(absl::string_view text) {
  std::vector<std::string> filters;
  if (text.empty()) return filters;
  // torchrun's comma_separated_list: ",," is a literal comma (read left to right), nothing is
  // stripped. Scanned directly: a placeholder byte would turn any such byte in a filter into ','.
  std::string item;
  for (size_t i = 0; i <= text.size(); ++i) {
    if (i + 1 < text.size() && text[i] == ',' && text[i + 1] == ',') {
      item.push_back(',');
      ++i;
    } else if (i < text.size() && text[i] != ',') {
      item.push_back(text[i]);
    } else {
      if (item.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "'", text,
            "' has an empty filter, which would match every line; accepted: substrings "
            "separated by ',' (',,' for a comma itself), e.g. 'loss,error'"));
      }
      filters.push_back(std::move(item));
      item.clear();
    }
  }
  return filters;
}

LaunchFlagGroup LogFileFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"log_dir", "", false, "folder for per-rank, per-attempt log files", ""},
      {"log_format", "", false, "console output: text, or json (one object per line)", "text"},
      {"redirects", "-r", false, "streams sent to log files only: 0-3, or per local rank 0:1,1:2",
       "0"},
      {"tee", "-t", false, "streams sent to log files and the console: 0-3, or 0:1,1:2", "0"},
      {"local_ranks_filter", "", false, "local ranks shown on the console, e.g. 0,1", ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    o.logs.log_dir = v.Text("log_dir");
    const std::string format = absl::AsciiStrToLower(v.Text("log_format"));
    if (format != "text" && format != "json") {
      return v.Invalid("log_format", "unknown format", "text or json");
    }
    o.json_logs = format == "json";
    for (const char* name : {"redirects", "tee"}) {
      absl::StatusOr<PerRankStd> parsed = ParsePerRankStd(v.Text(name));
      if (!parsed.ok()) return v.From(name, parsed.status());
      (absl::string_view(name) == "tee" ? o.logs.tee : o.logs.redirects) = *parsed;
    }
    absl::StatusOr<std::set<int>> filter = ParseLocalRanksFilter(v.Text("local_ranks_filter"));
    if (!filter.ok()) return v.From("local_ranks_filter", filter.status());
    o.logs.console_ranks = *filter;
    return absl::OkStatus();
  };
  return group;
}

LaunchFlagGroup ConsoleLineFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"log_line_prefix_template", "", false,
       "console line prefix with ${role_name}, ${rank}, ${local_rank}, ${hostname} (also "
       "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE; none: mxrun's \"[n<node> r<rank>] \")",
       "", true, "TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE"},
      {"duplicate_stdout_filters", "", false,
       "stdout lines containing any of these substrings (comma-separated, ',,' for a comma) are "
       "also written to <log folder>/attempt_<N>/filtered_stdout.log",
       ""},
      {"duplicate_stderr_filters", "", false,
       "the same for stderr lines, into attempt_<N>/filtered_stderr.log", ""},
      {"log_collapse_window", "", false,
       "seconds: a console line that several ranks of a node print within them is shown once, "
       "with their ranks ([n0 r1-7] ...); every console line waits this long; 0: off (log files "
       "keep every line either way)",
       "0.5"},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    o.log_line_prefix_template = v.Text("log_line_prefix_template");
    for (const char* name : {"duplicate_stdout_filters", "duplicate_stderr_filters"}) {
      absl::StatusOr<std::vector<std::string>> filters = ParseFilterList(v.Text(name));
      if (!filters.ok()) return v.From(name, filters.status(), "=");
      (absl::string_view(name) == "duplicate_stdout_filters" ? o.logs.duplicate_stdout_filters
                                                             : o.logs.duplicate_stderr_filters) =
          std::move(*filters);
    }
    absl::StatusOr<double> window = v.Seconds("log_collapse_window");
    if (!window.ok()) return window.status();
    if (*window > 10) {
      return v.Invalid("log_collapse_window", "a console line would wait that long",
                       "seconds from 0 (off) to 10");
    }
    o.logs.collapse_window = std::chrono::milliseconds(static_cast<long long>(*window * 1000));
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

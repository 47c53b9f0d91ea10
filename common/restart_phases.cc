#include "common/restart_phases.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace mxrun {
namespace {

std::string Seconds(double s) { return absl::StrFormat("%.3f s", s); }

}  // namespace

double RestartPhases::TotalSeconds() const {
  double total = 0;
  for (double s : {stop_s, reform_s, start_s, first_step_s}) {
    if (s > 0) total += s;
  }
  return total;
}

const std::vector<std::string>& RestartPhaseNames() {
  static const std::vector<std::string> names = {"stop", "reform", "start", "first_step"};
  return names;
}

double PhaseSeconds(const RestartPhases& phases, const std::string& name) {
  if (name == "stop") return phases.stop_s;
  if (name == "reform") return phases.reform_s;
  if (name == "start") return phases.start_s;
  if (name == "first_step") return phases.first_step_s;
  return -1;
}

std::string FormatRestartPhases(const RestartPhases& p, int number) {
  auto phase = [](const char* name, double s) {
    return s < 0 ? absl::StrCat(name, " unknown") : absl::StrCat(name, " ", Seconds(s));
  };
  std::string line = absl::StrCat(p.in_process ? "in-process restart" : "restart");
  if (number > 0) absl::StrAppend(&line, " ", number);
  absl::StrAppend(&line, " (round ", p.round);
  if (p.nodes > 1) absl::StrAppend(&line, ", slowest of ", p.nodes, " nodes");
  if (!p.cause.empty()) absl::StrAppend(&line, "; ", p.cause);
  absl::StrAppend(&line, "): ", phase("stop", p.stop_s), ", ", phase("re-form", p.reform_s), ", ",
                  phase("start", p.start_s), ", ");
  if (p.first_step_s < 0) {
    absl::StrAppend(&line, "first step unknown (no progress reports); ", Seconds(p.TotalSeconds()),
                    " to running");
  } else {
    absl::StrAppend(&line, "first step ", Seconds(p.first_step_s), "; ", Seconds(p.TotalSeconds()),
                    " in all");
  }
  return line;
}

RestartPhases SlowestOf(const std::vector<RestartPhases>& reports) {
  RestartPhases slowest;
  if (reports.empty()) return slowest;
  slowest = reports.front();
  slowest.nodes = 0;
  for (const RestartPhases& r : reports) {
    slowest.nodes += r.nodes;
    slowest.in_process = slowest.in_process && r.in_process;
    slowest.stop_s = std::max(slowest.stop_s, r.stop_s);
    slowest.reform_s = std::max(slowest.reform_s, r.reform_s);
    slowest.start_s = std::max(slowest.start_s, r.start_s);
    slowest.first_step_s = std::max(slowest.first_step_s, r.first_step_s);
  }
  return slowest;
}

std::string CheckRestartPhases(const RestartPhases& p) {
  if (p.round < 0) return absl::StrCat("round ", p.round, " (must be 0 or more)");
  for (const std::string& name : RestartPhaseNames()) {
    const double s = PhaseSeconds(p, name);
    if (!std::isfinite(s) || (s < 0 && s != -1) || s > 86400) {
      return absl::StrCat(name, " seconds ", s, " (must be -1 for unknown, or 0 to 86400)");
    }
  }
  if (p.cause.size() > 512)
    return absl::StrCat("cause of ", p.cause.size(), " bytes (at most 512)");
  return "";
}

}  // namespace mxrun

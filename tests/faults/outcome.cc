#include "tests/faults/outcome.h"

#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"

namespace mxrun::faults {
namespace {

// The text after `marker` in `line`, up to `end` (exclusive; the rest when absent).
std::string Between(const std::string& line, const std::string& marker, const std::string& end) {
  const size_t at = line.find(marker);
  if (at == std::string::npos) return "";
  const size_t from = at + marker.size();
  const size_t to = end.empty() ? std::string::npos : line.find(end, from);
  return line.substr(from, to == std::string::npos ? std::string::npos : to - from);
}

// "restart 3 (round 2; rank 1 failed: exit code 3): stop ..." -> the cause, or "" for another line.
// The cause is what lies between the round's "; " and the "): " that closes it (a cause may hold
// parentheses of its own: "Signal 9 (SIGKILL)").
bool ReadRestartLine(const std::string& line, Outcome& outcome) {
  const bool in_process = absl::StrContains(line, "mxrun: info: in-process restart ");
  if (!in_process && !absl::StrContains(line, "mxrun: info: restart ")) return false;
  const size_t open = line.find(" (round ");
  const size_t close = line.rfind("): stop ");
  if (open == std::string::npos || close == std::string::npos || close < open) return false;
  const std::string inside = line.substr(open + 2, close - open - 2);  // "round R[, ...][; CAUSE]"
  const size_t semicolon = inside.find("; ");
  outcome.causes.push_back(semicolon == std::string::npos ? "" : inside.substr(semicolon + 2));
  ++outcome.restarts;
  outcome.recovery = in_process ? Recovery::kInProcess : Recovery::kGroupRestart;
  return true;
}

const char* RecoveryName(Recovery recovery) {
  switch (recovery) {
    case Recovery::kNone:
      return "none";
    case Recovery::kInProcess:
      return "in-process restart";
    case Recovery::kGroupRestart:
      return "restart of the worker group";
    case Recovery::kJobEnds:
      return "the job ends";
    case Recovery::kRequeued:
      return "requeued by the scheduler";
  }
  return "?";
}

std::string Quoted(const std::vector<std::string>& lines) {
  if (lines.empty()) return "none";
  return absl::StrCat("'", absl::StrJoin(lines, "' | '"), "'");
}

bool AnyContains(const std::vector<std::string>& lines, const std::string& text) {
  for (const std::string& line : lines) {
    if (absl::StrContains(line, text)) return true;
  }
  return false;
}

}  // namespace

Outcome ReadConsole(const std::string& console) {
  Outcome outcome;
  std::istringstream in(console);
  std::string root_cause;
  int restarts_spent = -1;
  bool in_message = false;  // inside the root cause's "message    :" block
  for (std::string line; std::getline(in, line);) {
    if (in_message) {
      in_message = false;
      if (absl::StartsWith(line, "      ")) {  // its first line says what was raised
        absl::StrAppend(&root_cause, " | ", absl::StripLeadingAsciiWhitespace(line));
        continue;
      }
    }
    if (line == "  message    :") {
      in_message = true;
      continue;
    }
    if (ReadRestartLine(line, outcome)) continue;
    if (absl::StrContains(line, " FAILED (restarts spent: ")) {
      const std::string spent = Between(line, " FAILED (restarts spent: ", " of ");
      if (!absl::SimpleAtoi(spent, &restarts_spent)) restarts_spent = -1;
    } else if (absl::StartsWith(line, "  exit       : ")) {
      root_cause = std::string(absl::StripPrefix(line, "  exit       : "));
    } else if (absl::StrContains(line, "left out of the job's rounds")) {
      outcome.left_out.push_back(line);
    } else if (!absl::StartsWith(line, "[")) {  // mxrun's own lines; workers' are "[n0 r1] ..."
      outcome.notices.push_back(line);
    }
  }
  if (restarts_spent >= 0) {  // a failed job: its summary has the last word
    outcome.causes.push_back(root_cause);
    outcome.restarts = std::max(outcome.restarts, restarts_spent);
    outcome.recovery = Recovery::kJobEnds;
  }
  return outcome;
}

std::string Mismatch(const Fault& fault, const Outcome& outcome) {
  const GroundTruth& truth = fault.truth;
  std::vector<std::string> wrong;
  if (outcome.exit_code != truth.exit_code) {
    wrong.push_back(
        absl::StrCat("exit code: expected ", truth.exit_code, ", observed ", outcome.exit_code));
  }
  const std::string cause(truth.cause);
  if (cause.empty() && !outcome.causes.empty()) {
    wrong.push_back(absl::StrCat("cause: expected none (the job undisturbed), observed ",
                                 Quoted(outcome.causes)));
  } else if (!cause.empty() && !AnyContains(outcome.causes, cause)) {
    wrong.push_back(absl::StrCat("cause: expected one containing '", cause, "', observed ",
                                 Quoted(outcome.causes)));
  }
  const std::string notice(truth.notice);
  if (!notice.empty() && !AnyContains(outcome.notices, notice)) {
    wrong.push_back(absl::StrCat("notice: expected a warning containing '", notice, "', observed ",
                                 Quoted(outcome.notices)));
  }
  if (outcome.restarts != truth.restarts) {
    wrong.push_back(
        absl::StrCat("restarts: expected ", truth.restarts, ", observed ", outcome.restarts));
  }
  if (outcome.recovery != truth.recovery) {
    wrong.push_back(absl::StrCat("recovery: expected ", RecoveryName(truth.recovery), ", observed ",
                                 RecoveryName(outcome.recovery)));
  }
  const std::string left_out(truth.left_out);
  if (left_out.empty() != outcome.left_out.empty() ||
      (!left_out.empty() && !AnyContains(outcome.left_out, left_out))) {
    wrong.push_back(absl::StrCat("left out: expected ",
                                 left_out.empty() ? "none" : "'" + left_out + "'", ", observed ",
                                 Quoted(outcome.left_out)));
  }
  if (truth.max_steps_lost != kNotCounted &&
      (outcome.steps_lost == kNotCounted || outcome.steps_lost > truth.max_steps_lost)) {
    wrong.push_back(
        absl::StrCat("steps lost: expected at most ", truth.max_steps_lost, ", observed ",
                     outcome.steps_lost == kNotCounted ? std::string("none counted")
                                                       : std::to_string(outcome.steps_lost)));
  }
  if (truth.state == FinalState::kBitwise && outcome.same_state != true) {
    wrong.push_back(
        absl::StrCat("final state: expected bitwise the fault-free run's, observed ",
                     !outcome.same_state.has_value() ? "not compared" : "a different digest"));
  }
  if (wrong.empty()) return "";
  return absl::StrCat("fault catalogue row ", fault.row, " '", std::string(fault.id), "' (",
                      std::string(fault.name), "; injected: ", std::string(fault.injection),
                      "): ", absl::StrJoin(wrong, "; "));
}

}  // namespace mxrun::faults

#include "launcher/slurm_kill_wait.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process/helper_run.h"
#include "agent/process/process_launcher.h"

namespace mxrun {

std::optional<std::chrono::milliseconds> ParseKillWait(absl::string_view scontrol_config) {
  for (absl::string_view line : absl::StrSplit(scontrol_config, '\n')) {
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "KillWait")) continue;
    line = absl::StripLeadingAsciiWhitespace(line);
    if (!absl::ConsumePrefix(&line, "=")) continue;
    std::vector<absl::string_view> words = absl::StrSplit(line, ' ', absl::SkipWhitespace());
    int seconds = 0;
    if (words.empty() || !absl::SimpleAtoi(words[0], &seconds) || seconds < 0) return std::nullopt;
    if (words.size() > 1 && words[1] != "sec") return std::nullopt;
    return std::chrono::milliseconds(seconds * 1000L);
  }
  return std::nullopt;
}

std::chrono::milliseconds GraceWithinKillWait(std::chrono::milliseconds kill_wait) {
  return kill_wait - std::min<std::chrono::milliseconds>(std::chrono::seconds(3), kill_wait / 3);
}

absl::StatusOr<std::chrono::milliseconds> QuerySlurmKillWait(const EnvMap& env,
                                                             std::chrono::milliseconds timeout) {
  auto path = env.find("PATH");
  absl::StatusOr<std::string> scontrol =
      ResolveExecutable("scontrol", path != env.end() ? path->second : "/usr/bin:/bin");
  if (!scontrol.ok()) return absl::NotFoundError("scontrol is not on PATH");
  HelperOptions options;
  options.timeout = timeout;
  for (const auto& [key, value] : env) options.env.push_back(absl::StrCat(key, "=", value));
  options.capture_stderr = false;  // its complaints are not ours
  options.max_output = 1 << 20;
  absl::StatusOr<HelperRun> run = RunHelper(*scontrol, {"scontrol", "show", "config"}, options);
  if (!run.ok()) return run.status();
  if (run->timed_out) {
    return absl::DeadlineExceededError(absl::StrCat("`scontrol show config` did not answer within ",
                                                    timeout.count() / 1000.0, " s"));
  }
  if (!run->ok()) return absl::UnavailableError("`scontrol show config` failed");
  const std::string& output = run->output;
  std::optional<std::chrono::milliseconds> kill_wait = ParseKillWait(output);
  if (!kill_wait) return absl::UnavailableError("`scontrol show config` printed no KillWait");
  return *kill_wait;
}

}  // namespace mxrun

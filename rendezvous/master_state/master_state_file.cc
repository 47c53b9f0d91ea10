#include "rendezvous/master_state/master_state_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <fstream>
#include <optional>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "common/strings.h"

namespace mxrun {
namespace {

// All of `text` to `fd` (short writes and EINTR retried).
bool WriteText(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

namespace {

using nlohmann::json;

long long Ms(std::chrono::milliseconds d) { return static_cast<long long>(d.count()); }

}  // namespace

std::string PersistedRunsToJson(const std::vector<PersistedRun>& runs) {
  json doc = {{"format", "mxrun-master-state-1"}, {"runs", json::array()}};
  for (const PersistedRun& r : runs) {
    json run = {{"run_id", r.run_id},
                {"min_nodes", r.job.min_nodes},
                {"max_nodes", r.job.max_nodes},
                {"max_restarts", r.job.max_restarts},
                {"join_timeout_ms", Ms(r.job.timeouts.join_timeout)},
                {"last_call_timeout_ms", Ms(r.job.timeouts.last_call_timeout)},
                {"heartbeat_interval_ms", Ms(r.job.timeouts.heartbeat_interval)},
                {"missed_heartbeats", r.job.timeouts.missed_heartbeats},
                {"straggler_factor", r.job.stragglers.factor},
                {"straggler_steps", r.job.stragglers.steps},
                {"exclude_after", r.job.exclusion.after_failures},
                {"exclude_window_ms", Ms(r.job.exclusion.window)},
                {"exclude_backoff_ms", Ms(r.job.exclusion.backoff)},
                {"round", r.round},
                {"restarts_spent", r.restarts_spent},
                {"world_size", r.world_size},
                {"members", json::array()}};
    for (const PersistedMember& m : r.members) {
      run["members"].push_back({{"agent_id", m.desc.agent_id},
                                {"host", m.desc.host},
                                {"address", m.desc.address},
                                {"local_world_size", m.desc.local_world_size},
                                {"requested_rank", m.desc.requested_rank},
                                {"hosts_master", m.desc.hosts_master},
                                {"master_port", m.desc.master_port},
                                {"topology", m.desc.topology},
                                {"hosts_workers_store", m.desc.hosts_workers_store},
                                {"node_rank", m.node_rank},
                                {"succeeded", m.succeeded}});
    }
    doc["runs"].push_back(std::move(run));
  }
  return doc.dump(1);
}

absl::StatusOr<std::vector<PersistedRun>> PersistedRunsFromJson(const std::string& text) {
  std::vector<PersistedRun> runs;
  try {
    json doc = json::parse(text);
    if (doc.at("format") != "mxrun-master-state-1") {
      return absl::InvalidArgumentError("unknown state format (expected mxrun-master-state-1)");
    }
    for (const json& run : doc.at("runs")) {
      PersistedRun r;
      r.run_id = run.at("run_id");
      r.job.min_nodes = run.at("min_nodes");
      r.job.max_nodes = run.at("max_nodes");
      r.job.max_restarts = run.at("max_restarts");
      r.job.timeouts.join_timeout =
          std::chrono::milliseconds(run.at("join_timeout_ms").get<long long>());
      r.job.timeouts.last_call_timeout =
          std::chrono::milliseconds(run.at("last_call_timeout_ms").get<long long>());
      r.job.timeouts.heartbeat_interval =
          std::chrono::milliseconds(run.at("heartbeat_interval_ms").get<long long>());
      r.job.timeouts.missed_heartbeats = run.at("missed_heartbeats");
      // Absent in a state kept before stragglers were judged by the master: not judged.
      r.job.stragglers.factor = run.value("straggler_factor", 1.5);
      r.job.stragglers.steps = run.value("straggler_steps", 0);
      r.job.exclusion.after_failures = run.value("exclude_after", 0);
      r.job.exclusion.window =
          std::chrono::milliseconds(run.value("exclude_window_ms", 3'600'000LL));
      r.job.exclusion.backoff =
          std::chrono::milliseconds(run.value("exclude_backoff_ms", 300'000LL));
      r.round = run.at("round");
      r.restarts_spent = run.at("restarts_spent");
      r.world_size = run.at("world_size");
      for (const json& m : run.at("members")) {
        PersistedMember member;
        member.desc.agent_id = m.at("agent_id");
        member.desc.host = m.at("host");
        member.desc.address = m.at("address");
        member.desc.local_world_size = m.at("local_world_size");
        member.desc.requested_rank = m.at("requested_rank");
        member.desc.hosts_master = m.at("hosts_master");
        member.desc.master_port = m.at("master_port");
        // Files written before topology existed have none: the node's place is then unknown.
        member.desc.topology = m.value("topology", std::string());
        // Files written before the agents hosted the workers' store: rank 0 hosts it.
        member.desc.hosts_workers_store = m.value("hosts_workers_store", false);
        member.node_rank = m.at("node_rank");
        member.succeeded = m.at("succeeded");
        r.members.push_back(std::move(member));
      }
      runs.push_back(std::move(r));
    }
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(e.what());
  }
  return runs;
}

absl::StatusOr<std::unique_ptr<MasterStateFile>> MasterStateFile::Open(const std::string& dir) {
  // The master's own folder: only its user may look in (runs, hosts and addresses of every job).
  if (!MakeDirs(dir, 0700) || chmod(dir.c_str(), 0700) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--state_dir=", dir, ": cannot create the folder (mode 0700): ", ErrnoText(errno)));
  }
  auto file = std::make_unique<MasterStateFile>();
  file->path_ = dir + "/state.json";
  return file;
}

absl::StatusOr<std::vector<PersistedRun>> MasterStateFile::Load() {
  std::optional<std::string> text = ReadWholeFile(path_);
  if (!text) return std::vector<PersistedRun>{};
  absl::StatusOr<std::vector<PersistedRun>> runs = PersistedRunsFromJson(*text);
  if (!runs.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the master's state file ", path_,
                                                   " is damaged (", runs.status().message(),
                                                   "); move it away to start with no state"));
  }
  last_written_ = PersistedRunsToJson(*runs);
  return runs;
}

absl::Status MasterStateFile::Save(const std::vector<PersistedRun>& runs) {
  std::string text = PersistedRunsToJson(runs);
  if (text == last_written_) return absl::OkStatus();
  const std::string temp = path_ + ".tmp";
  {
    // 0600 from its creation on: never readable by others, not even for a moment.
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
      return absl::InternalError(absl::StrCat("cannot write ", temp, ": ", ErrnoText(errno)));
    const bool written = fchmod(fd, 0600) == 0 && WriteText(fd, text);
    ::close(fd);
    if (!written) return absl::InternalError(absl::StrCat("cannot write ", temp));
  }
  if (const int err = ReplaceFileDurably(temp, path_); err != 0) {
    return absl::InternalError(absl::StrCat("cannot replace ", path_, ": ", ErrnoText(err)));
  }
  last_written_ = std::move(text);
  return absl::OkStatus();
}

}  // namespace mxrun

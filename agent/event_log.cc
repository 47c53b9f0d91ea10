#include "agent/event_log.h"

#include <limits.h>
#include <netdb.h>
#include <sys/socket.h>

#include <cstdio>

#include "agent/workers/json_quote.h"
#include "agent/workers/output_relay.h"

namespace mxrun {
namespace {

// Python's json.dumps layout: ", " between items, ": " after keys.
class JsonObject {
 public:
  void Add(const std::string& key, const std::string& raw_value) {
    text_ += text_.empty() ? "{" : ", ";
    text_ += JsonQuote(key) + ": " + raw_value;
  }
  std::string Close() const { return text_.empty() ? "{}" : text_ + "}"; }

 private:
  std::string text_;
};

template <typename T>
std::string IntOrNull(const std::optional<T>& value) {
  return value ? std::to_string(*value) : "null";
}

std::string StringOrNull(const std::optional<std::string>& value) {
  return value ? JsonQuote(*value) : "null";
}

// As torchelastic writes them: a one-element list ((worker.local_rank,) in Python).
template <typename T>
std::string OneElementList(const std::optional<T>& value) {
  return "[" + IntOrNull(value) + "]";
}

std::string FullyQualifiedHostName() {
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "localhost";
  addrinfo hints{};
  hints.ai_flags = AI_CANONNAME;
  hints.ai_family = AF_UNSPEC;
  addrinfo* info = nullptr;
  std::string fqdn = name;
  if (getaddrinfo(name, nullptr, &hints, &info) == 0 && info != nullptr) {
    if (info->ai_canonname != nullptr) fqdn = info->ai_canonname;
    freeaddrinfo(info);
  }
  return fqdn;
}

}  // namespace

std::string SerializeEvent(const ElasticEvent& event) {
  JsonObject inner;
  inner.Add("group_world_size", IntOrNull(event.group_world_size));
  inner.Add("entry_point", JsonQuote(event.entry_point));
  if (event.from_worker) {
    inner.Add("local_rank", OneElementList(event.local_rank));
    inner.Add("role_rank", OneElementList(event.role_rank));
    inner.Add("role_world_size", OneElementList(event.role_world_size));
    inner.Add("exit_code", OneElementList(event.exit_code));
    inner.Add("worker_pid", OneElementList(event.worker_pid));
  }
  JsonObject metadata;
  metadata.Add("run_id", JsonQuote(event.run_id));
  metadata.Add("global_rank", IntOrNull(event.global_rank));
  metadata.Add("group_rank", IntOrNull(event.group_rank));
  metadata.Add("worker_id",
               event.worker_pid ? JsonQuote(std::to_string(*event.worker_pid)) : "null");
  metadata.Add("role", JsonQuote(event.role));
  metadata.Add("hostname", JsonQuote(event.hostname));
  metadata.Add("state", JsonQuote(event.state));
  metadata.Add("total_run_time", std::to_string(event.total_run_time));
  metadata.Add("rdzv_backend", JsonQuote(event.rdzv_backend));
  metadata.Add("raw_error", StringOrNull(event.raw_error));
  metadata.Add("metadata", JsonQuote(inner.Close()));
  metadata.Add("agent_restarts", std::to_string(event.agent_restarts));
  if (event.duration_ms) {
    // A Python float as json.dumps writes it (to the microsecond): "12.5", "0.0".
    char text[64];
    std::snprintf(text, sizeof text, "%.3f", *event.duration_ms);
    std::string number = text;
    while (number.back() == '0' && number[number.size() - 2] != '.') number.pop_back();
    metadata.Add("duration_ms", number);
  } else {
    metadata.Add("duration_ms", "null");
  }
  JsonObject record;
  record.Add("name", JsonQuote("torchelastic.worker.status." + event.state));
  record.Add("source", JsonQuote(event.from_worker ? "WORKER" : "AGENT"));
  record.Add("timestamp", "0");  // torchelastic never sets it
  record.Add("metadata", metadata.Close());
  return record.Close();
}

bool IsEventLogHandler(const std::string& name) { return name == "null" || name == "console"; }

ElasticEventLog::ElasticEventLog(EventLogConfig config)
    : config_(std::move(config)), enabled_(config_.handler == "console") {
  if (enabled_) hostname_ = FullyQualifiedHostName();  // a name lookup: only when recording
}

ElasticEvent ElasticEventLog::Base(const std::string& state) const {
  ElasticEvent event;
  event.state = state;
  event.run_id = config_.run_id;
  event.role = config_.role;
  event.hostname = hostname_;
  event.rdzv_backend = config_.rdzv_backend;
  event.entry_point = config_.entry_point;
  event.total_run_time = static_cast<long>(
      std::chrono::duration_cast<std::chrono::seconds>(std::chrono::steady_clock::now() - started_)
          .count());
  if (round_) {
    event.group_rank = round_->node_rank;
    event.group_world_size = round_->num_nodes;
    event.agent_restarts = round_->restart_count;
  }
  return event;
}

void ElasticEventLog::Agent(const std::string& state, std::optional<double> duration_ms,
                            std::optional<std::string> raw_error) const {
  if (!enabled_) return;
  ElasticEvent event = Base(state);
  event.duration_ms = duration_ms;
  event.raw_error = std::move(raw_error);
  Write(event);
}

void ElasticEventLog::Worker(const std::string& state, int local_rank, std::optional<pid_t> pid,
                             std::optional<int> exit_code,
                             std::optional<std::string> raw_error) const {
  if (!enabled_) return;
  ElasticEvent event = Base(state);
  event.from_worker = true;
  event.local_rank = local_rank;
  if (round_) {
    event.global_rank = round_->global_rank_base + local_rank;
    event.role_rank = event.global_rank;  // one role per job
    event.role_world_size = round_->world_size;
  }
  event.worker_pid = pid;
  event.exit_code = exit_code;
  event.raw_error = std::move(raw_error);
  Write(event);
}

void ElasticEventLog::Write(const ElasticEvent& event) const {
  WriteAll(config_.console_fd, SerializeEvent(event) + "\n");
}

}  // namespace mxrun

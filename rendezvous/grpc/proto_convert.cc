#include "rendezvous/grpc/proto_convert.h"

#include <algorithm>
#include <cmath>

namespace mxrun {
namespace {

std::chrono::milliseconds Millis(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return std::chrono::milliseconds(-1);
  if (seconds > 1e7) seconds = 1e7;
  return std::chrono::milliseconds(static_cast<long>(seconds * 1000.0));
}

double Seconds(std::chrono::milliseconds ms) { return static_cast<double>(ms.count()) / 1000.0; }

}  // namespace

v1::WorkerFailure ToProto(const WorkerFailure& f) {
  v1::WorkerFailure p;
  p.set_time_unix_s(std::chrono::duration<double>(f.time.time_since_epoch()).count());
  p.set_host(f.host);
  p.set_node_rank(f.node_rank);
  p.set_global_rank(f.global_rank);
  p.set_local_rank(f.local_rank);
  p.set_pid(f.pid);
  p.set_attempt(f.attempt);
  p.set_exit_code(f.exit_code);
  p.set_term_signal(f.term_signal);
  p.set_error_file(f.error_file);
  p.set_error_file_contents(f.error_file_contents.substr(0, 64 * 1024));
  p.set_message(f.message.substr(0, 64 * 1024));
  p.set_traceback(f.traceback.substr(0, 64 * 1024));
  for (const std::string& line : f.last_lines) p.add_last_lines(line.substr(0, 4096));
  p.set_hang_rule(f.hang.rule.substr(0, 64));
  p.set_hang_detail(f.hang.detail.substr(0, 4096));
  p.set_hang_diagnostics_dir(f.hang.diagnostics_dir.substr(0, 4096));
  for (size_t i = 0; i < f.hang.diagnostics.size() && i < 64; ++i) {
    p.add_hang_diagnostics(f.hang.diagnostics[i].substr(0, 4096));
  }
  p.set_collective_sign(f.collective_sign.substr(0, 256));
  p.set_oom_kill(f.oom_kill.substr(0, 256));
  p.set_flight_dir(f.flight_dir.substr(0, 4096));
  for (size_t i = 0; i < f.flight.size() && i < 64; ++i) p.add_flight(f.flight[i].substr(0, 4096));
  return p;
}

WorkerFailure FromProto(const v1::WorkerFailure& p) {
  WorkerFailure f;
  f.time = std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::duration<double>(p.time_unix_s())));
  f.host = p.host();
  f.node_rank = p.node_rank();
  f.global_rank = p.global_rank();
  f.local_rank = p.local_rank();
  f.pid = p.pid();
  f.attempt = p.attempt();
  f.exit_code = p.exit_code();
  f.term_signal = p.term_signal();
  f.error_file = p.error_file();
  f.error_file_contents = p.error_file_contents();
  f.message = p.message();
  f.traceback = p.traceback();
  f.last_lines.assign(p.last_lines().begin(), p.last_lines().end());
  f.hang.rule = p.hang_rule();
  f.hang.detail = p.hang_detail();
  f.hang.diagnostics_dir = p.hang_diagnostics_dir();
  f.hang.diagnostics.assign(p.hang_diagnostics().begin(), p.hang_diagnostics().end());
  f.collective_sign = p.collective_sign();
  f.oom_kill = p.oom_kill().substr(0, 256);
  f.flight_dir = p.flight_dir();
  f.flight.assign(p.flight().begin(), p.flight().end());
  return f;
}

v1::RoundAssignment ToProto(const RoundAssignment& r) {
  v1::RoundAssignment p;
  p.set_run_id(r.run_id);
  p.set_round(r.round);
  p.set_node_rank(r.node_rank);
  p.set_num_nodes(r.num_nodes);
  p.set_local_world_size(r.local_world_size);
  p.set_global_rank_base(r.global_rank_base);
  p.set_world_size(r.world_size);
  p.set_master_addr(r.master_addr);
  p.set_master_port(r.master_port);
  p.set_restart_count(r.restart_count);
  p.set_max_restarts(r.max_restarts);
  p.set_use_agent_store(r.use_agent_store);
  return p;
}

RoundAssignment FromProto(const v1::RoundAssignment& p) {
  RoundAssignment r;
  r.run_id = p.run_id();
  r.round = p.round();
  r.node_rank = p.node_rank();
  r.num_nodes = p.num_nodes();
  r.local_world_size = p.local_world_size();
  r.global_rank_base = p.global_rank_base();
  r.world_size = p.world_size();
  r.master_addr = p.master_addr();
  r.master_port = p.master_port();
  r.restart_count = p.restart_count();
  r.max_restarts = p.max_restarts();
  r.use_agent_store = p.use_agent_store();
  return r;
}

v1::NodeInfo ToProto(const NodeDesc& d) {
  v1::NodeInfo p;
  p.set_host(d.host);
  p.set_address(d.address);
  p.set_local_world_size(d.local_world_size);
  p.set_node_rank(d.requested_rank);
  p.set_hosts_master(d.hosts_master);
  p.set_master_port(d.master_port);
  p.set_agent_id(d.agent_id);
  p.set_unhealthy(d.unhealthy);
  p.set_topology(d.topology);
  p.set_hosts_workers_store(d.hosts_workers_store);
  return p;
}

NodeDesc FromProto(const v1::NodeInfo& p) {
  NodeDesc d;
  d.host = p.host();
  d.address = p.address();
  d.local_world_size = p.local_world_size();
  d.requested_rank = p.node_rank();
  d.hosts_master = p.hosts_master();
  d.master_port = p.master_port();
  d.agent_id = p.agent_id();
  d.unhealthy = p.unhealthy();
  d.topology = p.topology();
  d.hosts_workers_store = p.hosts_workers_store();
  return d;
}

v1::JobSpec ToProto(const JobDesc& j) {
  v1::JobSpec p;
  p.set_min_nodes(j.min_nodes);
  p.set_max_nodes(j.max_nodes);
  p.set_max_restarts(j.max_restarts);
  p.set_join_timeout_s(Seconds(j.timeouts.join_timeout));
  p.set_last_call_timeout_s(Seconds(j.timeouts.last_call_timeout));
  p.set_heartbeat_interval_s(Seconds(j.timeouts.heartbeat_interval));
  p.set_missed_heartbeats(j.timeouts.missed_heartbeats);
  p.set_straggler_factor(j.stragglers.factor);
  p.set_straggler_steps(j.stragglers.steps);
  p.set_exclude_after_failures(j.exclusion.after_failures);
  p.set_exclude_window_s(Seconds(j.exclusion.window));
  p.set_exclude_backoff_s(Seconds(j.exclusion.backoff));
  return p;
}

JobDesc FromProto(const v1::JobSpec& p) {
  JobDesc j;
  j.min_nodes = p.min_nodes();
  j.max_nodes = p.max_nodes();
  j.max_restarts = p.max_restarts();
  j.timeouts.join_timeout = Millis(p.join_timeout_s());
  j.timeouts.last_call_timeout = Millis(p.last_call_timeout_s());
  j.timeouts.heartbeat_interval = Millis(p.heartbeat_interval_s());
  j.timeouts.missed_heartbeats = p.missed_heartbeats();
  j.stragglers.factor = p.straggler_factor();
  j.stragglers.steps = p.straggler_steps();
  j.exclusion.after_failures = p.exclude_after_failures();
  j.exclusion.window = Millis(p.exclude_window_s());
  j.exclusion.backoff = Millis(p.exclude_backoff_s());
  return j;
}

v1::MasterMessage ToProto(const ToAgent& m) {
  v1::MasterMessage p;
  switch (m.kind) {
    case ToAgent::Kind::kWaiting:
      p.mutable_waiting()->set_nodes_waiting(m.nodes_waiting);
      p.mutable_waiting()->set_excluded(m.excluded);
      break;
    case ToAgent::Kind::kRound:
      *p.mutable_round() = ToProto(m.round);
      break;
    case ToAgent::Kind::kStop: {
      v1::StopWorkers* stop = p.mutable_stop();
      stop->set_reason(m.reason);
      stop->set_restart(m.restart);
      stop->set_restarts_spent(m.restarts_spent);
      stop->set_max_restarts(m.max_restarts);
      break;
    }
    case ToAgent::Kind::kPeerFinished: {
      v1::PeerFinished* peer = p.mutable_peer_finished();
      peer->set_host(m.peer_host);
      peer->set_node_rank(m.peer_node_rank);
      peer->set_nodes_finished(m.nodes_finished);
      peer->set_nodes(m.num_nodes);
      break;
    }
    case ToAgent::Kind::kFinished: {
      v1::JobFinished* done = p.mutable_finished();
      done->set_success(m.success);
      if (m.first_failure) *done->mutable_first_failure() = ToProto(*m.first_failure);
      done->set_restarts_spent(m.restarts_spent);
      done->set_max_restarts(m.max_restarts);
      done->set_same_failure(m.same_failure);
      done->set_failure_signature(m.failure_signature);
      for (const std::string& line : m.excluded_nodes) done->add_excluded_nodes(line);
      break;
    }
    case ToAgent::Kind::kRefused:
      p.mutable_refused()->set_code(static_cast<int>(m.refusal.code()));
      p.mutable_refused()->set_message(std::string(m.refusal.message()));
      break;
    case ToAgent::Kind::kFlightRequest:
      p.mutable_flight_request()->set_round(m.flight.round);
      p.mutable_flight_request()->set_requester(m.flight.host);
      break;
    case ToAgent::Kind::kFlightRecords:
      *p.mutable_flight_records() = ToProto(m.flight, /*request=*/false);
      break;
    case ToAgent::Kind::kStraggler: {
      v1::StragglerNotice* notice = p.mutable_straggler();
      notice->set_round(m.straggler_round);
      notice->set_global_rank(m.straggler.rank);
      notice->set_straggling(m.straggler.straggling);
      notice->set_step_seconds(m.straggler.step_seconds);
      notice->set_others_median_s(m.straggler.others_median);
      notice->set_steps(m.straggler.steps);
      notice->set_busy(m.straggler.busy);
      break;
    }
  }
  return p;
}

v1::FlightRecords ToProto(const FlightRecordSet& set, bool request) {
  v1::FlightRecords p;
  p.set_round(set.round);
  p.set_host(set.host);
  p.set_node_rank(set.node_rank);
  p.set_request(request);
  for (const RankFlightRecord& rank : set.ranks) {
    v1::RankFlightRecord* r = p.add_ranks();
    r->set_global_rank(rank.global_rank);
    r->set_json(rank.json);
    r->set_error(rank.error);
  }
  return p;
}

FlightRecordSet FromProto(const v1::FlightRecords& p) {
  FlightRecordSet set;
  set.round = p.round();
  set.host = p.host();
  set.node_rank = p.node_rank();
  for (const v1::RankFlightRecord& r : p.ranks()) {
    set.ranks.push_back({r.global_rank(), r.json(), r.error()});
  }
  return set;
}

absl::Status ValidateFlightRecords(const v1::FlightRecords& p) {
  constexpr int kMaxRanks = 1 << 16;
  constexpr size_t kMaxError = 4096;
  if (p.round() < 0) return absl::InvalidArgumentError("flight records: round below 0");
  if (p.ranks_size() > kMaxRanks) {
    return absl::InvalidArgumentError(
        absl::StrCat("flight records: ", p.ranks_size(), " ranks, at most ", kMaxRanks));
  }
  for (const v1::RankFlightRecord& r : p.ranks()) {
    if (r.global_rank() < 0 || r.global_rank() >= (1 << 24)) {
      return absl::InvalidArgumentError(
          absl::StrCat("flight records: global rank ", r.global_rank(), " out of range"));
    }
    if (r.error().size() > kMaxError) {
      return absl::InvalidArgumentError("flight records: an error text over 4096 bytes");
    }
  }
  return absl::OkStatus();
}

StragglerNews FromProto(const v1::StragglerNotice& notice) {
  StragglerNews news;
  news.rank = notice.global_rank();
  news.straggling = notice.straggling();
  news.step_seconds = notice.step_seconds();
  news.others_median = notice.others_median_s();
  news.steps = notice.steps();
  news.busy = notice.busy();
  return news;
}

v1::RankProgress ToProto(const RankProgress& progress, std::chrono::steady_clock::time_point now) {
  v1::RankProgress p;
  p.set_global_rank(progress.global_rank);
  p.set_local_rank(progress.local_rank);
  p.set_step(progress.step);
  p.set_step_seconds(progress.step_seconds);
  p.set_busy_seconds(progress.busy_seconds);
  p.set_report_age_s(std::max(0.0, std::chrono::duration<double>(now - progress.at).count()));
  return p;
}

std::vector<RankReport> FromProto(const v1::Heartbeat& heartbeat) {
  std::vector<RankReport> ranks;
  ranks.reserve(static_cast<size_t>(heartbeat.ranks_size()));
  for (const v1::RankProgress& p : heartbeat.ranks()) {
    ranks.push_back({p.global_rank(), p.local_rank(), p.step(), p.step_seconds(), p.report_age_s(),
                     p.busy_seconds() > 0 ? p.busy_seconds() : -1});
  }
  return ranks;
}

v1::RestartPhases ToProto(const RestartPhases& p) {
  v1::RestartPhases out;
  out.set_round(p.round);
  out.set_cause(p.cause);
  out.set_in_process(p.in_process);
  out.set_stop_s(p.stop_s);
  out.set_reform_s(p.reform_s);
  out.set_start_s(p.start_s);
  out.set_first_step_s(p.first_step_s);
  out.set_nodes(p.nodes);
  return out;
}

RestartPhases FromProto(const v1::RestartPhases& p) {
  RestartPhases out;
  out.round = p.round();
  out.cause = p.cause();
  out.in_process = p.in_process();
  out.stop_s = p.stop_s();
  out.reform_s = p.reform_s();
  out.start_s = p.start_s();
  out.first_step_s = p.first_step_s();
  out.nodes = p.nodes() > 0 ? p.nodes() : 1;
  return out;
}

}  // namespace mxrun

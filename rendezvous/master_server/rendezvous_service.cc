#include "rendezvous/master_server/rendezvous_service.h"

#include <cstdio>
#include <deque>
#include <functional>

#include "rendezvous/grpc/grpc_status.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

// One agent's Session stream. Writes are queued (one in flight at a time, as gRPC requires) and
// started outside the queue's lock, because reactions may run inline.
class RendezvousService::SessionReactor final
    : public grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage> {
 public:
  SessionReactor(RendezvousService* service, NodeId node) : service_(service), node_(node) {}

  void Begin() { StartRead(&incoming_); }

  void Refuse(const grpc::Status& status) { Finish(status); }

  // Queues `message`; with `close_after`, the stream is finished once the queue has drained.
  void Send(v1::MasterMessage message, bool close_after) {
    const v1::MasterMessage* start = nullptr;
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      if (finishing_) return;
      queue_.push_back(std::move(message));
      close_after_ = close_after_ || close_after;
      if (!writing_) {
        writing_ = true;
        start = &queue_.front();
      }
    }
    if (start != nullptr) StartWrite(start);
  }

  void Close() {
    bool finish_now = false;
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      close_after_ = true;
      if (!writing_ && !finishing_) finish_now = finishing_ = true;
    }
    if (finish_now) Finish(grpc::Status::OK);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {  // the agent closed its side or the stream broke: it is gone
      service_->OnSessionEnded(node_, "stream closed");
      Close();
      return;
    }
    service_->OnMessage(node_, incoming_);
    if (incoming_.has_heartbeat()) {
      // The agent's proof that this master still hears it (a partition breaks no stream).
      v1::MasterMessage alive;
      alive.mutable_alive();
      Send(std::move(alive), /*close_after=*/false);
    }
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      if (finishing_ || close_after_) return;
    }
    StartRead(&incoming_);
  }

  void OnWriteDone(bool ok) override {
    const v1::MasterMessage* next = nullptr;
    bool finish_now = false;
    {
      std::lock_guard<std::mutex> lock(write_mutex_);
      queue_.pop_front();
      if (ok && !queue_.empty()) {
        next = &queue_.front();
      } else {
        writing_ = false;
        if ((close_after_ || !ok) && !finishing_) finish_now = finishing_ = true;
      }
    }
    if (next != nullptr) StartWrite(next);
    if (finish_now) Finish(grpc::Status::OK);
  }

  void OnDone() override {
    service_->OnSessionEnded(node_, "stream closed");
    service_->Unregister(node_);
    delete this;
  }

 private:
  RendezvousService* service_;
  const NodeId node_;
  v1::AgentMessage incoming_;
  std::mutex write_mutex_;
  std::deque<v1::MasterMessage> queue_;
  bool writing_ = false;
  bool close_after_ = false;
  bool finishing_ = false;
};

RendezvousService::RendezvousService(std::string token, std::chrono::milliseconds tick, Clock clock)
    : token_(std::move(token)), tick_(tick), clock_(std::move(clock)) {
  ticker_ = std::thread([this] { TickLoop(); });
}

RendezvousService::~RendezvousService() { Shutdown(); }

void RendezvousService::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutting_down_) return;
    shutting_down_ = true;
  }
  ticker_wake_.notify_all();
  if (ticker_.joinable()) ticker_.join();
  // Closed under mutex_: a reactor frees itself in OnDone only after Unregister, which takes
  // mutex_, so none is freed while this runs. Close() never calls back here synchronously (gRPC
  // runs a bidi reactor's OnDone on another thread, never inline in Finish).
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& [node, session] : sessions_) session->Close();
}

grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage>* RendezvousService::Session(
    grpc::CallbackServerContext* context) {
  std::lock_guard<std::mutex> lock(mutex_);
  const NodeId node = next_node_++;
  auto* session = new SessionReactor(this, node);
  if (absl::Status auth = CheckToken(token_, PresentedToken(*context)); !auth.ok()) {
    session->Refuse(ToGrpcStatus(auth));
    return session;
  }
  if (shutting_down_ || deposed_) {
    session->Refuse(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                 deposed_ ? "this master no longer leads (another one took over)"
                                          : "the master is shutting down"));
    return session;
  }
  sessions_[node] = session;
  session->Begin();
  return session;
}

void RendezvousService::OnMessage(NodeId node, const v1::AgentMessage& message) {
  std::lock_guard<std::mutex> lock(mutex_);
  const MasterState::Time now = clock_();
  switch (message.kind_case()) {
    case v1::AgentMessage::kJoin: {
      const v1::Join& join = message.join();
      if (join.protocol_version() != 1) {
        ToAgent refusal;
        refusal.node = node;
        refusal.kind = ToAgent::Kind::kRefused;
        refusal.refusal = absl::FailedPreconditionError(
            "protocol version mismatch: this master speaks mxrun.v1 protocol 1");
        refusal.close_session = true;
        Deliver({refusal});
        return;
      }
      if (!only_run_id_.empty() && join.run_id() != only_run_id_) {
        ToAgent refusal;
        refusal.node = node;
        refusal.kind = ToAgent::Kind::kRefused;
        refusal.refusal =
            absl::FailedPreconditionError(ForeignRunRefusal(only_run_id_, join.run_id()));
        refusal.close_session = true;
        Deliver({refusal});
        return;
      }
      if (join.resume()) {
        Deliver(
            state_.Resume(now, node, join.run_id(), FromProto(join.node()), join.resume_round()));
      } else {
        Deliver(
            state_.Join(now, node, join.run_id(), FromProto(join.node()), FromProto(join.job())));
      }
      return;
    }
    case v1::AgentMessage::kHeartbeat:
      Deliver(
          state_.Heartbeat(now, node, message.heartbeat().round(), FromProto(message.heartbeat())));
      return;
    case v1::AgentMessage::kFailure:
      Deliver(state_.ReportFailure(now, node, message.failure().round(),
                                   FromProto(message.failure().failure())));
      return;
    case v1::AgentMessage::kSucceeded:
      Deliver(state_.ReportSucceeded(now, node, message.succeeded().round()));
      return;
    case v1::AgentMessage::kLeave:
      Deliver(state_.NodeGone(now, node, "left"));
      return;
    case v1::AgentMessage::kFlightRecords:
      if (absl::Status valid = ValidateFlightRecords(message.flight_records()); !valid.ok()) {
        std::fprintf(stderr, "mxrun-master: ignored from node session %llu: %s\n",
                     static_cast<unsigned long long>(node), std::string(valid.message()).c_str());
        return;
      }
      Deliver(state_.OfferFlightRecords(now, node, FromProto(message.flight_records()),
                                        message.flight_records().request()));
      return;
    case v1::AgentMessage::kRestartPhases:
      Deliver(state_.ReportRestartPhases(now, node, FromProto(message.restart_phases())));
      return;
    case v1::AgentMessage::KIND_NOT_SET:
      return;
  }
}

void RendezvousService::OnSessionEnded(NodeId node, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!state_.HasNode(node)) return;
  Deliver(state_.NodeGone(clock_(), node, why));
}

void RendezvousService::Unregister(NodeId node) {
  std::lock_guard<std::mutex> lock(mutex_);
  sessions_.erase(node);
}

void RendezvousService::Deliver(const MasterState::Out& out) {
  if (deposed_) return;
  held_.insert(held_.end(), out.begin(), out.end());
  if (!SaveState(clock_())) return;
  std::vector<ToAgent> deliver;
  deliver.swap(held_);
  for (const ToAgent& message : deliver) {
    if (!message.log_line.empty()) {
      // The master's own line (a straggler named, a node left out; the agent logs its own).
      std::fprintf(stderr, "mxrun-master: %s\n", message.log_line.c_str());
    }
    Send(message);
  }
}

bool RendezvousService::SaveState(MasterState::Time now) {
  // The kept state is written before the agents hear of it: a master killed right after telling
  // them a round finds that round again when it restarts. Written only when it changed (not for
  // every heartbeat or tick); a failed write stays pending and is tried again (at most twice a
  // second, so that an unreachable etcd does not hold the lock for every tick).
  save_pending_ = state_.TakeChanged() || save_pending_;
  if (!store_ || !save_pending_) return true;
  if (state_write_failed_ && now - last_write_attempt_ < std::chrono::milliseconds(500)) {
    return !store_->fenced();
  }
  last_write_attempt_ = now;
  absl::Status saved = store_->Save(state_.Persisted());
  if (absl::IsFailedPrecondition(saved)) {
    // Another master leads: nothing more from this one, whatever it had decided.
    std::fprintf(stderr, "mxrun-master: %s; this master steps down\n",
                 std::string(saved.message()).c_str());
    deposed_ = true;
    held_.clear();
    for (auto& [node, session] : sessions_) session->Close();
    if (on_deposed_) on_deposed_();
    return false;
  }
  if (!saved.ok() && !state_write_failed_) {
    std::fprintf(stderr, "mxrun-master: warning: cannot keep state in %s: %s%s\n",
                 store_->Where().c_str(), std::string(saved.message()).c_str(),
                 store_->fenced() ? " (decisions wait until it can be written)" : "");
  }
  if (saved.ok() && state_write_failed_) {
    std::fprintf(stderr, "mxrun-master: state kept in %s again\n", store_->Where().c_str());
  }
  state_write_failed_ = !saved.ok();
  save_pending_ = !saved.ok();
  return saved.ok() || !store_->fenced();
}

void RendezvousService::Send(const ToAgent& message) {
  auto it = sessions_.find(message.node);
  if (it == sessions_.end()) return;  // e.g. a restored member whose agent is not back yet
  v1::MasterMessage proto = ToProto(message);
  // Agents hold a master to its Alive answers only once it says it gives them (an older master
  // does not: its agents must not take its quiet for a partition).
  if (proto.has_waiting()) proto.mutable_waiting()->set_answers_heartbeats(true);
  if (proto.has_round()) proto.mutable_round()->set_answers_heartbeats(true);
  if (store_) {
    if (proto.has_waiting()) proto.mutable_waiting()->set_durable(true);
    if (proto.has_round()) proto.mutable_round()->set_durable(true);
  }
  it->second->Send(std::move(proto), message.close_session);
}

absl::Status RendezvousService::KeepStateIn(std::unique_ptr<MasterStateStore> store,
                                            std::function<void()> on_deposed) {
  absl::StatusOr<std::vector<PersistedRun>> runs = store->Load();
  if (!runs.ok()) return runs.status();
  std::lock_guard<std::mutex> lock(mutex_);
  state_.Restore(clock_(), *runs);
  store_ = std::move(store);
  on_deposed_ = std::move(on_deposed);
  return absl::OkStatus();
}

void RendezvousService::ForgetAgent(const std::string& agent_id, const std::string& why) {
  std::lock_guard<std::mutex> lock(mutex_);
  Deliver(state_.AgentGone(clock_(), agent_id, why));
}

void RendezvousService::TickLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!shutting_down_) {
    ticker_wake_.wait_for(lock, tick_);
    if (shutting_down_) break;
    Deliver(state_.Tick(clock_()));
  }
}

std::vector<RunSnapshot> RendezvousService::Snapshot(const std::string& run_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  return state_.Snapshot(clock_(), run_id);
}

grpc::ServerUnaryReactor* RendezvousService::GetStatus(grpc::CallbackServerContext* context,
                                                       const v1::StatusRequest* request,
                                                       v1::StatusReply* reply) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  if (absl::Status auth = CheckToken(token_, PresentedToken(*context)); !auth.ok()) {
    reactor->Finish(ToGrpcStatus(auth));
    return reactor;
  }
  if (!request->run_id().empty()) {
    if (absl::Status valid = ValidateRunId(request->run_id()); !valid.ok()) {
      reactor->Finish(ToGrpcStatus(valid));
      return reactor;
    }
  }
  const std::vector<RunSnapshot> runs = Snapshot(request->run_id());
  reply->set_serves_only_run_id(only_run_id_);
  for (const RunSnapshot& run : runs) {
    v1::RunStatus* r = reply->add_runs();
    r->set_run_id(run.run_id);
    r->set_phase(run.phase);
    r->set_round(run.round);
    r->set_restarts_spent(run.restarts_spent);
    r->set_max_restarts(run.job.max_restarts);
    r->set_min_nodes(run.job.min_nodes);
    r->set_max_nodes(run.job.max_nodes);
    r->set_world_size(run.world_size);
    for (const auto& [cause, count] : run.failures) (*r->mutable_failures())[cause] = count;
    r->set_last_recovery_s(run.last_recovery_s);
    for (const std::string& line : run.unhealthy) r->add_unhealthy(line);
    for (const RestartPhases& phases : run.restarts) *r->add_restarts() = ToProto(phases);
    for (const MemberSnapshot& m : run.members) {
      v1::MemberStatus* s = r->add_members();
      s->set_host(m.desc.host);
      s->set_address(m.desc.address);
      s->set_node_rank(m.node_rank);
      s->set_local_world_size(m.desc.local_world_size);
      s->set_state(m.state);
      s->set_last_seen_s_ago(static_cast<double>(m.since_last_seen.count()) / 1000.0);
      s->set_note(m.note);
      s->set_topology(m.desc.topology);
      for (const RankSnapshot& rank : m.ranks) {
        v1::RankStatus* r = s->add_ranks();
        r->set_global_rank(rank.global_rank);
        r->set_local_rank(rank.local_rank);
        r->set_step(rank.step);
        r->set_step_seconds(rank.step_seconds);
        r->set_last_report_s_ago(rank.since_report_s);
        r->set_straggler(rank.straggler);
      }
    }
  }
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

}  // namespace mxrun

#include "rendezvous/client/grpc_rendezvous.h"

#include <grpcpp/grpcpp.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "rendezvous/grpc/grpc_status.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/tls_credentials.h"
#include "rendezvous/net.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {

std::string NewAgentId() {
  std::random_device random;
  return absl::StrCat(absl::Hex(random(), absl::kZeroPad8), absl::Hex(random(), absl::kZeroPad8));
}

GrpcRendezvous::GrpcRendezvous(GrpcRendezvousConfig config) : config_(std::move(config)) {
  // Recognises this agent process across a restart or a takeover of the master.
  if (config_.node.agent_id.empty()) config_.node.agent_id = NewAgentId();
  if (config_.locator) {
    durable_ = config_.locator->elected();  // a successor master carries on from the state in etcd
    config_.locator->Subscribe([this](const std::string& address) { OnMasterMoved(address); });
  } else {
    Dial(config_.endpoint);
  }
  reader_ = std::thread([this] { ReaderLoop(); });
  writer_ = std::thread([this] { WriterLoop(); });
}

void GrpcRendezvous::Dial(const std::string& address) {
  grpc::ChannelArguments args;
  // gRPC's keepalive is only a backstop: the master's answers to heartbeats (Alive) are what
  // tells a silent master within the lease. Its time-out is also the socket's TCP_USER_TIMEOUT,
  // so it is kept well above the default lease (5 s); otherwise a partition would break the
  // connection with ETIMEDOUT at about the lease, racing the silence rule with a different outcome.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 20000);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  // Also the time one connection attempt may take (20 s by default): a SYN lost in a partition is
  // given up after 1 s and sent again, so a node reconnects within about a second of a link's
  // return.
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  // A channel of its own connection: with gRPC's global subchannel pool, a channel dialled again
  // after a silent master would share the old channel's connection, dead in the partition.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Other nodes' flight-recorder dumps after a hang run to megabytes (GatherFlightRecords).
  args.SetMaxReceiveMessageSize(64 << 20);
  channel_ = grpc::CreateCustomChannel(address, ClientCredentials(config_.tls), args);
  stub_ = v1::Rendezvous::NewStub(channel_);
  channel_address_ = address;
}

void GrpcRendezvous::OnMasterMoved(const std::string& address) {
  // Leave the old master at once (it died, or was deposed and must not be followed); the reader
  // reconnects to the new one and resumes.
  {
    std::lock_guard<std::mutex> lock(mutex_);
    ++master_moves_;
    if (context_ && connected_ && address != session_address_) context_->TryCancel();
  }
  wake_.notify_all();  // a session waiting for an address dials it now
}

GrpcRendezvous::~GrpcRendezvous() {
  if (config_.locator) config_.locator->Subscribe({});
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closing_ = true;
    if (context_) context_->TryCancel();
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  if (reader_.joinable()) reader_.join();
}

void GrpcRendezvous::PostError(absl::Status status) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_posted_ || closing_) return;
    error_posted_ = true;
  }
  wake_.notify_all();  // ReportUnhealthy waits for the master's answer
  RendezvousEvent event;
  event.kind = RendezvousEvent::Kind::kError;
  event.error = std::move(status);
  events_.Post(std::move(event));
}

bool GrpcRendezvous::OpenSession(bool reconnecting) {
  // The master may start after the agents, or restart: wait for it up to the join timeout, in
  // slices so that destruction is never held up.
  const auto deadline = std::chrono::steady_clock::now() + config_.job.timeouts.join_timeout;
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < deadline) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closing_) return false;
    }
    if (config_.locator) {
      int moves_seen = 0;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        moves_seen = master_moves_;
      }
      const std::string address = config_.locator->Current();
      if (address.empty()) {  // an election under way: woken as soon as its winner is published
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return closing_ || master_moves_ != moves_seen; });
        continue;
      }
      if (address != channel_address_) Dial(address);
    }
    up = channel_->WaitForConnected(std::chrono::system_clock::now() +
                                    std::chrono::milliseconds(100));
  }
  if (!up) {
    const bool elected = config_.locator && config_.locator->elected();
    bool silent = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      silent = silent_session_ != 0 && silent_session_ == session_;  // the last session's end
    }
    PostError(absl::UnavailableError(absl::StrCat(
        reconnecting ? (silent ? "the rendezvous master at " : "lost the rendezvous master at ")
                     : "cannot reach the rendezvous master at ",
        config_.endpoint,
        reconnecting ? (silent ? " went silent (no answer for the lease: a partition, or its host "
                                 "is down) and could not be reached again within "
                               : " and it did not come back within ")
                     : " (waited ",
        config_.job.timeouts.join_timeout.count() / 1000.0,
        reconnecting ? " s (the join timeout)"
                     : " s, the join timeout); is it running, and is the endpoint right?",
        // A TLS mismatch looks like an unreachable master from here: say which side is which.
        config_.tls.enabled()
            ? (elected
                   ? " This node uses mutual TLS with the master (--rdzv_conf master_cert, "
                     "master_key, master_cacert): the master must too, with a certificate from "
                     "the same CA naming the address it publishes in etcd."
                   : " This node uses mutual TLS (--rdzv_conf cert, key, cacert): the master must "
                     "too, with a certificate from the same CA naming the endpoint's host.")
            : (elected
                   ? " If the master requires mutual TLS, give --rdzv_conf "
                     "master_cert=,master_key=,"
                     "master_cacert= (and the same to mxrun status)."
                   : " If the master requires mutual TLS, give --rdzv_conf cert=,key=,cacert= (and "
                     "the same to mxrun status)."))));
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (closing_) return false;
    context_ = std::make_unique<grpc::ClientContext>();
    if (!config_.token.empty()) context_->AddMetadata(kTokenMetadataKey, config_.token);
    if (reconnecting) {
      // First on the new session: the join again, as a resume when workers run here; then the
      // last report, which may have been lost with the old session (the master drops repeats).
      std::deque<v1::AgentMessage> replay;
      if (last_join_) {
        v1::AgentMessage join = *last_join_;
        const int running = running_round_;
        if (running >= 0) {
          join.mutable_join()->set_resume(true);
          join.mutable_join()->set_resume_round(running);
        }
        replay.push_back(std::move(join));
      }
      if (last_report_) replay.push_back(*last_report_);
      // What the old session never sent is superseded by the replay (a Join queued twice would
      // look to the master like a member that lost its workers); only a Leave still stands.
      std::erase_if(outgoing_, [](const v1::AgentMessage& m) { return !m.has_leave(); });
      outgoing_.insert(outgoing_.begin(), replay.begin(), replay.end());
    }
    stream_ = stub_->Session(context_.get());
    connected_ = true;
    last_heard_ = std::chrono::steady_clock::now();  // the lease runs from the session's start
    session_address_ = channel_address_;
    ++session_;
  }
  wake_.notify_all();
  // The master may have moved while this session opened (OnMasterMoved saw no session yet).
  if (config_.locator && config_.locator->Current() != channel_address_) OnMasterMoved("");
  return true;
}

void GrpcRendezvous::ReaderLoop() {
  for (bool reconnecting = false;; reconnecting = true) {
    if (!OpenSession(reconnecting)) return;
    v1::MasterMessage message;
    while (stream_->Read(&message)) {
      {
        std::lock_guard<std::mutex> lock(mutex_);
        last_heard_ = std::chrono::steady_clock::now();
      }
      OnMasterMessage(message);
    }
    {
      // Finish() must not race a Write(): stop the writer first.
      std::unique_lock<std::mutex> lock(mutex_);
      connected_ = false;
      wake_.notify_all();
      wake_.wait(lock, [this] { return !writing_; });
    }
    grpc::Status status = stream_->Finish();
    if (finished_) return;
    bool silent = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (closing_) return;
      silent = silent_session_ == session_;
    }
    if (silent) {
      // The connection under a silent session may be dead without knowing it (a partition
      // drops packets; nothing resets it for many seconds): dial a new one.
      Dial(channel_address_);
      continue;
    }
    if (status.error_code() == grpc::StatusCode::UNAUTHENTICATED) {
      PostError(FromGrpcStatus(status));
      return;
    }
    // A durable master restarting, or (with a locator) any master going away, a deposed one
    // closing its sessions included: reconnect to whoever serves now.
    if (durable_ && (!status.ok() || (config_.locator && config_.locator->elected()))) continue;
    if (!status.ok()) {
      PostError(
          absl::UnavailableError(absl::StrCat("lost the connection to the rendezvous master at ",
                                              config_.endpoint, ": ", status.error_message())));
    } else {
      PostError(absl::UnavailableError(
          absl::StrCat("the rendezvous master at ", config_.endpoint, " closed the session")));
    }
    return;
  }
}

void GrpcRendezvous::WriterLoop() {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t served = 0;  // the session this writer writes to (0: none yet)
  for (;;) {
    // A session it has not served yet: after a broken one, the reader may already have opened
    // the next before this thread wakes, so waiting for "not connected" could miss it.
    wake_.wait(lock, [&] { return closing_ || (connected_ && session_ != served); });
    if (!connected_ || session_ == served) return;  // closing with no new session
    served = session_;
    const auto live = [&] { return connected_ && session_ == served; };
    // The master's silence is watched only when it answers heartbeats, and no longer once this
    // session is dropped for it (the reader is ending it).
    const auto watching = [&] { return answers_heartbeats_ && silent_session_ != served; };
    auto last_write = std::chrono::steady_clock::now();
    bool left = false;
    while (live()) {
      if (outgoing_.empty()) {
        if (closing_) break;
        const auto due = last_write + config_.job.timeouts.heartbeat_interval;
        const auto silent_at = watching() ? last_heard_ + config_.job.timeouts.lease() : due;
        wake_.wait_until(lock, std::min(due, silent_at),
                         [&] { return !outgoing_.empty() || closing_ || !live(); });
        if (!live()) break;
        if (watching() && !closing_ &&
            std::chrono::steady_clock::now() >= last_heard_ + config_.job.timeouts.lease()) {
          OnMasterSilent(lock);
          continue;  // the reader ends the session; this loop ends when it has
        }
        if (outgoing_.empty() && !closing_ && std::chrono::steady_clock::now() >= due) {
          v1::AgentMessage beat;
          v1::Heartbeat* heartbeat = beat.mutable_heartbeat();
          // The ranks' progress rides along while their round runs (stale after it).
          if (!progress_.empty() && progress_round_ == running_round_) {
            const auto now = std::chrono::steady_clock::now();
            heartbeat->set_round(progress_round_);
            for (const RankProgress& rank : progress_) *heartbeat->add_ranks() = ToProto(rank, now);
          }
          outgoing_.push_back(std::move(beat));
        }
        continue;
      }
      v1::AgentMessage message = std::move(outgoing_.front());
      outgoing_.pop_front();
      const bool leaving = message.has_leave();
      writing_ = true;
      lock.unlock();
      bool ok = stream_->Write(message);
      if (ok && leaving) stream_->WritesDone();
      lock.lock();
      writing_ = false;
      wake_.notify_all();
      last_write = std::chrono::steady_clock::now();
      if (leaving) left = true;
      if (!ok || leaving) break;  // a broken stream is reported (or reopened) by the reader
    }
    if (left || closing_) return;
  }
}

void GrpcRendezvous::OnMasterSilent(std::unique_lock<std::mutex>& lock) {
  silent_session_ = session_;
  const double lease_s = config_.job.timeouts.lease().count() / 1000.0;
  // Workers of a running round stop; a node still waiting, or whose workers have finished,
  // simply repeats its join (and its success) to whoever answers next.
  const bool stop_workers = running_round_ >= 0 && !succeeded_reported_;
  if (stop_workers) {
    running_round_ = -1;
    last_join_.reset();  // the agent joins afresh once its workers are stopped
    last_report_.reset();
  }
  if (context_) context_->TryCancel();
  lock.unlock();
  if (stop_workers) {
    RendezvousEvent event;
    event.kind = RendezvousEvent::Kind::kRejoin;
    event.master_silent = true;
    event.reason = absl::StrCat(
        "no word from the rendezvous master at ", config_.endpoint, " for ", lease_s,
        " s (the lease; a partition, or the master's host is down): stopping this node's workers, "
        "which the master counts as gone after the same lease, and joining again when it answers "
        "(for up to the join timeout, ",
        config_.job.timeouts.join_timeout.count() / 1000.0, " s)");
    events_.Post(std::move(event));
  }
  lock.lock();
}

void GrpcRendezvous::Send(v1::AgentMessage message) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    // Joins and reports are remembered for the replay on a new session (see OpenSession); a new
    // join starts a round afresh, so the previous report is void.
    if (message.has_join()) {
      last_join_ = message;
      last_report_.reset();
      succeeded_reported_ = false;
    } else if (message.has_failure() || message.has_succeeded()) {
      last_report_ = message;
      succeeded_reported_ = message.has_succeeded();
    }
    if (closing_) return;
    outgoing_.push_back(std::move(message));
  }
  wake_.notify_all();
}

void GrpcRendezvous::Join() {
  NodeDesc node = config_.node;
  if (node.address.empty()) {
    absl::StatusOr<HostPort> endpoint =
        ParseHostPort(config_.route_probe.empty() ? config_.endpoint : config_.route_probe,
                      kDefaultRendezvousPort);
    absl::StatusOr<std::string> local = endpoint.ok()
                                            ? LocalAddressToward(endpoint->host, endpoint->port)
                                            : absl::StatusOr<std::string>(endpoint.status());
    if (!local.ok()) {
      PostError(local.status());
      return;
    }
    node.address = *local;
  }
  absl::StatusOr<int> port = PickFreePort(node.address);
  if (!port.ok()) {
    PostError(port.status());
    return;
  }
  node.master_port = *port;
  v1::AgentMessage message;
  v1::Join* join = message.mutable_join();
  join->set_protocol_version(1);
  join->set_run_id(config_.run_id);
  *join->mutable_node() = ToProto(node);
  *join->mutable_job() = ToProto(config_.job);
  Send(std::move(message));
}

void GrpcRendezvous::ReportUnhealthy(const std::string& why) {
  NodeDesc node = config_.node;
  if (node.address.empty()) node.address = "unknown";  // not joining: no address to work out
  node.unhealthy = why;
  v1::AgentMessage message;
  v1::Join* join = message.mutable_join();
  join->set_protocol_version(1);
  join->set_run_id(config_.run_id);
  *join->mutable_node() = ToProto(node);
  *join->mutable_job() = ToProto(config_.job);
  Send(std::move(message));
  // The agent exits next: wait (bounded) for the master's answer, a refusal that says it has
  // recorded the report. Waiting only until the report was written lost it under load: the agent
  // had exited, its session closed, and `mxrun status` run at once did not list it yet.
  std::unique_lock<std::mutex> lock(mutex_);
  wake_.wait_for(lock, std::chrono::seconds(5), [&] { return error_posted_ || finished_; });
}

void GrpcRendezvous::ReportFailure(const WorkerFailure& failure) {
  v1::AgentMessage message;
  message.mutable_failure()->set_round(round_);
  *message.mutable_failure()->mutable_failure() = ToProto(failure);
  Send(std::move(message));
}

void GrpcRendezvous::ReportProgress(const std::vector<RankProgress>& ranks) {
  std::lock_guard<std::mutex> lock(mutex_);
  progress_ = ranks;
  progress_round_ = running_round_;
}

void GrpcRendezvous::ReportRestartPhases(const RestartPhases& phases) {
  v1::AgentMessage message;
  *message.mutable_restart_phases() = ToProto(phases);
  Send(std::move(message));
}

void GrpcRendezvous::OfferFlightRecords(const FlightRecordSet& own) {
  v1::AgentMessage message;
  *message.mutable_flight_records() = ToProto(own, /*request=*/false);
  Send(std::move(message));
}

std::vector<FlightRecordSet> GrpcRendezvous::GatherFlightRecords(
    const FlightRecordSet& own, const std::set<int>& expected, std::chrono::milliseconds budget,
    const std::function<void()>& meanwhile) {
  const auto deadline = std::chrono::steady_clock::now() + budget;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    gathering_ = true;
    gathered_.clear();
  }
  v1::AgentMessage message;
  *message.mutable_flight_records() = ToProto(own, /*request=*/true);
  Send(std::move(message));
  std::unique_lock<std::mutex> lock(mutex_);
  auto all_in = [&] {
    std::set<int> missing = expected;
    for (const FlightRecordSet& set : gathered_) {
      for (const RankFlightRecord& rank : set.ranks) missing.erase(rank.global_rank);
    }
    return missing.empty() || closing_ || finished_;
  };
  while (!all_in() && std::chrono::steady_clock::now() < deadline) {
    gathered_wake_.wait_until(
        lock, std::min(deadline, std::chrono::steady_clock::now() + std::chrono::milliseconds(50)));
    if (meanwhile) {
      lock.unlock();  // the caller's work must not hold up the reader
      meanwhile();
      lock.lock();
    }
  }
  gathering_ = false;
  return std::exchange(gathered_, {});
}

void GrpcRendezvous::ReportSucceeded() {
  v1::AgentMessage message;
  message.mutable_succeeded()->set_round(round_);
  Send(std::move(message));
}

void GrpcRendezvous::Leave() {
  v1::AgentMessage message;
  message.mutable_leave();
  Send(std::move(message));
  std::lock_guard<std::mutex> lock(mutex_);
  closing_ = true;
  wake_.notify_all();
}

void GrpcRendezvous::OnMasterMessage(const v1::MasterMessage& message) {
  RendezvousEvent event;
  switch (message.kind_case()) {
    case v1::MasterMessage::kWaiting:
      if (message.waiting().durable()) durable_ = true;
      if (message.waiting().answers_heartbeats()) answers_heartbeats_ = true;
      // An acknowledgement: the agent logs nothing per node to keep large jobs quiet, but a
      // service manager learns that the node is registered.
      event.kind = RendezvousEvent::Kind::kRegistered;
      // The node range is this agent's own: the master refuses a join whose range differs.
      event.reason =
          absl::StrCat("registered; ", message.waiting().nodes_waiting(), " node(s) waiting, ",
                       config_.job.min_nodes, " to ", config_.job.max_nodes, " needed");
      if (!message.waiting().excluded().empty()) {
        event.excluded = true;
        event.reason = absl::StrCat("the master leaves this node out of the job's rounds: ",
                                    message.waiting().excluded());
      }
      break;
    case v1::MasterMessage::kRound:
      if (message.round().durable()) durable_ = true;
      if (message.round().answers_heartbeats()) answers_heartbeats_ = true;
      round_ = message.round().round();
      running_round_ = round_.load();
      event.kind = RendezvousEvent::Kind::kRoundReady;
      event.round = FromProto(message.round());
      break;
    case v1::MasterMessage::kStop:
      running_round_ = -1;
      event.kind = RendezvousEvent::Kind::kRejoin;
      event.reason = message.stop().reason();
      event.restart = message.stop().restart();
      event.restarts_spent = message.stop().restarts_spent();
      event.max_restarts = message.stop().max_restarts();
      break;
    case v1::MasterMessage::kPeerFinished: {
      const v1::PeerFinished& peer = message.peer_finished();
      event.kind = RendezvousEvent::Kind::kPeerFinished;
      event.reason =
          absl::StrCat("the workers of node ", peer.node_rank(), " (", peer.host(), ") exited 0 (",
                       peer.nodes_finished(), " of ", peer.nodes(), " nodes finished)");
      break;
    }
    case v1::MasterMessage::kFinished:
      finished_ = true;
      event.kind = message.finished().success() ? RendezvousEvent::Kind::kJobSucceeded
                                                : RendezvousEvent::Kind::kJobFailed;
      event.first_failure = FromProto(message.finished().first_failure());
      event.restarts_spent = message.finished().restarts_spent();
      event.max_restarts = message.finished().max_restarts();
      event.same_failure_every_attempt = message.finished().same_failure();
      event.excluded_nodes.assign(message.finished().excluded_nodes().begin(),
                                  message.finished().excluded_nodes().end());
      event.failure_signature = message.finished().failure_signature();
      break;
    case v1::MasterMessage::kRefused:
      finished_ = true;
      PostError(absl::Status(
          static_cast<absl::StatusCode>(message.refused().code()),
          absl::StrCat("the master at ", config_.endpoint, ": ", message.refused().message())));
      return;
    case v1::MasterMessage::kStraggler:
      if (message.straggler().round() != running_round_) return;  // about a round gone by
      event.kind = RendezvousEvent::Kind::kStraggler;
      event.round.round = message.straggler().round();
      event.straggler = FromProto(message.straggler());
      break;
    case v1::MasterMessage::kFlightRequest:
      if (message.flight_request().round() != running_round_) return;  // that round is over here
      event.kind = RendezvousEvent::Kind::kFlightRequest;
      event.round.round = message.flight_request().round();
      event.reason = message.flight_request().requester();
      break;
    case v1::MasterMessage::kFlightRecords: {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!gathering_) return;  // too late: the hang was already reported without them
      gathered_.push_back(FromProto(message.flight_records()));
      gathered_wake_.notify_all();
      return;
    }
    case v1::MasterMessage::kAlive:  // counted as heard by the reader
      answers_heartbeats_ = true;
      return;
    case v1::MasterMessage::KIND_NOT_SET:
      return;
  }
  events_.Post(std::move(event));
}

}  // namespace mxrun

#pragma once
// The agent's rendezvous client for multi-node jobs: one long-lived Session stream to the master.
//
// Two threads of its own: a reader that turns master messages into RendezvousEvents (posted on the
// event fd the agent watches), and a writer that sends queued requests in order and a heartbeat
// whenever it has been idle for the heartbeat interval. Nothing the agent calls blocks.
//
// Connecting waits up to join_timeout for the master (it may start after the agents); an
// unreachable master, a refusal (wrong token, mismatched job, finished run) or a lost connection
// become a kError event, which the agent turns into exit code 3. Except: when the master said it is
// durable (mxrun-master --state_dir), a lost connection is retried for up to join_timeout, and the
// new session resumes the running round (Join with resume) so the workers carry on; the last report
// is sent again, since it may have died with the old session.
//
// A partition breaks no stream (no FIN or RST crosses it), so the agent also watches the master's
// answers to its heartbeats (Alive): nothing heard for the lease (heartbeat interval x missed
// heartbeats, the time after which the master declares this node gone) means the master is cut
// off from here. Workers running in a round are stopped (a kRejoin with master_silent: that world
// is being dissolved by the master, or the master is gone), the session is dropped with its
// connection, and the master is dialled afresh for up to join_timeout; the node joins again when
// it answers, or exits 3 when it does not.

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "mxrun.grpc.pb.h"
#include "rendezvous/client/master_locator.h"
#include "rendezvous/event_queue.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/wire/wire.h"

#include "common/tls_files.h"

namespace mxrun {

struct GrpcRendezvousConfig {
  std::string endpoint;  // "host:port" of the master (with a locator: only named in messages)
  // Set when the master can move (etcd) or must be found first (master_probe.h): its address
  // comes from here before every session, and a change of it ends the current session; with an
  // elected master the agent then always reconnects and resumes.
  std::shared_ptr<MasterLocator> locator;
  std::string route_probe;  // with a locator: a "host:port" whose route gives this node's address
  std::string run_id;
  NodeDesc node;  // address empty: the local address toward the master; port picked per join
  JobDesc job;
  std::string token;  // sent as x-mxrun-token when non-empty
  TlsFiles tls;       // mutual TLS with the master (rendezvous/grpc/tls_credentials.h)
};

// A fresh id for an agent process (NodeDesc::agent_id).
std::string NewAgentId();

class GrpcRendezvous final : public Rendezvous {
 public:
  explicit GrpcRendezvous(GrpcRendezvousConfig config);
  ~GrpcRendezvous() override;

  void Join() override;
  void ReportFailure(const WorkerFailure& failure) override;
  void ReportSucceeded() override;
  void ReportProgress(const std::vector<RankProgress>& ranks) override;
  void ReportUnhealthy(const std::string& why) override;
  void ReportRestartPhases(const RestartPhases& phases) override;
  void OfferFlightRecords(const FlightRecordSet& own) override;
  std::vector<FlightRecordSet> GatherFlightRecords(const FlightRecordSet& own,
                                                   const std::set<int>& expected,
                                                   std::chrono::milliseconds budget,
                                                   const std::function<void()>& meanwhile) override;
  void Leave() override;
  int EventFd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }

 private:
  void ReaderLoop();
  // Waits (bounded) for the channel to connect and opens a session; false when closing or when
  // the master stayed unreachable (the error is posted).
  bool OpenSession(bool reconnecting);
  void WriterLoop();
  // Queues `message` for the writer (dropped once closing); remembers joins and reports.
  void Send(v1::AgentMessage message);
  void PostError(absl::Status status);
  void OnMasterMessage(const v1::MasterMessage& message);
  // Points the channel at `address` (reader thread only).
  void Dial(const std::string& address);
  void OnMasterMoved(const std::string& address);
  // Writer thread, mutex_ held by `lock`: the master has not been heard for the lease on this
  // session; drops the session (the reader dials again) and stops the workers of a running round.
  void OnMasterSilent(std::unique_lock<std::mutex>& lock);

  GrpcRendezvousConfig config_;
  RendezvousEventQueue events_;
  std::shared_ptr<grpc::Channel> channel_;        // reader thread only
  std::unique_ptr<v1::Rendezvous::Stub> stub_;    // reader thread only
  std::string channel_address_;                   // reader thread only
  std::string session_address_;                   // guarded by mutex_
  std::unique_ptr<grpc::ClientContext> context_;  // one per session; guarded by mutex_
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::MasterMessage>> stream_;

  std::mutex mutex_;
  std::condition_variable wake_;
  int master_moves_ = 0;  // addresses the locator announced (guarded by mutex_)
  std::deque<v1::AgentMessage> outgoing_;
  bool connected_ = false;  // the stream exists; the writer may write
  uint64_t session_ = 0;    // counts the sessions opened (the writer serves each one once)
  bool writing_ = false;    // the writer is inside Write() (Finish() must wait for it)
  bool closing_ = false;    // Leave() or destruction: no more writes after the queue
  bool error_posted_ = false;
  std::chrono::steady_clock::time_point last_heard_;  // the master's last message (mutex_)
  uint64_t silent_session_ = 0;      // the session dropped for silence (0: none; mutex_)
  bool succeeded_reported_ = false;  // this round's workers succeeded (mutex_)
  std::atomic<int> round_{-1};
  std::atomic<int> running_round_{-1};  // the round whose workers run here (-1: none)
  std::atomic<bool> durable_{false};    // the master keeps its state across restarts
  // The master said it answers heartbeats (Waiting.answers_heartbeats): only then is its silence
  // for the lease taken as a cut. Sticky: every master of a deployment runs the same version.
  std::atomic<bool> answers_heartbeats_{false};
  std::atomic<bool> finished_{false};
  std::optional<v1::AgentMessage> last_join_;    // guarded by mutex_
  std::optional<v1::AgentMessage> last_report_;  // guarded by mutex_
  std::vector<RankProgress> progress_;           // the ranks' latest (mutex_)
  int progress_round_ = -1;                      // the round they are of (mutex_)
  // Other nodes' flight records while GatherFlightRecords waits (gathering_, mutex_); records
  // that come at any other time are dropped.
  bool gathering_ = false;
  std::vector<FlightRecordSet> gathered_;
  std::condition_variable gathered_wake_;
  std::thread reader_;
  std::thread writer_;
};

}  // namespace mxrun

#pragma once
// The gRPC face of the rendezvous master: a thin adapter between Session streams and MasterState.
// Each agent's stream is one SessionReactor (gRPC callback API, no thread per stream). Every
// message read becomes one MasterState call under one mutex; the messages it returns are queued on
// the addressed sessions and written one at a time. A ticker thread feeds the master's clock to the
// state machine (lease expiry, last call, join time-outs).
//
// Thread-safety: all public methods are safe to call from any thread.

#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "mxrun.grpc.pb.h"
#include "rendezvous/master_state/master_state.h"
#include "rendezvous/master_state/master_state_store.h"

namespace mxrun {

class RendezvousService final : public v1::Rendezvous::CallbackService {
 public:
  using Clock = std::function<MasterState::Time()>;

  // `token`: demanded on every call when non-empty.
  explicit RendezvousService(
      std::string token, std::chrono::milliseconds tick = std::chrono::milliseconds(50),
      Clock clock = [] { return std::chrono::steady_clock::now(); });
  ~RendezvousService() override;

  grpc::ServerBidiReactor<v1::AgentMessage, v1::MasterMessage>* Session(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const v1::StatusRequest* request,
                                      v1::StatusReply* reply) override;

  // Stops the ticker and ends every open session (call before shutting the server down).
  void Shutdown();

  // Keeps the running runs in `store` from now on, after restoring what it holds (call before
  // serving). Agents are told the master is durable, so they reconnect after it restarts. With a
  // fenced store, `on_deposed` is called (once, with the service's lock held: it must only
  // signal) when a write is refused because this master's leadership has ended; from then on it
  // tells agents nothing more and closes every session.
  absl::Status KeepStateIn(std::unique_ptr<MasterStateStore> store,
                           std::function<void()> on_deposed = {});
  // The restored members of agent `agent_id` are gone (MasterState::AgentGone).
  void ForgetAgent(const std::string& agent_id, const std::string& why);
  // Serves run `run_id` only (call before serving): a master that an agent hosts lives as long as
  // that agent's job, so another job must never come to depend on it. A join for any other run
  // is refused with FailedPrecondition, and GetStatus says which run it serves.
  void ServeOnlyRun(std::string run_id) { only_run_id_ = std::move(run_id); }
  // What `mxrun status` and the metrics show: every run ("" ) or one, as of now.
  std::vector<RunSnapshot> Snapshot(const std::string& run_id = "");

 private:
  class SessionReactor;
  friend class SessionReactor;

  void OnMessage(NodeId node, const v1::AgentMessage& message);
  void OnSessionEnded(NodeId node, const std::string& why);
  void Unregister(NodeId node);
  void Deliver(const MasterState::Out& out);  // mutex_ held
  // Writes the state when it changed; false when the decisions must wait (mutex_ held).
  bool SaveState(MasterState::Time now);
  void Send(const ToAgent& message);  // mutex_ held
  void TickLoop();

  const std::string token_;
  std::string only_run_id_;  // empty: any run (mxrun-master); set before serving, then read-only
  const std::chrono::milliseconds tick_;
  const Clock clock_;
  std::mutex mutex_;
  MasterState state_;
  // Guarded by mutex_:
  std::unique_ptr<MasterStateStore> store_;
  std::function<void()> on_deposed_;
  bool save_pending_ = false;  // the state changed since it was last written
  bool state_write_failed_ = false;
  MasterState::Time last_write_attempt_{};
  std::vector<ToAgent> held_;  // decisions waiting for a fenced write (etcd unreachable)
  bool deposed_ = false;       // a fenced write was refused: another master leads
  std::map<NodeId, SessionReactor*> sessions_;
  NodeId next_node_ = 1;
  bool shutting_down_ = false;
  std::condition_variable ticker_wake_;
  std::thread ticker_;
};

}  // namespace mxrun

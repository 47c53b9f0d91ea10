#pragma once
// The agent's rendezvous client for multi-node jobs: one long-lived Session stream to the master.
//
// Two threads of its own: a reader that turns master messages into RendezvousEvents (posted on the
// event fd the agent watches), and a writer that sends queued requests in order and a heartbeat
// whenever it has been idle for the heartbeat interval. Nothing the agent calls blocks.
//
// Connecting waits up to join_timeout for the master (it may start after the agents); an unreachable
// master, a refusal (wrong token, mismatched job, finished run) or a lost connection become a
// kError event, which the agent turns into exit code 3.

#include <atomic>
#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "mxrun.grpc.pb.h"
#include "rendezvous/event_queue.h"
#include "rendezvous/master_state.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

struct GrpcRendezvousConfig {
  std::string endpoint;   // "host:port" of the master
  std::string run_id;
  NodeDesc node;          // address empty: the local address toward the master; port picked per join
  JobDesc job;
  std::string token;      // sent as x-mxrun-token when non-empty
};

class GrpcRendezvous final : public Rendezvous {
 public:
  explicit GrpcRendezvous(GrpcRendezvousConfig config);
  ~GrpcRendezvous() override;

  void Join() override;
  void ReportFailure(const WorkerFailure& failure) override;
  void ReportSucceeded() override;
  void Leave() override;
  int EventFd() const override { return events_.fd(); }
  std::vector<RendezvousEvent> TakeEvents() override { return events_.Take(); }

 private:
  void ReaderLoop();
  void WriterLoop();
  void Send(v1::AgentMessage message);
  void PostError(absl::Status status);
  void OnMasterMessage(const v1::MasterMessage& message);

  GrpcRendezvousConfig config_;
  RendezvousEventQueue events_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Rendezvous::Stub> stub_;
  grpc::ClientContext context_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::AgentMessage, v1::MasterMessage>> stream_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<v1::AgentMessage> outgoing_;
  bool connected_ = false;    // the stream exists; the writer may write
  bool writing_ = false;      // the writer is inside Write() (Finish() must wait for it)
  bool closing_ = false;      // Leave() or destruction: no more writes after the queue
  bool error_posted_ = false;
  std::atomic<int> round_{-1};
  std::atomic<bool> finished_{false};
  std::thread reader_;
  std::thread writer_;
};

}  // namespace mxrun

#pragma once
// The workers' store, hosted by the agent as torchrun's agent hosts it: a Rendezvous in front of
// another that, for each round this node hosts, starts a store server (common/store/
// store_server.h) before the round reaches the agent and gives the workers its port as
// MASTER_PORT with TORCHELASTIC_USE_AGENT_STORE=True. PyTorch's init_process_group then makes
// every rank a client of it: no rank waits for rank 0 to open a store, and the store outlives
// every worker of the round.
//
// One store per round, on a port of its own (or on the fixed --master_port, which the new round's
// store takes over): PyTorch's clients in agent-store mode add no prefix of their own ("a new
// TCPStore for every retry"), so a round never reads another round's keys. The store of an
// earlier round stays open while clients are still connected to it (a survivor's group of an
// in-process restart lives on the store it was made on), the most recent kKeptRounds of them.
//
// Which rounds a node hosts: every round of a one-node job (LocalRendezvous), on `host` and a
// free port or the fixed one. With the master's rendezvous (`from_rounds`), the rounds in which
// this node is node rank 0 and the master says use_agent_store (node rank 0's agent joined with
// hosts_workers_store): on the address and port this agent joined with, which the round gives
// every node as MASTER_ADDR:MASTER_PORT. When that node is lost, the next round's node rank 0
// hosts the next store: every round has a new one anyway.
//
// Everything else passes through to the inner rendezvous unchanged. Called on the agent's thread.

#include <array>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/store/store_server.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

// What the job's stores hold now and have served so far (for the metrics).
struct StoreTotals {
  std::string run_id;
  std::size_t keys = 0;             // the current round's store
  std::size_t bytes = 0;            // the current round's store
  std::size_t clients = 0;          // every open store's
  std::size_t waiting_clients = 0;  // every open store's
  std::size_t stores = 0;           // open: the current round's and earlier ones kept
  std::array<std::uint64_t, kStoreOpCount> requests{};  // by StoreOp, every store of the job
  std::uint64_t refused_clients = 0;                    // every store of the job
};

struct WorkersStoreConfig {
  std::string host;    // where to listen: the round's MASTER_ADDR ("localhost": every address)
  int fixed_port = 0;  // --master_port of a static one-node job; 0: a free port per round
  // The master's rounds: host those that name this node's agent, at their master_addr and
  // master_port (`host` and `fixed_port` unused).
  bool from_rounds = false;
  StoreServer::Options server;  // limits (host and port are set from the above)
};

class WorkersStoreRendezvous final : public Rendezvous {
 public:
  static constexpr std::size_t kKeptRounds = 8;

  WorkersStoreRendezvous(std::unique_ptr<Rendezvous> inner, WorkersStoreConfig config);
  ~WorkersStoreRendezvous() override;

  void Join() override { inner_->Join(); }
  void ReportFailure(const WorkerFailure& failure) override { inner_->ReportFailure(failure); }
  void ReportSucceeded() override { inner_->ReportSucceeded(); }
  void ReportProgress(const std::vector<RankProgress>& ranks) override {
    inner_->ReportProgress(ranks);
  }
  void ReportRestartPhases(const RestartPhases& phases) override {
    inner_->ReportRestartPhases(phases);
  }
  void ReportUnhealthy(const std::string& why) override { inner_->ReportUnhealthy(why); }
  void OfferFlightRecords(const FlightRecordSet& own) override { inner_->OfferFlightRecords(own); }
  std::vector<FlightRecordSet> GatherFlightRecords(
      const FlightRecordSet& own, const std::set<int>& expected, std::chrono::milliseconds budget,
      const std::function<void()>& meanwhile) override {
    return inner_->GatherFlightRecords(own, expected, budget, meanwhile);
  }
  void Leave() override { inner_->Leave(); }
  int EventFd() const override { return inner_->EventFd(); }
  // The inner rendezvous' events; a round this node hosts carries its store's port (or becomes
  // kError, exit 3, when no store could be opened: the port is taken, the address is not here).
  std::vector<RendezvousEvent> TakeEvents() override;

  // What the stores hold and have served; nullopt before the first round. Thread-safe (the
  // metrics server's thread calls it).
  std::optional<StoreTotals> Totals() const;

 private:
  bool Hosts(const RoundAssignment& round) const;
  absl::Status Host(RoundAssignment& round);
  // A store closed: what it served joins the totals.
  void Retire(std::unique_ptr<StoreServer> server);

  std::unique_ptr<Rendezvous> inner_;
  WorkersStoreConfig config_;
  mutable std::mutex mutex_;  // guards what Totals() reads: the stores and the sums
  std::string run_id_;
  std::unique_ptr<StoreServer> current_;               // the last round's this node hosted
  std::vector<std::unique_ptr<StoreServer>> earlier_;  // earlier rounds' stores with clients
  std::array<std::uint64_t, kStoreOpCount> retired_requests_{};  // of the stores closed
  std::uint64_t retired_refused_ = 0;
};

}  // namespace mxrun

#pragma once
// Finding this run's master among candidate endpoints: a Slurm job's agents know the host and a
// block of ports derived from the job id (launcher/launch_flags/slurm.h), and the agent that hosts
// the master takes the first free one. A master an agent hosts serves its own run only and says
// which in GetStatus (StatusReply.serves_only_run_id), so an agent asks each candidate in turn and
// follows the one that serves its run: never another job's master, never a stranger on the port (a
// TCPStore, anything that is not an mxrun master, a master for every run).
//
// Thread-safety: Current() is called from the rendezvous client's reader thread; ServedRun() from
// any thread.

#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/tls_files.h"
#include "rendezvous/client/master_locator.h"

namespace mxrun {

struct MasterProbeConfig {
  std::vector<std::string> candidates;  // "host:port", asked in this order
  std::string run_id;
  std::string token;  // as the master demands (x-mxrun-token)
  TlsFiles tls;
  std::chrono::milliseconds probe_timeout{500};   // one GetStatus
  std::chrono::milliseconds probe_interval{200};  // between two passes over the candidates
};

// The run the master at `address` serves ("" when it serves any run). Errors: whatever the call
// returned (nothing listening, not an mxrun master, a wrong token or TLS), as a Status.
absl::StatusOr<std::string> ServedRun(const std::string& address, const std::string& token,
                                      const TlsFiles& tls, std::chrono::milliseconds timeout);

// For an agent about to join the master on a local port that is already taken: OK when what
// listens at `address` answers as an mxrun master within `timeout` (any run, even a refusal of the
// token: the rendezvous then says what is wrong); otherwise an Unavailable error that names the
// port as taken by another program, with what the call returned. Without this check the agent
// would wait for a round until the join timeout.
absl::Status CheckListenerIsMaster(const std::string& address, const std::string& token,
                                   const TlsFiles& tls, std::chrono::milliseconds timeout);

class ProbingMasterLocator final : public MasterLocator {
 public:
  explicit ProbingMasterLocator(MasterProbeConfig config) : config_(std::move(config)) {}

  // The candidate serving this run once found (it never changes after that); until then a pass
  // over the candidates at most every probe_interval, and "" when none serves the run yet (its
  // host may not have started: the rendezvous client keeps asking up to the join timeout).
  std::string Current() override;
  void Subscribe(std::function<void(const std::string&)>) override {}
  bool elected() const override { return false; }

 private:
  const MasterProbeConfig config_;
  std::mutex mutex_;
  std::string found_;
  std::chrono::steady_clock::time_point next_pass_{};
};

}  // namespace mxrun

#pragma once
// Where the rendezvous master is, for an agent whose master can move (--rdzv_backend=etcd: the
// leader's address is published in etcd and changes with a takeover) or must be found first (a
// Slurm job's master on one of its candidate ports: master_probe.h). The gRPC client asks for
// the address before each session and is told when it changes, so that it leaves a deposed or
// dead master at once instead of waiting for TCP to notice.

#include <functional>
#include <string>

namespace mxrun {

class MasterLocator {
 public:
  virtual ~MasterLocator() = default;
  // The master's address now; "" while none is known (an election under way, etcd unreachable).
  virtual std::string Current() = 0;
  // `on_change` is called (from another thread) with each new address, "" included; an empty
  // function unsubscribes (the subscriber must do so before it goes away).
  virtual void Subscribe(std::function<void(const std::string&)> on_change) = 0;
  // True when the master is elected and keeps its state elsewhere (etcd), so that a successor
  // carries on the runs and agents reconnect to it; false when the master lives and dies with the
  // agent that hosts it (a lost master is then an error, as with a fixed endpoint).
  virtual bool elected() const { return true; }
};

}  // namespace mxrun

#pragma once
// Where the rendezvous master is, for an agent whose master can move (--rdzv_backend=etcd: the
// leader's address is published in etcd and changes with a takeover). The gRPC client asks for
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
};

}  // namespace mxrun

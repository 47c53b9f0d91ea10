#pragma once
// Ports for daemons a test starts (etcd, Slurm): each from the kernel, and never one handed out
// before in the same set (the kernel may offer a just-closed port again).

#include <set>

#include <catch2/catch.hpp>

#include "rendezvous/net.h"

namespace mxrun::testing {

inline int DistinctFreePort(std::set<int>& taken) {
  for (int attempt = 0; attempt < 100; ++attempt) {
    absl::StatusOr<int> port = PickFreePort("127.0.0.1");
    REQUIRE(port.ok());
    if (taken.insert(*port).second) return *port;
  }
  FAIL("no free port");
  return 0;
}

}  // namespace mxrun::testing

#pragma once
// A master's kept run of `members` nodes with realistic host names, addresses and agent ids, for
// the tests of its layout in etcd (unit: in memory; integration: through real etcd members).

#include <string>

#include "rendezvous/master_state/master_state.h"

namespace mxrun::testing {

inline PersistedRun SampleRun(const std::string& id, int members) {
  PersistedRun run;
  run.run_id = id;
  run.job.min_nodes = 1;
  run.job.max_nodes = members;
  run.round = 3;
  run.restarts_spent = 1;
  run.world_size = members * 8;
  for (int i = 0; i < members; ++i) {
    PersistedMember m;
    m.desc.host = "gpu-node-" + std::to_string(i) + ".cluster.example.org";
    m.desc.address = "10." + std::to_string(i / 65536) + "." + std::to_string(i / 256 % 256) + "." +
                     std::to_string(i % 256);
    m.desc.local_world_size = 8;
    m.desc.master_port = 29500;
    m.desc.agent_id = "agent-" + std::to_string(i) + "-0123456789abcdef0123456789abcdef";
    m.node_rank = i;
    m.succeeded = i % 3 == 0;
    run.members.push_back(m);
  }
  return run;
}

}  // namespace mxrun::testing

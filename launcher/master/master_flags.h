#pragma once
// mxrun-master's settings on the flag engine (flags/flag_engine.h): flags, MXRUN_MASTER_<FLAG> in
// the environment (MXRUN_MASTER_METRICS_PORT=29401), a --config file, --print-config.

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/etcd/etcd_leadership.h"
#include "rendezvous/master_server/master_server.h"
#include "rendezvous/net.h"

namespace mxrun {

struct MasterFlags {
  MasterServerOptions server;  // host, port, bind_all, state_dir, tls (the token: main reads it)
  bool port_given = false;
  std::string token_file;
  // --rdzv_backend=etcd: be one replica of a master service elected in etcd (its `master` and
  // `identity` are main's to fill).
  std::optional<EtcdElectionConfig> election;
  std::string service = "default";
  int metrics_port = kDefaultMasterMetricsPort;  // -1: off
  bool metrics_port_given = false;
  bool metrics_tls = false;
};

struct MasterFlagsResult {
  std::optional<MasterFlags> flags;  // absent when `text` is to be printed (exit 0)
  std::string text;                  // --help, --version, --print-config
};

// mxrun-master's program and every flag it reads, in --help's order: what its manual page is
// written from (launcher/man; the types are the flag engine's, launcher/flags/flag_engine.h, which
// the master's own code need not see).
struct ProgramFlags;
struct FlagSpec;
const ProgramFlags& MasterProgram();
const std::vector<FlagSpec>& MasterFlagSpecs();

absl::StatusOr<MasterFlagsResult> ResolveMasterFlags(int argc, const char* const* argv,
                                                     const std::map<std::string, std::string>& env);

}  // namespace mxrun

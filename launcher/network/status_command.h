#pragma once
// `mxrun status --rdzv_endpoint=H:P [--rdzv_id=ID] [--json] [--watch[=SECONDS]]`, or with
// --rdzv_backend=etcd --rdzv_endpoint=ETCD[,ETCD...] and --rdzv_id=ID (or
// --rdzv_conf=master_service=NAME), which finds the master elected in etcd: asks a master for its
// runs and prints, per run, its phase, round, restarts spent, failures by cause, and every node
// with its rank, address, workers and state. --json prints the same as one JSON object;
// --watch shows it again every SECONDS (default 2) until SIGINT or SIGTERM (exit 0). The token
// is the agents' own: --rdzv_conf token_file=PATH, else MXRUN_RDZV_TOKEN.
// Exit 0 when answered, 2 for bad flags, 3 when the master cannot be reached.

#include <string>

#include "mxrun.grpc.pb.h"

namespace mxrun {

int RunStatusCommand(int argc, char** argv);

// One query and its output; `clear` first clears the terminal (--watch). `token`: the
// rendezvous token the master requires ("" for none).
int ShowStatus(v1::Rendezvous::Stub& stub, const std::string& address, const std::string& run_id,
               const std::string& token, double timeout_s, bool json, bool clear);
int WatchStatus(v1::Rendezvous::Stub& stub, const std::string& address, const std::string& run_id,
                const std::string& token, double timeout_s, bool json, double every_s);
// The reply as --json prints it.
std::string StatusJson(const v1::StatusReply& reply, const std::string& address);

}  // namespace mxrun

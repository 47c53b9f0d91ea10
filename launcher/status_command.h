#pragma once
// `mxrun status --rdzv_endpoint=H:P [--rdzv_id=ID]`, or with --rdzv_backend=etcd
// --rdzv_endpoint=ETCD[,ETCD...] and --rdzv_id=ID (or --rdzv_conf=master_service=NAME), which finds
// the master elected in etcd: asks a master for its runs and prints, per run,
// its phase, round, restarts spent, and every node with its rank, address, workers and state.
// Exit 0 when answered, 2 for bad flags, 3 when the master cannot be reached.

namespace mxrun {

int RunStatusCommand(int argc, char** argv);

}  // namespace mxrun

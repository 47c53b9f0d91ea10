#pragma once
// What to run on this node and how: the same for every attempt (the launcher fills it, the
// worker group and the in-process restart read it).

#include <string>
#include <vector>

#include "agent/node/numa_binding.h"
#include "agent/workers/log_spec.h"
#include "common/env_contract.h"

namespace mxrun {

struct WorkerSpec {
  std::string executable;         // resolved path for execve
  std::vector<std::string> argv;  // argv[0] included; "${local_rank}" is substituted
  EnvMap base_env;                // the agent's environment
  std::string role = "default";
  std::string host_name;
  LogSpec logs;
  std::string attempts_dir;        // per-attempt folders (error files, logs) are made here
  bool attempts_dir_kept = false;  // false: a scratch folder removed at exit (paths not shown)
  size_t last_lines = 10;          // kept per worker for the failure summary
  bool json_logs = false;          // --log_format=json: console lines as JSON objects, and the
                                   // agent's failure summary as one log record
  bool heartbeat_files = false;    // give each worker MXRUN_HEARTBEAT_FILE (--hang_timeout)
  std::string timer_file;          // the FileTimer pipe for TORCHELASTIC_TIMER_FILE (or empty)
  // Where each rank's MXRUN_FLIGHT_SOCKET is made (fr-<local_rank>.sock); empty: none is given
  // (the flight recorder is off, or the folder's path is too long for a Unix socket).
  std::string flight_socket_dir;
  int standby_workers = 0;                // spare processes kept loaded for in-process restarts
  std::vector<std::string> standby_argv;  // how a standby starts (empty: as a worker, argv)
  // --prestart: the standbys are pre-started interpreters for an ordinary script, one per local
  // rank; they start with the group's workers, and in a later round kPrestartDelay after it
  // (standby_start.h: its workers say neither "joined" nor progress), and a group with ready
  // ones is kept on a failure so that Reassign hands them the ranks (python/mxrun/_prestart.py).
  bool prestart = false;
  bool virtual_local_rank = false;   // LOCAL_RANK=0 and one device in CUDA_VISIBLE_DEVICES
  std::string line_prefix_template;  // console line prefix (line_prefix.h); empty: mxrun's
  std::vector<WorkerBinding> numa;   // --numa-binding, by local rank (empty: none); a standby
                                     // is unbound until it takes a rank, then re-pinned
};

}  // namespace mxrun

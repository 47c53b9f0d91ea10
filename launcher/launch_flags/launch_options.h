#pragma once
// What `mxrun` was asked to do: a plain value, filled by the flag groups beside this file (each
// mechanism's group fills its own part, units converted) and read by the launcher's main, the
// rendezvous set-up and the agent's configuration.

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "agent/agent_settings.h"
#include "agent/hang/hang_watch.h"
#include "agent/node/numa_binding.h"
#include "agent/workers/log_spec.h"
#include "common/straggler_watch.h"
#include "rendezvous/node_topology.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

struct NodeRange {
  int min = 1;
  int max = 1;
};

enum class EntrypointKind { kPythonScript, kPythonModule, kExecutable, kBundledTrainer };

// --hang_timeout when the entrypoint is the bundled trainer and the flag is not given. The trainer
// beats after every step, every evaluation batch and every second of a checkpoint write, so this
// only has to exceed the slowest healthy step: a ResNet-101 step at batch 256 takes about a minute
// on a slow CPU host and well under a second on a GPU. Five minutes leaves a wide margin yet
// catches a stuck collective in half the time NCCL's own 10-minute watchdog takes (Gloo's default
// is 30).
inline constexpr double kTrainerHangTimeoutSeconds = 300;

struct MetricsEndpointFlags {
  int port = -1;          // --metrics_port: -1 off, 0 a free port (agent_metrics.h)
  bool bind_all = false;  // --metrics_bind_all
  bool tls = false;       // --metrics_tls: HTTPS with the job's --rdzv_conf certificates
};

struct LaunchOptions {
  // The job and its rendezvous (job_flags.cc).
  NodeRange nnodes;
  std::string nproc_per_node = "1";  // integer, gpu, cpu or auto (resolved later, see nproc.h)
  int node_rank = 0;
  bool node_rank_given = false;  // --node_rank or PET_NODE_RANK was set explicitly
  // ... or by the scheduler (SLURM_NODEID): a rank the network's order may replace
  // (rendezvous/node_topology.h), while node 0 still hosts the master.
  bool node_rank_from_scheduler = false;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  // The endpoint is Slurm's default (slurm.h): the master is on one of the ports from its port on,
  // and the agents find which by asking (launcher/network/rendezvous_setup_network.cc).
  bool rdzv_endpoint_from_slurm = false;
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;
  bool standalone = false;  // --standalone as given
  // torchrun 2.12+: one node, static, no --rdzv_endpoint and no --master_port from any source runs
  // as --standalone (a private rendezvous on localhost:0, a random run id). RunsStandalone.
  bool standalone_implied = false;
  int max_restarts = 0;
  double monitor_interval = 0.1;  // accepted for compatibility; mxrun is event-driven
  std::string role = "default";
  std::string local_addr;
  // Who hosts the workers' TCPStore (workers_store_flags.cc): the agent (true), or global rank 0.
  bool agent_store = true;

  // The workers' output (log_flags.cc).
  LogSpec logs;            // --log_dir, -r, -t, --local_ranks_filter, duplicate filters
  bool json_logs = false;  // --log_format=json
  std::string log_line_prefix_template;  // empty: mxrun's "[n<node> r<rank>] "

  // The agent's own knobs (agent/agent_settings.h), filled by the stop, failure, straggler,
  // health and GPU-reclaim groups and handed to the agent whole.
  AgentSettings agent;

  // Stopping (stop_flags.cc), what the launcher itself needs of it.
  std::string signals_to_handle_text;  // as given: TORCHELASTIC_SIGNALS_TO_HANDLE, as torchrun sets
  // Under Slurm with no grace given (from any source): the default is shortened to fit KillWait
  // (slurm_kill_wait.h).
  bool grace_fits_kill_wait = false;

  HangSettings hang;            // hang_flags.cc (the bundled trainer's default applied)
  bool file_timer = false;      // TORCHELASTIC_ENABLE_FILE_TIMER=1: torchrun's watchdog
  std::string file_timer_path;  // TORCHELASTIC_TIMER_FILE (empty: a private path)
  std::chrono::milliseconds uninterruptible_timeout{0};  // torchrun's D-state watch (0: off)
  std::string stack_dumper;                              // MXRUN_STACK_DUMPER (empty: choose)
  int standby_workers = 0;          // standby_flags.cc (the bundled trainer's default applied)
  bool prestart = false;            // python/mxrun/_prestart.py
  bool virtual_local_rank = false;  // placement_flags.cc
  std::optional<NumaMode> numa_binding;
  std::string event_log_handler = "null";  // event_flags.cc: null | console
  ExclusionRule exclusion;                 // exclusion_flags.cc
  MetricsEndpointFlags metrics;            // metrics_flags.cc
  RankOrderSettings rank_order;            // rank_order_flags.cc (rendezvous/node_topology.h)

  // What to run (entrypoint_flags.cc).
  EntrypointKind entrypoint_kind = EntrypointKind::kPythonScript;
  std::string entrypoint;  // script, module, program, or "train"
  std::vector<std::string> entrypoint_args;
};

// --standalone, given or implied (torchrun 2.12+'s one-node default, LaunchOptions above).
inline bool RunsStandalone(const LaunchOptions& o) { return o.standalone || o.standalone_implied; }

}  // namespace mxrun

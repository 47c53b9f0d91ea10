#pragma once
// mxrun's command line: torchrun's flags in both spellings (--nproc_per_node, --nproc-per-node),
// validated into one LaunchOptions value. Each flag's value comes from the first of these that
// gives it:
//   1. the command line;
//   2. MXRUN_<FLAG> in the environment (MXRUN_NPROC_PER_NODE);
//   3. PET_<FLAG>, as torchrun reads it;
//   4. for --master_addr and --master_port only, MASTER_ADDR and MASTER_PORT (Kubeflow's
//      PyTorchJob sets these);
//   5. the --config file (its path itself from 1-3: --config, MXRUN_CONFIG, PET_CONFIG);
//   6. under Slurm, what SLURM_* implies (slurm.h);
//   7. the default.
// Errors are InvalidArgument with a message naming the flag and where its value came from, the bad
// value and what is accepted; main turns them into exit code 2.

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "agent/log_spec.h"

namespace mxrun {

struct NodeRange {
  int min = 1;
  int max = 1;
};

enum class EntrypointKind { kPythonScript, kPythonModule, kExecutable, kBundledTrainer };

// --hang_timeout when the entrypoint is the bundled trainer and the flag is not given. The trainer
// beats after every step, every evaluation batch and every second of a checkpoint write, so this
// only has to exceed the slowest healthy step: a ResNet-101 step at batch 256 takes about a minute on
// a slow CPU host and well under a second on a GPU. Five minutes leaves a wide margin yet catches a
// stuck collective in half the time NCCL's own 10-minute watchdog takes (Gloo's default is 30).
inline constexpr double kTrainerHangTimeoutSeconds = 300;

struct LaunchOptions {
  NodeRange nnodes;
  std::string nproc_per_node = "1";   // integer, gpu, cpu or auto (resolved later, see nproc.h)
  int node_rank = 0;
  bool node_rank_given = false;       // --node_rank or PET_NODE_RANK was set explicitly
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  // The endpoint is Slurm's default (slurm.h): the master is on one of the ports from its port on,
  // and the agents find which by asking (launcher/rendezvous_setup_network.cc).
  bool rdzv_endpoint_from_slurm = false;
  std::string rdzv_id = "none";
  std::map<std::string, std::string> rdzv_conf;
  bool standalone = false;            // --standalone as given
  // torchrun 2.12+: one node, static, no --rdzv_endpoint and no --master_port from any source runs
  // as --standalone (a private rendezvous on localhost:0, a random run id). RunsStandalone.
  bool standalone_implied = false;
  int max_restarts = 0;
  double monitor_interval = 0.1;      // accepted for compatibility; mxrun is event-driven
  std::string role = "default";
  std::string local_addr;
  std::string log_dir;
  std::string log_format = "text";    // text | json
  PerRankStd redirects;
  PerRankStd tee;
  std::set<int> local_ranks_filter;
  std::set<int> signals_to_handle;
  std::string signals_to_handle_text;  // as given: TORCHELASTIC_SIGNALS_TO_HANDLE, as torchrun sets
  double term_timeout_seconds = 30;
  bool term_timeout_given = false;    // from any source but the default (under Slurm, the default
                                      // is shortened to fit KillWait: slurm_kill_wait.h)
  // Hang detection (agent/hang_watch.h). nullopt: not given, which means off, except for the
  // bundled trainer (kTrainerHangTimeoutSeconds). 0 turns a rule off.
  std::optional<double> hang_timeout_seconds;
  double exit_barrier_timeout_seconds = 300;
  // Spare workers per node for in-process restarts (agent/worker_group.h). nullopt: not given,
  // which means 1 for the bundled trainer and 0 for anything else.
  std::optional<int> standby_workers;
  // Pre-started interpreters for an ordinary Python script (python/mxrun/_prestart.py): one
  // standby per local rank with torch imported, which a restarted group runs the script in.
  bool prestart = false;

  // torchrun 2.x's newer flags.
  bool virtual_local_rank = false;    // LOCAL_RANK=0, CUDA_VISIBLE_DEVICES = the worker's device
  std::string numa_binding;           // "", node, socket, exclusive, core-complex (agent/numa_*.h)
  std::string log_line_prefix_template;  // empty: mxrun's "[n<node> r<rank>] "
  std::vector<std::string> duplicate_stdout_filters;  // substrings; empty: no filtered file
  std::vector<std::string> duplicate_stderr_filters;
  std::string event_log_handler = "null";  // null | console
  double straggler_factor = 1.5;      // common/straggler_watch.h
  int straggler_steps = 20;           // 0: never judged
  bool straggler_restart = false;     // a straggler fails the group (a restart, from the budget)
  int do_not_requeue_exit_code = 93;
  int exclude_after = 2;              // a node's worker failures that leave it out (0: never)
  double exclude_window_s = 3600;     // ... within this many seconds
  double exclude_backoff_s = 300;     // left out this long, doubled at each exclusion
  double gpu_reclaim_timeout_s = 50;  // wait for the old workers' GPU memory (0: never)
  int gpu_reclaim_threshold_mib = 512;
  double gpu_reclaim_interval_s = 2;
  bool health_checks = true;          // --health_checks=on|off (agent/health_check.h)
  std::string health_check;           // the user's check: a shell command, exit 0 = healthy
  double health_check_timeout_s = 60;
  double health_check_interval_s = 0;  // 0: before joins only
  std::vector<std::string> health_folders;
  int health_min_disk_mib = 1024;
  int health_min_gpu_free_mib = 1024;  // every attempt failed alike (0: exit 1 as for any failure)
  int metrics_port = -1;              // --metrics_port: -1 off, 0 a free port (agent_metrics.h)
  bool metrics_bind_all = false;
  bool metrics_tls = false;           // HTTPS with the job's --rdzv_conf certificates

  EntrypointKind entrypoint_kind = EntrypointKind::kPythonScript;
  std::string entrypoint;             // script, module, program, or "train"
  std::vector<std::string> entrypoint_args;
};

// Parses argv (argv[0] is the program name). `env` supplies the MXRUN_*, PET_*, MASTER_* and
// SLURM_* values. A request for help or the version, and --print-config, are reported as the
// returned `help_text` with no options. --print-config checks the configuration as a launch does
// first (CheckRendezvousFlags) and is an error where a launch would be one; only the entrypoint may
// be missing, and what depends on this machine (its GPUs, the entrypoint on its disk) is a warning.
struct ParseResult {
  std::optional<LaunchOptions> options;
  std::string help_text;              // set for --help / --version / --print-config
  std::vector<std::string> notices;   // one-line notes for the user (values inferred from Slurm)
  std::vector<std::string> warnings;  // what a launch logs as warnings; with --print-config also
                                      // where a launch on this machine would stop
};
absl::StatusOr<ParseResult> ParseLaunchOptions(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env);

// The flags ParseLaunchOptions reads, in --help's order (--help and --version, which CLI11 adds,
// are not among them): what launcher/completion.h writes shell completion from. Each name (with
// underscores) is also accepted with dashes.
struct FlagDescription {
  std::string name;         // "nproc_per_node"
  std::string short_name;   // "-m", or empty
  bool takes_value = true;  // false: a boolean flag
  std::string help;
  std::string default_value;
};
std::vector<FlagDescription> DescribeLaunchFlags();

// --standalone, given or implied (torchrun 2.12+'s one-node default, LaunchOptions above).
inline bool RunsStandalone(const LaunchOptions& o) { return o.standalone || o.standalone_implied; }

// "N" or "MIN:MAX" with 0 < MIN <= MAX.
absl::StatusOr<NodeRange> ParseNodeRange(absl::string_view text);
// torchrun's comma-separated filter list: ",," stands for a comma; an empty text is no filter. An
// empty item (which would match every line) is an error.
absl::StatusOr<std::vector<std::string>> ParseFilterList(absl::string_view text);
// "k=v,k=v" (empty: none).
absl::StatusOr<std::map<std::string, std::string>> ParseRdzvConf(absl::string_view text);

}  // namespace mxrun

// mxrun: the launcher's entry point. Parses and validates the command line, resolves what to run,
// prepares the node (subreaper, guardian, log folders) and hands over to the elastic agent.

#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_format.h"
#include "agent/elastic_agent.h"
#include "agent/node/gpu_devices.h"
#include "agent/node/numa_binding.h"
#include "agent/process/death_guardian.h"
#include "common/env_contract.h"
#include "common/files.h"
#include "common/strings.h"
#include "launcher/agent_setup.h"
#include "launcher/completion.h"
#include "launcher/entrypoint.h"
#include "launcher/hang_setup.h"
#include "launcher/log_setup.h"
#include "launcher/metrics_setup.h"
#include "launcher/node_setup.h"
#include "launcher/nproc.h"
#include "launcher/options.h"
#include "launcher/prestart.h"
#include "launcher/rendezvous_setup.h"
#if MXRUN_NETWORK_BUILD
#include "launcher/network/metrics_setup_network.h"
#include "launcher/network/status_command.h"
#endif
#include "spdlog/spdlog.h"

extern char** environ;

namespace mxrun {
namespace {

int UsageError(absl::string_view message) {
  std::fprintf(stderr, "mxrun: error: %.*s\n", static_cast<int>(message.size()), message.data());
  return kExitUsage;
}

#if !MXRUN_NETWORK_BUILD
// Replaces this process with the sibling binary `name` installed beside it, same arguments.
int ExecSibling(const char* name, char** argv) {
  const std::string path = SelfDir() + "/" + name;
  execv(path.c_str(), argv);
  std::fprintf(stderr,
               "mxrun: error: this job needs %s (the multi-node build of mxrun), which "
               "cannot be run: %s: %s\n",
               name, path.c_str(), ErrnoText(errno).c_str());
  return kExitUsage;
}
#endif

// A random run id in the shape of Python's uuid4, as torchrun --standalone uses.
std::string RandomRunId() {
  unsigned char b[16] = {};
  std::ifstream urandom("/dev/urandom", std::ios::binary);
  urandom.read(reinterpret_cast<char*>(b), sizeof b);
  b[6] = (b[6] & 0x0f) | 0x40;
  b[8] = (b[8] & 0x3f) | 0x80;
  return absl::StrFormat("%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

// The parser's notes for the user, on stderr as log lines.
void LogNotes(const ParseResult& parsed) {
  for (const std::string& notice : parsed.notices) spdlog::info("{}", notice);
  for (const std::string& warning : parsed.warnings) spdlog::warn("{}", warning);
}

int Main(int argc, char** argv) {
  const EnvMap env = EnvFromStrings(environ);
  if (std::optional<std::string> shell = FindPrintCompletion(argc, argv)) {  // as torchrun 2.14
    absl::StatusOr<std::string> script = CompletionScript(*shell);
    if (!script.ok()) return UsageError(script.status().message());
    std::fputs(script->c_str(), stdout);
    return kExitSuccess;
  }
  absl::StatusOr<ParseResult> parsed = ParseLaunchOptions(argc, argv, env);
  if (!parsed.ok()) return UsageError(parsed.status().message());
  if (!parsed->options) {  // --help, --version, or --print-config (checked, see options.h)
    if (!parsed->notices.empty() || !parsed->warnings.empty()) {
      ConfigureLogging(false);
      LogNotes(*parsed);
    }
    std::fputs(parsed->help_text.c_str(), stdout);
    return kExitSuccess;
  }
  const LaunchOptions& options = *parsed->options;
#if !MXRUN_NETWORK_BUILD
  // HTTPS for the metrics (OpenSSL) is linked into mxrun-multinode only, as gRPC is.
  if (NeedsNetwork(options) || options.metrics.tls) return ExecSibling("mxrun-multinode", argv);
#endif

  absl::StatusOr<RendezvousSettings> settings = CheckRendezvousFlags(options, env);
  if (!settings.ok()) return UsageError(settings.status().message());
  absl::StatusOr<int> nproc = ResolveNprocPerNode(options.nproc_per_node, env);
  if (!nproc.ok()) return UsageError(nproc.status().message());
  absl::StatusOr<WorkerCommand> command = BuildWorkerCommand(options, env, SelfDir());
  if (!command.ok()) return UsageError(command.status().message());

  ConfigureLogging(options.json_logs);
  LogNotes(*parsed);
  // Signals become events on the agent's signalfd. They are blocked before any thread exists (the
  // master and the rendezvous client start gRPC threads), so no other thread can take them.
  sigset_t blocked;
  sigemptyset(&blocked);
  sigaddset(&blocked, SIGCHLD);
  for (int signo : options.agent.handled_signals) sigaddset(&blocked, signo);
  sigprocmask(SIG_BLOCK, &blocked, nullptr);
  const std::string run_id = RunsStandalone(options) ? RandomRunId() : options.rdzv_id;

  absl::StatusOr<AgentConfig> composed = ComposeAgentConfig(options, env, *command, *nproc, run_id);
  if (!composed.ok()) return UsageError(composed.status().message());
  AgentConfig config = std::move(*composed);
  WorkerSpec& worker = config.worker;

  absl::StatusOr<std::string> scratch = SetUpScratch(options, env, run_id, worker);
  if (!scratch.ok()) return UsageError(scratch.status().message());
  const std::string scratch_dir = *scratch;
  // Removed on every way out (the guardian does it too, for when mxrun dies before that).
  absl::Cleanup remove_scratch = [&scratch_dir] { RemoveTree(scratch_dir); };

  if (options.numa_binding) worker.numa = PlanBinding(*options.numa_binding, env, *nproc);

  if (options.prestart) {
    if (absl::Status prestart = ConfigurePrestart(*command, *nproc, worker); !prestart.ok()) {
      return UsageError(prestart.message());
    }
  }

  if (absl::Status hang =
          SetUpHangDetection(options, *command, env, scratch_dir, *nproc, run_id, config);
      !hang.ok()) {
    return UsageError(hang.message());
  }

  if (ShouldDefaultOmpThreads(env, *nproc)) {
    spdlog::info(
        "setting OMP_NUM_THREADS=1 for each of the {} workers to avoid overloading the cores; "
        "set it yourself to tune",
        *nproc);
  }

  // Orphaned grandchildren are re-parented to us, so nothing escapes the stop.
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  signal(SIGPIPE, SIG_IGN);
  absl::StatusOr<DeathGuardian> guardian = DeathGuardian::Start(scratch_dir);
  if (!guardian.ok()) {
    spdlog::error("{}", std::string(guardian.status().message()));
    return kExitWorkersFailed;
  }
  const std::string host_name = config.worker.host_name;
#if MXRUN_NETWORK_BUILD
  if (NeedsNetwork(options) && options.rank_order.mode != RankOrderMode::kHost) {
    settings->nvlink_domain = NvlinkDomainOf(env);  // NVML: its own GPUs' NVLink domain
  }
  absl::StatusOr<NodeRendezvous> rdzv =
      NeedsNetwork(options) ? SetUpNetworkRendezvous(options, *settings, *nproc, host_name)
                            : SetUpLocalRendezvous(options, *nproc, run_id);
#else
  absl::StatusOr<NodeRendezvous> rdzv = SetUpLocalRendezvous(options, *nproc, run_id);
#endif
  if (!rdzv.ok()) {
    if (absl::IsInvalidArgument(rdzv.status())) return UsageError(rdzv.status().message());
    spdlog::error("{}", std::string(rdzv.status().message()));
    return kExitRendezvousFailed;
  }
  if (rdzv->master) spdlog::info("hosting the rendezvous master on {}", rdzv->master_address);
  if (options.nnodes.max > 1) spdlog::info("{}", rdzv->description);
  config.rendezvous_description = rdzv->description;
  MetricsServing serving;
#if MXRUN_NETWORK_BUILD
  absl::StatusOr<MetricsServing> networked = NetworkMetricsServing(options, *settings, *rdzv);
  if (!networked.ok()) return UsageError(networked.status().message());
  serving = std::move(*networked);
#endif
  absl::StatusOr<AgentMetricsEndpoint> metrics =
      StartAgentMetrics(options, run_id, *rdzv, std::move(serving), config);
  if (!metrics.ok()) return UsageError(metrics.status().message());
  ElasticAgent agent(std::move(config), *rdzv->rendezvous, *guardian);
  const int exit_code = agent.Run();
  rdzv->rendezvous.reset();
  if (rdzv->before_exit) rdzv->before_exit();
  return exit_code;
}

}  // namespace
}  // namespace mxrun

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "status") {
#if MXRUN_NETWORK_BUILD
    return mxrun::RunStatusCommand(argc, argv);
#else
    return mxrun::ExecSibling("mxrun-multinode", argv);
#endif
  }
  return mxrun::Main(argc, argv);
}

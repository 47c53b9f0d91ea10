#include "launcher/network/status_command.h"

#include <grpcpp/grpcpp.h>

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <map>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/tls_files.h"
#include "launcher/launch_flags/value_parsers.h"
#include "launcher/network/status_flags.h"
#include "launcher/token.h"
#include "mxrun.grpc.pb.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/grpc/proto_convert.h"
#include "rendezvous/grpc/tls_credentials.h"
#include "rendezvous/net.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {
namespace {

// The address of the master elected in etcd for run `run_id` (or for service master_service).
// Errors: InvalidArgument for bad flags; Unavailable when etcd cannot be read or nobody leads.
absl::StatusOr<std::string> FindEtcdMaster(const std::string& endpoints, const std::string& run_id,
                                           const std::string& conf_text) {
  absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf(conf_text);
  if (!conf.ok()) return conf.status();
  std::map<std::string, std::string> kv = *conf;
  for (const auto& [key, value] : kv) {
    if (key != "protocol" && key != "cacert" && key != "cert" && key != "key" &&
        key != "etcd_prefix" && key != "master_service" && key != "master_cert" &&
        key != "master_key" && key != "master_cacert" && key != "token_file") {
      return absl::InvalidArgumentError(
          absl::StrCat("error: --rdzv_conf key '", key,
                       "' is not known here; accepted: protocol, cacert, cert, key, etcd_prefix, "
                       "master_service, master_cert, master_key, master_cacert, token_file"));
    }
  }
  absl::StatusOr<EtcdConfig> etcd =
      ParseEtcdConfig(endpoints, kv["protocol"], kv["cacert"], kv["cert"], kv["key"]);
  if (!etcd.ok())
    return absl::InvalidArgumentError(absl::StrCat("error: ", etcd.status().message()));
  const std::string prefix = kv.count("etcd_prefix") ? kv["etcd_prefix"] : kDefaultEtcdPrefix;
  if (absl::Status valid = ValidateEtcdPrefix(prefix); !valid.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("error: --rdzv_conf ", valid.message()));
  }
  if (kv["master_service"].empty() && run_id.empty()) {
    return absl::InvalidArgumentError(
        "error: with --rdzv_backend=etcd give --rdzv_id (the job's master) or --rdzv_conf "
        "master_service=NAME (an mxrun-master service)");
  }
  const EtcdMasterKeys keys = kv["master_service"].empty()
                                  ? EtcdKeysForRun(prefix, run_id)
                                  : EtcdKeysForService(prefix, kv["master_service"]);
  absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(*etcd);
  if (!client.ok()) return absl::InvalidArgumentError(client.status().message());
  absl::StatusOr<std::optional<EtcdKeyValue>> leader = (*client)->Get(keys.leader());
  if (!leader.ok()) {
    return absl::UnavailableError(
        absl::StrCat("cannot read ", keys.leader(), " from etcd: ", leader.status().message()));
  }
  const std::string address =
      leader->has_value() ? DecodeLeaderValue((*leader)->value).address : std::string();
  if (address.empty()) {
    return absl::UnavailableError(absl::StrCat("no master serves ", keys.prefix,
                                               " in etcd now (none elected, or one starting)"));
  }
  return address;
}

}  // namespace

std::string StatusJson(const v1::StatusReply& reply, const std::string& address) {
  nlohmann::json runs = nlohmann::json::array();
  for (const v1::RunStatus& run : reply.runs()) {
    nlohmann::json members = nlohmann::json::array();
    nlohmann::json stragglers = nlohmann::json::array();
    for (const v1::MemberStatus& m : run.members()) {
      nlohmann::json ranks = nlohmann::json::array();
      for (const v1::RankStatus& r : m.ranks()) {
        nlohmann::json rank = {{"rank", r.global_rank()},
                               {"local_rank", r.local_rank()},
                               {"step", r.step()},
                               {"step_seconds", nullptr},
                               {"steps_per_second", nullptr},
                               {"last_report_s_ago", r.last_report_s_ago()},
                               {"straggler", r.straggler()}};
        if (r.step_seconds() >= 0) rank["step_seconds"] = r.step_seconds();
        if (r.step_seconds() > 0) rank["steps_per_second"] = 1.0 / r.step_seconds();
        ranks.push_back(std::move(rank));
        if (r.straggler()) stragglers.push_back({{"rank", r.global_rank()}, {"host", m.host()}});
      }
      members.push_back({{"node_rank", m.node_rank()},
                         {"host", m.host()},
                         {"address", m.address()},
                         {"workers", m.local_world_size()},
                         {"state", m.state()},
                         {"last_seen_s_ago", m.last_seen_s_ago()},
                         {"ranks", std::move(ranks)}});
      if (!m.note().empty()) members.back()["note"] = m.note();
      if (!m.topology().empty()) members.back()["topology"] = m.topology();
    }
    nlohmann::json failures = nlohmann::json::object();
    for (const auto& [cause, count] : run.failures()) failures[cause] = count;
    runs.push_back(
        {{"run_id", run.run_id()},
         {"phase", run.phase()},
         {"round", run.round()},
         {"min_nodes", run.min_nodes()},
         {"max_nodes", run.max_nodes()},
         {"world_size", run.world_size()},
         {"restarts_spent", run.restarts_spent()},
         {"max_restarts", run.max_restarts()},
         {"failures", failures},
         {"last_recovery_s", nullptr},
         {"unhealthy", std::vector<std::string>(run.unhealthy().begin(), run.unhealthy().end())},
         {"stragglers", stragglers},
         {"members", members}});
  }
  for (size_t i = 0; i < runs.size(); ++i) {
    const v1::RunStatus& run = reply.runs(static_cast<int>(i));
    if (run.last_recovery_s() >= 0) runs[i]["last_recovery_s"] = run.last_recovery_s();
    nlohmann::json restarts = nlohmann::json::array();
    for (const v1::RestartPhases& p : run.restarts()) {
      const RestartPhases phases = FromProto(p);
      nlohmann::json restart{{"round", phases.round},
                             {"cause", phases.cause},
                             {"in_process", phases.in_process},
                             {"nodes", phases.nodes},
                             {"total_s", phases.TotalSeconds()}};
      // Per phase, the slowest node's seconds; null where no node could time it.
      for (const std::string& name : RestartPhaseNames()) {
        const double seconds = PhaseSeconds(phases, name);
        restart[name + "_s"] = seconds < 0 ? nlohmann::json(nullptr) : nlohmann::json(seconds);
      }
      restarts.push_back(std::move(restart));
    }
    runs[i]["restarts"] = std::move(restarts);
  }
  nlohmann::json out{{"master", address}, {"runs", runs}};
  if (!reply.serves_only_run_id().empty()) out["serves_only_run_id"] = reply.serves_only_run_id();
  return out.dump();
}

int RunStatusCommand(int argc, char** argv) {
  const EnvMap env = EnvFromStrings(environ);
  absl::StatusOr<StatusFlagsResult> resolved = ResolveStatusFlags(argc, argv, env);
  if (!resolved.ok()) {
    std::fprintf(stderr, "mxrun status: error: %s\n",
                 std::string(resolved.status().message()).c_str());
    return 2;
  }
  if (!resolved->flags) {  // --help, --print-config
    std::fputs(resolved->text.c_str(), stdout);
    return 0;
  }
  const StatusFlags& flags = *resolved->flags;
  std::string endpoint = flags.endpoint;
  const std::string& run_id = flags.run_id;
  const std::string& rdzv_conf = flags.rdzv_conf;
  if (flags.etcd) {
    absl::StatusOr<std::string> found = FindEtcdMaster(endpoint, run_id, rdzv_conf);
    if (!found.ok()) {
      std::fprintf(stderr, "mxrun status: %s\n", std::string(found.status().message()).c_str());
      return absl::IsInvalidArgument(found.status()) ? 2 : 3;
    }
    endpoint = *found;
  }
  // --rdzv_conf may be the agents' own: the master's TLS files are used (with c10d cert, key and
  // cacert; with etcd master_cert, master_key and master_cacert, cert and the others being etcd's).
  TlsFiles tls;
  std::string token;
  {
    absl::StatusOr<std::map<std::string, std::string>> conf = ParseRdzvConf(rdzv_conf);
    if (!conf.ok()) {
      std::fprintf(stderr, "mxrun status: error: %s\n",
                   std::string(conf.status().message()).c_str());
      return 2;
    }
    // The agents' other keys (timeouts, is_host, ...) mean nothing to a status query.
    const std::string prefix = flags.etcd ? "master_" : "";
    tls.cert = (*conf)[prefix + "cert"];
    tls.key = (*conf)[prefix + "key"];
    tls.cacert = (*conf)[prefix + "cacert"];
    if (absl::Status checked = CheckTlsFiles(tls, "--rdzv_conf"); !checked.ok()) {
      std::fprintf(stderr, "mxrun status: error: %s\n", std::string(checked.message()).c_str());
      return 2;
    }
    // The same token the agents present: token_file, else MXRUN_RDZV_TOKEN, trimmed.
    const std::string token_file = (*conf)["token_file"];
    absl::StatusOr<std::string> read = ReadRendezvousToken(token_file, env);
    if (!read.ok()) {
      std::fprintf(stderr, "mxrun status: error: --rdzv_conf token_file=%s: %s\n",
                   token_file.c_str(), std::string(read.status().message()).c_str());
      return 2;
    }
    token = *read;
  }
  absl::StatusOr<HostPort> target = ParseHostPort(endpoint, kDefaultRendezvousPort);
  if (!target.ok()) {
    std::fprintf(stderr, "mxrun status: error: %s\n",
                 std::string(target.status().message()).c_str());
    return 2;
  }
  const std::string address = JoinHostPort(target->host, target->port);
  auto stub = v1::Rendezvous::NewStub(grpc::CreateChannel(address, ClientCredentials(tls)));
  if (flags.watch_s) {
    return WatchStatus(*stub, address, run_id, token, flags.timeout_s, flags.json, *flags.watch_s);
  }
  return ShowStatus(*stub, address, run_id, token, flags.timeout_s, flags.json, /*clear=*/false);
}

namespace {

volatile sig_atomic_t g_watch_stop = 0;
void StopWatching(int) { g_watch_stop = 1; }

// The ranks that reported progress, one line each: step, step time and rate, how long since
// the last report, and the straggler mark.
void PrintRanks(const v1::RunStatus& run) {
  bool header = false;
  for (const v1::MemberStatus& m : run.members()) {
    for (const v1::RankStatus& r : m.ranks()) {
      if (!header) {
        std::printf("  %-6s %-24s %-10s %-10s %-9s %-12s\n", "rank", "host", "step", "s/step",
                    "steps/s", "last report");
        header = true;
      }
      const std::string seconds =
          r.step_seconds() >= 0 ? absl::StrFormat("%.3f", r.step_seconds()) : "-";
      const std::string rate =
          r.step_seconds() > 0 ? absl::StrFormat("%.2f", 1.0 / r.step_seconds()) : "-";
      std::printf("  %-6d %-24s %-10lld %-10s %-9s %.1fs ago%s\n", r.global_rank(),
                  m.host().c_str(), static_cast<long long>(r.step()), seconds.c_str(), rate.c_str(),
                  r.last_report_s_ago(), r.straggler() ? "  STRAGGLER" : "");
    }
  }
}

}  // namespace

int WatchStatus(v1::Rendezvous::Stub& stub, const std::string& address, const std::string& run_id,
                const std::string& token, double timeout_s, bool json, double every_s) {
  struct sigaction stop = {};
  stop.sa_handler = StopWatching;
  sigaction(SIGINT, &stop, nullptr);
  sigaction(SIGTERM, &stop, nullptr);
  const bool clear = !json && isatty(STDOUT_FILENO);
  while (!g_watch_stop) {
    ShowStatus(stub, address, run_id, token, timeout_s, json, clear);  // an error is shown, retried
    std::fflush(stdout);
    // Sleeps in small steps, so that Ctrl-C ends it at once.
    for (double slept = 0; slept < every_s && !g_watch_stop; slept += 0.1) usleep(100'000);
  }
  return 0;
}

int ShowStatus(v1::Rendezvous::Stub& stub, const std::string& address, const std::string& run_id,
               const std::string& token, double timeout_s, bool json, bool clear) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)));
  context.set_wait_for_ready(true);
  if (!token.empty()) context.AddMetadata(kTokenMetadataKey, token);
  v1::StatusRequest request;
  request.set_run_id(run_id);
  v1::StatusReply reply;
  grpc::Status status = stub.GetStatus(&context, request, &reply);
  if (clear) std::fputs("\033[H\033[2J", stdout);  // the terminal's home, then clear
  if (!status.ok()) {
    std::fprintf(stderr, "mxrun status: the master at %s did not answer: %s\n", address.c_str(),
                 status.error_message().c_str());
    return status.error_code() == grpc::StatusCode::INVALID_ARGUMENT ? 2 : 3;
  }
  if (json) {
    std::printf("%s\n", StatusJson(reply, address).c_str());
    return 0;
  }
  if (reply.runs().empty()) {
    std::printf("no runs%s on %s\n", run_id.empty() ? "" : (" named " + run_id).c_str(),
                address.c_str());
    return 0;
  }
  for (const v1::RunStatus& run : reply.runs()) {
    std::printf("run %s: %s, round %d, nodes %d:%d, world size %d, restarts %d of %d\n",
                run.run_id().c_str(), run.phase().c_str(), run.round(), run.min_nodes(),
                run.max_nodes(), run.world_size(), run.restarts_spent(), run.max_restarts());
    std::string failures;
    for (const auto& [cause, count] :
         std::map<std::string, int64_t>(run.failures().begin(), run.failures().end())) {
      absl::StrAppend(&failures, failures.empty() ? "" : ", ", cause, " ", count);
    }
    if (!failures.empty()) {
      std::printf(
          "  failures: %s%s\n", failures.c_str(),
          run.last_recovery_s() >= 0
              ? absl::StrFormat("; the last recovered in %.1f s", run.last_recovery_s()).c_str()
              : "");
    }
    std::printf("  %-9s %-24s %-24s %-7s %-10s %s\n", "node_rank", "host", "address", "workers",
                "state", "last seen");
    for (const v1::MemberStatus& m : run.members()) {
      std::string rank = m.node_rank() < 0 ? "-" : std::to_string(m.node_rank());
      std::printf("  %-9s %-24s %-24s %-7d %-10s %.1fs ago\n", rank.c_str(), m.host().c_str(),
                  m.address().c_str(), m.local_world_size(), m.state().c_str(),
                  m.last_seen_s_ago());
      if (!m.note().empty())
        std::printf("            %s: %s\n", m.state().c_str(), m.note().c_str());
      if (!m.topology().empty()) std::printf("            topology: %s\n", m.topology().c_str());
    }
    for (const std::string& line : run.unhealthy()) std::printf("  unhealthy: %s\n", line.c_str());
    for (const v1::RestartPhases& p : run.restarts()) {
      std::printf("  %s\n", FormatRestartPhases(FromProto(p), /*number=*/0).c_str());
    }
    PrintRanks(run);
  }
  return 0;
}

}  // namespace mxrun

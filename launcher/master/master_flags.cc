#include "launcher/master/master_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/tls_files.h"
#include "launcher/flags/flag_engine.h"
#include "rendezvous/net.h"

namespace mxrun {
namespace {

using MasterFlagGroup = FlagGroup<MasterFlags>;

constexpr const char* kPrecedence = "flag > MXRUN_MASTER_* > config file > default";

MasterFlagGroup ListenFlags() {
  MasterFlagGroup group;
  group.flags = {
      {"host", "", false, "address to listen on", "127.0.0.1"},
      {"port", "", false, "port (0: any free port)", std::to_string(kDefaultRendezvousPort)},
      {"bind_all", "", true, "listen on every interface", ""},
  };
  group.apply = [](const FlagValues& v, MasterFlags& m) -> absl::Status {
    m.server.host = v.Trimmed("host");
    absl::StatusOr<int> port = v.Int("port", 0, 65535, "a TCP port 0-65535 (0: any free port)");
    if (!port.ok()) return port.status();
    m.server.port = *port;
    m.port_given = v.Given("port");
    m.server.bind_all = v.Bool("bind_all");
    return absl::OkStatus();
  };
  return group;
}

MasterFlagGroup AccessFlags() {
  MasterFlagGroup group;
  group.flags = {
      {"cert", "", false,
       "mutual TLS: this master's certificate (PEM; with --key and --cacert every agent and mxrun "
       "status must present a certificate from --cacert's CA)",
       ""},
      {"key", "", false, "mutual TLS: the private key of --cert (PEM)", ""},
      {"cacert", "", false, "mutual TLS: the CA of the job's certificates (PEM)", ""},
      {"token_file", "", false,
       "file holding the shared token every agent must present (else MXRUN_RDZV_TOKEN)", ""},
  };
  group.apply = [](const FlagValues& v, MasterFlags& m) -> absl::Status {
    m.server.tls = TlsFiles{v.Trimmed("cert"), v.Trimmed("key"), v.Trimmed("cacert")};
    if (absl::Status checked = CheckTlsFiles(m.server.tls, "mxrun-master"); !checked.ok()) {
      return checked;
    }
    m.token_file = v.Trimmed("token_file");
    return absl::OkStatus();
  };
  return group;
}

MasterFlagGroup StateFlags() {
  MasterFlagGroup group;
  group.flags = {
      {"state_dir", "", false,
       "keep the running jobs' rendezvous state here, so that after a crash and restart the "
       "agents reconnect and running workers carry on",
       ""},
  };
  group.apply = [](const FlagValues& v, MasterFlags& m) -> absl::Status {
    m.server.state_dir = v.Trimmed("state_dir");
    return absl::OkStatus();
  };
  return group;
}

// --rdzv_conf for an etcd replica: protocol, cacert, cert, key, lease_ttl, etcd_prefix.
absl::StatusOr<EtcdElectionConfig> EtcdSettings(const std::string& endpoints,
                                                const std::string& conf,
                                                const std::string& service) {
  std::map<std::string, std::string> kv;
  for (absl::string_view item : absl::StrSplit(conf, ',', absl::SkipWhitespace())) {
    std::pair<std::string, std::string> pair = absl::StrSplit(item, absl::MaxSplits('=', 1));
    const std::string key(absl::StripAsciiWhitespace(pair.first));
    if (key != "protocol" && key != "cacert" && key != "cert" && key != "key" &&
        key != "lease_ttl" && key != "etcd_prefix") {
      return absl::InvalidArgumentError(absl::StrCat(
          "--rdzv_conf key '", key,
          "' is not known; accepted: protocol, cacert, cert, key, lease_ttl, etcd_prefix"));
    }
    kv[key] = std::string(absl::StripAsciiWhitespace(pair.second));
  }
  EtcdElectionConfig config;
  absl::StatusOr<EtcdConfig> etcd =
      ParseEtcdConfig(endpoints, kv["protocol"], kv["cacert"], kv["cert"], kv["key"]);
  if (!etcd.ok()) return etcd.status();
  config.etcd = std::move(*etcd);
  if (kv.count("lease_ttl")) {
    int ttl = 0;
    if (!absl::SimpleAtoi(kv["lease_ttl"], &ttl) || ttl < 1 || ttl > 3600) {
      return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf lease_ttl=", kv["lease_ttl"],
                                                     " is not valid; accepted: 1 to 3600 s"));
    }
    config.lease_ttl = std::chrono::seconds(ttl);
  }
  std::string prefix = kv.count("etcd_prefix") ? kv["etcd_prefix"] : kDefaultEtcdPrefix;
  if (absl::Status valid = ValidateEtcdPrefix(prefix); !valid.ok()) return valid;
  if (absl::Status valid = ValidateServiceName(service); !valid.ok()) return valid;
  config.keys = EtcdKeysForService(prefix, service);
  return config;
}

MasterFlagGroup ElectionFlags() {
  MasterFlagGroup group;
  group.flags = {
      {"rdzv_backend", "", false,
       "etcd (or etcd-v2): be one replica of a master service elected in etcd (none: a single "
       "master)",
       "none"},
      {"rdzv_endpoint", "", false, "with etcd: the members, HOST:PORT[,HOST:PORT...]", ""},
      {"rdzv_conf", "", false,
       "with etcd: protocol, cacert, cert, key, lease_ttl, etcd_prefix (KEY=VALUE,...)", "", true,
       "", true},
      {"service", "", false,
       "with etcd: the master service this replica stands for; agents follow it with "
       "--rdzv_conf=master_service=NAME",
       "default"},
  };
  group.apply = [](const FlagValues& v, MasterFlags& m) -> absl::Status {
    const std::string backend = v.Lower("rdzv_backend");
    m.service = v.Trimmed("service");
    if (backend == "etcd" || backend == "etcd-v2") {
      if (!m.server.state_dir.empty()) {
        return absl::InvalidArgumentError(
            "--state_dir and --rdzv_backend=etcd go not together: "
            "with etcd the state is kept in etcd");
      }
      absl::StatusOr<EtcdElectionConfig> config =
          EtcdSettings(v.Trimmed("rdzv_endpoint"), v.Text("rdzv_conf"), m.service);
      if (!config.ok()) return config.status();
      m.election = std::move(*config);
      // Replicas on one machine must not collide: on a free port unless one is given.
      if (!m.port_given) m.server.port = 0;
    } else if (backend != "none") {
      return v.Invalid("rdzv_backend", "unknown backend",
                       "etcd, etcd-v2 (or leave it out for a single master)");
    } else if (!v.Empty("rdzv_endpoint") || !v.Empty("rdzv_conf")) {
      return absl::InvalidArgumentError("--rdzv_endpoint and --rdzv_conf need --rdzv_backend=etcd");
    }
    return absl::OkStatus();
  };
  return group;
}

MasterFlagGroup MetricsFlags() {
  MasterFlagGroup group;
  group.flags = {
      {"metrics_port", "", false,
       absl::StrCat("serve Prometheus metrics and the status page on this port (default ",
                    kDefaultMasterMetricsPort,
                    ", or a free one with --port=0 or etcd; 0: a free one; off: none)"),
       ""},
      {"metrics_tls", "", true,
       "serve the metrics over HTTPS with --cert, --key and --cacert (scrapers must present a "
       "certificate from the CA)",
       ""},
  };
  group.apply = [](const FlagValues& v, MasterFlags& m) -> absl::Status {
    // The default: a free port when the rendezvous port is the kernel's pick, so that ephemeral
    // masters (and etcd replicas) never contend for one port.
    m.metrics_port = m.server.port == 0 ? 0 : kDefaultMasterMetricsPort;
    m.metrics_port_given = !v.Empty("metrics_port");
    if (v.Lower("metrics_port") == "off") {
      m.metrics_port = -1;
    } else if (m.metrics_port_given) {
      absl::StatusOr<int> port =
          v.Int("metrics_port", 0, 65535, "a port from 1 to 65535, 0 for a free one, or off");
      if (!port.ok()) return port.status();
      m.metrics_port = *port;
    }
    m.metrics_tls = v.Bool("metrics_tls");
    if (m.metrics_tls && (!m.server.tls.enabled() || m.metrics_port < 0)) {
      return absl::InvalidArgumentError(
          "--metrics_tls needs --cert, --key and --cacert and a metrics port");
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace

const ProgramFlags& MasterProgram() {
  static const ProgramFlags program{
      "mxrun-master",
      absl::StrCat("mxrun-master: the mxrun rendezvous master (many runs, keyed by run id).\n"
                   "Every flag can also be set as MXRUN_MASTER_<FLAG> in the environment "
                   "(MXRUN_MASTER_METRICS_PORT=29401) or in a --config file; precedence: ",
                   kPrecedence, "."),
      "mxrun-master " MXRUN_VERSION,
      {"MXRUN_MASTER_"},
      kPrecedence,
      /*takes_command=*/false,
  };
  return program;
}

namespace {

MasterFlagGroup ConfigFlags() {
  MasterFlagGroup group;
  group.flags = {ConfigFileFlag(MasterProgram()), PrintConfigFlag(MasterProgram())};
  return group;
}

const std::vector<MasterFlagGroup>& Groups() {
  static const std::vector<MasterFlagGroup> groups = {
      ListenFlags(), AccessFlags(), StateFlags(), ElectionFlags(), MetricsFlags(), ConfigFlags(),
  };
  return groups;
}

}  // namespace

const std::vector<FlagSpec>& MasterFlagSpecs() {
  static const std::vector<FlagSpec> specs = FlagsOf(Groups());
  return specs;
}

absl::StatusOr<MasterFlagsResult> ResolveMasterFlags(
    int argc, const char* const* argv, const std::map<std::string, std::string>& env) {
  const std::vector<FlagSpec>& specs = MasterFlagSpecs();
  absl::StatusOr<ResolvedFlags> resolved = ResolveFlags(MasterProgram(), specs, argc, argv, env);
  if (!resolved.ok()) return resolved.status();
  MasterFlagsResult result;
  if (!resolved->help_text.empty()) {
    result.text = resolved->help_text;
    return result;
  }
  MasterFlags flags;
  if (absl::Status applied = ApplyFlagGroups(Groups(), resolved->values, flags); !applied.ok()) {
    return applied;
  }
  if (resolved->values.Bool("print_config")) {
    result.text = FormatEffectiveConfig(MasterProgram(), specs, *resolved);
    return result;
  }
  result.flags = std::move(flags);
  return result;
}

}  // namespace mxrun

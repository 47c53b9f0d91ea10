#include "launcher/network/status_flags.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "launcher/flags/flag_engine.h"
#include "launcher/launch_flags/launch_flags.h"

namespace mxrun {
namespace {

using StatusFlagGroup = FlagGroup<StatusFlags>;

constexpr const char* kPrecedence = "flag > MXRUN_* > PET_* > config file > default";

const ProgramFlags& StatusProgram() {
  static const ProgramFlags program = [] {
    ProgramFlags p{
        "mxrun status",
        absl::StrCat("mxrun status: show the runs a rendezvous master holds.\n"
                     "Flags can also be set as MXRUN_<FLAG> or PET_<FLAG> (as for the job) or in "
                     "a --config file (the job's own: its other keys are ignored); precedence: ",
                     kPrecedence, "."),
        "",
        {"MXRUN_", "PET_"},
        kPrecedence,
        /*takes_command=*/false,
    };
    for (const FlagSpec& flag : LaunchFlagSpecs()) {
      if (flag.file_key) p.foreign_file_keys.push_back(flag.name);
    }
    p.foreign_file_keys.push_back("entrypoint");
    p.foreign_file_keys.push_back("args");
    return p;
  }();
  return program;
}

StatusFlagGroup MasterFlags() {
  StatusFlagGroup group;
  group.flags = {
      {"rdzv_endpoint", "", false, "master HOST[:PORT]; with --rdzv_backend=etcd the etcd members",
       ""},
      {"rdzv_id", "", false, "only this run (with etcd: the job's run)", ""},
      {"rdzv_backend", "", false,
       "c10d (the endpoint is the master) or etcd (etcd-v2): find the master elected in etcd",
       "c10d"},
      {"rdzv_conf", "", false,
       "cert, key, cacert: mutual TLS with the master (as the agents); with etcd: protocol, "
       "cacert, cert, key (etcd's TLS), etcd_prefix, master_service, master_cert, master_key, "
       "master_cacert (the elected master's TLS)",
       "", true, "", true},
      {"timeout", "", false, "seconds to wait for the master", "5"},
  };
  group.apply = [](const FlagValues& v, StatusFlags& s) -> absl::Status {
    s.endpoint = v.Trimmed("rdzv_endpoint");
    if (s.endpoint.empty()) {
      return absl::InvalidArgumentError(
          "--rdzv_endpoint is required: the master's HOST[:PORT] (with --rdzv_backend=etcd, the "
          "etcd members), as the job's own flag, MXRUN_RDZV_ENDPOINT or PET_RDZV_ENDPOINT, or "
          "in a --config file");
    }
    s.run_id = v.Trimmed("rdzv_id");
    if (s.run_id == "none") s.run_id.clear();  // mxrun's default: no --rdzv_id given
    const std::string backend = v.Lower("rdzv_backend");
    if (backend != "c10d" && backend != "etcd" && backend != "etcd-v2") {
      return v.Invalid("rdzv_backend", "unknown backend", "c10d, etcd, etcd-v2");
    }
    s.etcd = backend != "c10d";
    s.rdzv_conf = v.Text("rdzv_conf");
    absl::StatusOr<double> timeout = v.Seconds("timeout");
    if (!timeout.ok() || *timeout <= 0) {
      return v.Invalid("timeout", "not a positive number of seconds", "seconds above 0");
    }
    s.timeout_s = *timeout;
    return absl::OkStatus();
  };
  return group;
}

StatusFlagGroup OutputFlags() {
  StatusFlagGroup group;
  FlagSpec watch{"watch", "", false,
                 "show it again every SECONDS (2 when given alone) until interrupted, clearing "
                 "the terminal in between",
                 ""};
  watch.implicit_value = "2";
  group.flags = {
      {"json", "", true,
       "one JSON object on stdout: the master's address and its runs with their rounds, failures "
       "by cause and members (for scripts)",
       ""},
      watch,
  };
  group.apply = [](const FlagValues& v, StatusFlags& s) -> absl::Status {
    s.json = v.Bool("json");
    if (!v.Empty("watch")) {
      double every = 0;
      if (!absl::SimpleAtod(v.Trimmed("watch"), &every) || every < 0.1 || every > 3600) {
        return v.Invalid("watch", "out of range", "0.1 to 3600 seconds");
      }
      s.watch_s = every;
    }
    return absl::OkStatus();
  };
  return group;
}

StatusFlagGroup ConfigFlags() {
  StatusFlagGroup group;
  group.flags = {ConfigFileFlag(StatusProgram()), PrintConfigFlag(StatusProgram())};
  return group;
}

const std::vector<StatusFlagGroup>& Groups() {
  static const std::vector<StatusFlagGroup> groups = {MasterFlags(), OutputFlags(), ConfigFlags()};
  return groups;
}

}  // namespace

absl::StatusOr<StatusFlagsResult> ResolveStatusFlags(
    int argc, const char* const* argv, const std::map<std::string, std::string>& env) {
  static const std::vector<FlagSpec> specs = FlagsOf(Groups());
  // The engine reads argv[0] as the program: "status" stands in for it.
  absl::StatusOr<ResolvedFlags> resolved =
      ResolveFlags(StatusProgram(), specs, argc - 1, argv + 1, env);
  if (!resolved.ok()) return resolved.status();
  StatusFlagsResult result;
  if (!resolved->help_text.empty()) {
    result.text = resolved->help_text;
    return result;
  }
  StatusFlags flags;
  if (absl::Status applied = ApplyFlagGroups(Groups(), resolved->values, flags); !applied.ok()) {
    return applied;
  }
  if (resolved->values.Bool("print_config")) {
    result.text = FormatEffectiveConfig(StatusProgram(), specs, *resolved);
    return result;
  }
  result.flags = std::move(flags);
  return result;
}

}  // namespace mxrun

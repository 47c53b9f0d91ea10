#include "launcher/launch_flags/launch_flags.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "launcher/launch_flags/groups.h"
#include "launcher/launch_flags/kubernetes.h"
#include "launcher/launch_flags/slurm.h"

namespace mxrun {
namespace {

constexpr const char* kPrecedence =
    "flag > MXRUN_* > PET_* > config file > Slurm or Kubernetes > default";

// The engine's own flags, and torchrun 2.14's --print-completion (main answers it before parsing;
// it is here for --help and completion).
LaunchFlagGroup ConfigFlags() {
  LaunchFlagGroup group;
  FlagSpec completion{"print_completion", "", false,
                      "print a completion script for this shell (bash or zsh) to stdout and exit "
                      "(torchrun 2.14)",
                      ""};
  completion.file_key = false;
  group.flags = {ConfigFileFlag(LaunchProgram()), PrintConfigFlag(LaunchProgram()), completion};
  return group;
}

const std::vector<LaunchFlagGroup>& Groups() {
  static const std::vector<LaunchFlagGroup> groups = {
      JobFlags(),       LogFileFlags(),     StopFlags(),         HangFlags(),      StandbyFlags(),
      PlacementFlags(), ConsoleLineFlags(), EventFlags(),        StragglerFlags(), ExclusionFlags(),
      HealthFlags(),    GpuReclaimFlags(),  WorkersStoreFlags(), FailureFlags(),   MetricsFlags(),
      RankOrderFlags(), CompatFlags(),      EntrypointFlags(),   ConfigFlags(),
  };
  return groups;
}

// Under Slurm, flags that no other source gives come from SLURM_* (not for --standalone jobs, and
// the rendezvous only when none of its flags was given). Likewise in a pod of a Kubernetes Indexed
// Job (kubernetes.h), when not under Slurm.
absl::Status ImplyFromScheduler(const std::map<std::string, std::string>& env, FlagValues& values,
                                std::vector<std::string>& notices) {
  if (values.Bool("standalone")) return absl::OkStatus();
  const bool rendezvous_given =
      values.Given("rdzv_backend") || values.Given("rdzv_endpoint") || values.Given("master_addr");
  auto fill_from = [&](const std::map<std::string, std::string>& flags, const std::string& source,
                       const std::string& what) {
    std::string filled;
    for (const auto& [name, text] : flags) {
      if (values.Given(name)) continue;
      if ((name == "rdzv_backend" || name == "rdzv_endpoint") && rendezvous_given) continue;
      values.Imply(name, text, absl::StrCat("--", name, " (from ", source, ")"));
      absl::StrAppend(&filled, " --", name, "=", text);
    }
    if (!filled.empty()) {
      notices.push_back(absl::StrCat(what, ": using", filled, " (precedence: ", kPrecedence, ")"));
    }
  };
  absl::StatusOr<std::optional<SlurmDefaults>> slurm = DetectSlurm(env);
  if (!slurm.ok()) return slurm.status();
  if (*slurm) {
    fill_from((*slurm)->flags, "Slurm", absl::StrCat("Slurm job ", (*slurm)->job_id));
  } else if (env.count("JOB_COMPLETION_INDEX") != 0 && !rendezvous_given) {
    if (!values.Given("nnodes")) {
      return absl::InvalidArgumentError(
          "in a pod of a Kubernetes Indexed Job (JOB_COMPLETION_INDEX is set): give --nnodes "
          "(or PET_NNODES in the pod template) as the Job's parallelism; a pod cannot see it");
    }
    absl::StatusOr<std::optional<IndexedJobDefaults>> indexed = DetectIndexedJob(env);
    if (!indexed.ok()) return indexed.status();
    if (*indexed) {
      fill_from((*indexed)->flags, "Kubernetes",
                absl::StrCat("Kubernetes Indexed Job ", (*indexed)->job_name));
    }
  }
  return absl::OkStatus();
}

}  // namespace

const ProgramFlags& LaunchProgram() {
  static const ProgramFlags program{
      "mxrun",
      absl::StrCat(
          "mxrun: a torchrun-compatible launcher for distributed PyTorch training.\n"
          "Usage: mxrun [options] ENTRYPOINT [ARGS...]   (ENTRYPOINT: script.py, -m module, "
          "--no_python program, or 'train' for the bundled trainer)\n"
          "Every flag can also be set as MXRUN_<FLAG> or PET_<FLAG> in the environment "
          "(MXRUN_NPROC_PER_NODE=4) or in a --config file; precedence: ",
          kPrecedence, "."),
      "mxrun " MXRUN_VERSION,
      {"MXRUN_", "PET_"},
      kPrecedence,
      /*takes_command=*/true,
  };
  return program;
}

const std::vector<FlagSpec>& LaunchFlagSpecs() {
  static const std::vector<FlagSpec> specs = FlagsOf(Groups());
  return specs;
}

absl::StatusOr<LaunchFlags> ResolveLaunchFlags(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env) {
  LaunchFlags out;
  absl::StatusOr<ResolvedFlags> resolved =
      ResolveFlags(LaunchProgram(), LaunchFlagSpecs(), argc, argv, env);
  if (!resolved.ok()) return resolved.status();
  out.resolved = std::move(*resolved);
  if (!out.resolved.help_text.empty()) return out;
  FlagValues& values = out.resolved.values;
  if (absl::Status implied = ImplyFromScheduler(env, values, out.notices); !implied.ok()) {
    return implied;
  }

  LaunchOptions o;
  const std::vector<std::string>& command = out.resolved.command;
  if (!command.empty()) {
    o.entrypoint = command.front();
    o.entrypoint_args.assign(command.begin() + 1, command.end());
  }
  if (absl::Status applied = ApplyFlagGroups(Groups(), values, o); !applied.ok()) return applied;

  // torchrun 2.13 warns that a dynamic backend ignores a non-zero --node_rank. mxrun takes it as a
  // request instead, and says so; not for the rank Slurm gives, which every Slurm job has.
  const FlagValue& node_rank = values["node_rank"];
  if (node_rank.given && o.node_rank != 0 && o.rdzv_backend != "static" &&
      !absl::EndsWith(node_rank.source, "(from Slurm)") &&
      !absl::EndsWith(node_rank.source, "(from Kubernetes)")) {
    out.warnings.push_back(absl::StrCat(
        node_rank.source, "=", o.node_rank, " with --rdzv_backend=", o.rdzv_backend,
        ": torchrun uses a node rank only for static rendezvous and ignores it here; mxrun takes "
        "it as a request, granted when that rank is free in the round"));
  }
  out.warnings.insert(out.warnings.end(), values.warnings().begin(), values.warnings().end());
  out.print_config = values.Bool("print_config");
  out.options = std::move(o);
  return out;
}

}  // namespace mxrun

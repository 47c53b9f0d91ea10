#include "launcher/options.h"

#include "absl/strings/str_cat.h"
#include "launcher/entrypoint.h"
#include "launcher/launch_flags/launch_flags.h"
#include "launcher/nproc.h"
#include "launcher/rendezvous_setup.h"

namespace mxrun {

absl::StatusOr<ParseResult> ParseLaunchOptions(int argc, const char* const* argv,
                                               const std::map<std::string, std::string>& env) {
  absl::StatusOr<LaunchFlags> flags = ResolveLaunchFlags(argc, argv, env);
  if (!flags.ok()) return flags.status();
  ParseResult result;
  result.help_text = flags->resolved.help_text;
  if (!flags->options) return result;  // --help or --version
  result.notices = std::move(flags->notices);
  result.warnings = std::move(flags->warnings);
  const LaunchOptions& o = *flags->options;
  if (o.entrypoint.empty() && !flags->print_config) {  // --print-config may show a configuration
    return absl::InvalidArgumentError(                 // without one
        "no entrypoint given; usage: mxrun [options] ENTRYPOINT [ARGS...] "
        "(a script.py, -m module, --no_python program, or 'train')");
  }
  if (!flags->print_config) {
    result.options = std::move(flags->options);
    return result;
  }

  // --print-config: the configuration is checked as a launch checks it (all cheap, no network).
  // What depends on this machine, its GPUs and the entrypoint on its disk, is a warning: a
  // configuration may be printed on another machine than the one it is for.
  if (absl::StatusOr<RendezvousSettings> rendezvous = CheckRendezvousFlags(o, env);
      !rendezvous.ok()) {
    return rendezvous.status();
  }
  result.help_text = FormatEffectiveConfig(LaunchProgram(), LaunchFlagSpecs(), flags->resolved);
  const std::string on_this_machine = "a launch on this machine would fail: ";
  if (absl::StatusOr<int> nproc = ResolveNprocPerNode(o.nproc_per_node, env); !nproc.ok()) {
    result.warnings.push_back(absl::StrCat(on_this_machine, nproc.status().message()));
  }
  if (!o.entrypoint.empty()) {
    if (absl::StatusOr<WorkerCommand> command = BuildWorkerCommand(o, env, SelfDir());
        !command.ok()) {
      result.warnings.push_back(absl::StrCat(on_this_machine, command.status().message()));
    }
  }
  return result;
}

}  // namespace mxrun

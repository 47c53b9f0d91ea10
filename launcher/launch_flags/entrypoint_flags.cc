// What to run: a Python script (the default), a module (-m), a program (--no_python) or the
// bundled trainer ('train'). Applied first: other groups' defaults depend on it.

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup EntrypointFlags() {
  LaunchFlagGroup group;
  group.stage = 0;
  group.flags = {
      {"module", "-m", true, "run the entrypoint as a Python module (python -m)", ""},
      {"no_python", "", true, "run the entrypoint as a program, without python", ""},
      {"run_path", "", true, "run the entrypoint as a Python script path (as torchrun)", ""},
  };
  // o.entrypoint is set from the command before the groups are applied (launch_flags.cc).
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    const bool module = v.Bool("module");
    const bool no_python = v.Bool("no_python");
    if (module && no_python) {
      return absl::InvalidArgumentError(
          "--no_python and -m/--module cannot be used together: -m runs a Python module, "
          "--no_python runs a program without Python");
    }
    if (v.Bool("run_path") && (module || no_python)) {
      return absl::InvalidArgumentError(
          "--run_path cannot be combined with -m/--module or --no_python");
    }
    if (o.entrypoint.empty()) {
      o.entrypoint_kind = EntrypointKind::kPythonScript;
    } else if (module) {
      o.entrypoint_kind = EntrypointKind::kPythonModule;
    } else if (no_python) {
      o.entrypoint_kind = EntrypointKind::kExecutable;
    } else if (o.entrypoint == "train") {
      o.entrypoint_kind = EntrypointKind::kBundledTrainer;
    } else {
      o.entrypoint_kind = EntrypointKind::kPythonScript;
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

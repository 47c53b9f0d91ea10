#pragma once
// mxrun's flag groups, one per mechanism, each in its own file beside this one. launch_flags.cc
// lists them in --help's order. A new setting goes into its mechanism's group (and the field it
// fills); a new mechanism adds its group here and in that list.

#include "launcher/flags/flag_engine.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

using LaunchFlagGroup = FlagGroup<LaunchOptions>;

LaunchFlagGroup JobFlags();          // nodes, workers, rendezvous, restarts, role, address
LaunchFlagGroup LogFileFlags();      // --log_dir, --log_format, -r, -t, --local_ranks_filter
LaunchFlagGroup StopFlags();         // signals and the grace period
LaunchFlagGroup HangFlags();         // heartbeat and exit-barrier time-outs
LaunchFlagGroup StandbyFlags();      // warm standbys, pre-started interpreters
LaunchFlagGroup PlacementFlags();    // virtual local rank, NUMA binding
LaunchFlagGroup RankOrderFlags();    // node ranks by the network
LaunchFlagGroup ConsoleLineFlags();  // line prefix, duplicated lines
LaunchFlagGroup EventFlags();        // torchelastic's event records
LaunchFlagGroup StragglerFlags();
LaunchFlagGroup WorkersStoreFlags();  // who hosts the workers' TCPStore
LaunchFlagGroup ExclusionFlags();
LaunchFlagGroup HealthFlags();
LaunchFlagGroup GpuReclaimFlags();
LaunchFlagGroup FailureFlags();  // exit code of a repeated failure, straggler restarts
LaunchFlagGroup MetricsFlags();
LaunchFlagGroup CompatFlags();      // torchrun's flags mxrun only accepts
LaunchFlagGroup EntrypointFlags();  // -m, --no_python, --run_path and the command

}  // namespace mxrun

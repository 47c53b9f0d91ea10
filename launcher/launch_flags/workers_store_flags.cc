// Who hosts the TCPStore that the workers' init_process_group uses (agent/store/
// workers_store_rendezvous.h): mxrun's agent, as torchrun's does (TORCHELASTIC_USE_AGENT_STORE=
// True), or global rank 0, PyTorch's own store, as mxrun did before. torchrun's own switch back,
// TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, is read too.

#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup WorkersStoreFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {.name = "workers_store",
       .short_name = "",
       .boolean = false,
       .help = "who hosts the TCPStore of the workers' init_process_group: agent (mxrun's, "
               "listening before any rank starts; TORCHELASTIC_USE_AGENT_STORE=True, as "
               "torchrun) or rank0 (PyTorch's own store in global rank 0)",
       .default_value = "agent"},
      EnvSetting("disable_shared_store", "TORCH_DISABLE_SHARE_RDZV_TCP_STORE",
                 "1: global rank 0 hosts the workers' TCPStore (PyTorch's own), as with "
                 "--workers_store=rank0"),
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    const std::string who = v.Trimmed("workers_store");
    if (who != "agent" && who != "rank0") {
      return v.Invalid("workers_store", "unknown host", "agent or rank0");
    }
    const std::string disabled = v.Trimmed("disable_shared_store");
    if (!disabled.empty() && disabled != "0" && disabled != "1") {
      return v.Invalid("disable_shared_store", "not 0 or 1", "0 or 1 (1: rank 0 hosts the store)");
    }
    o.agent_store = who == "agent" && disabled != "1";
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

// The agent's Prometheus endpoint (agent/metrics/agent_metrics.h, common/http/metrics_endpoint.h).

#include "absl/strings/str_cat.h"
#include "launcher/launch_flags/groups.h"

namespace mxrun {

LaunchFlagGroup MetricsFlags() {
  LaunchFlagGroup group;
  group.flags = {
      {"metrics_port", "", false,
       "serve Prometheus metrics on this port (0: a free one, printed; empty: off)", ""},
      {"metrics_bind_all", "", true,
       "the metrics endpoint listens on every interface (default: the node's --local_addr, else "
       "127.0.0.1)",
       ""},
      {"metrics_tls", "", true,
       "serve the metrics over HTTPS with the job's certificates (--rdzv_conf cert, key, "
       "cacert): scrapers must present a certificate from the job's CA",
       ""},
  };
  group.apply = [](const FlagValues& v, LaunchOptions& o) -> absl::Status {
    if (!v.Empty("metrics_port")) {
      absl::StatusOr<int> port =
          v.Int("metrics_port", 0, 65535, "a port from 1 to 65535, or 0 for a free one");
      if (!port.ok()) return port.status();
      o.metrics.port = *port;
    }
    o.metrics.bind_all = v.Bool("metrics_bind_all");
    o.metrics.tls = v.Bool("metrics_tls");
    if ((o.metrics.bind_all || o.metrics.tls) && o.metrics.port < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(o.metrics.bind_all ? "--metrics_bind_all" : "--metrics_tls",
                       " needs --metrics_port (the metrics endpoint is off without it)"));
    }
    return absl::OkStatus();
  };
  return group;
}

}  // namespace mxrun

#pragma once
// What mxrun-multinode adds to the agent's metrics endpoint (launcher/metrics_setup.h): HTTPS with
// the job's certificates for --metrics_tls (OpenSSL, linked into this build only), and on an agent
// that hosts its job's master, or may be elected to with etcd, the master's metrics and status
// page: there is no mxrun-master to scrape then.

#include "absl/status/statusor.h"
#include "launcher/launch_flags/launch_options.h"
#include "launcher/metrics_setup.h"
#include "launcher/rendezvous_setup.h"

namespace mxrun {

// Nothing to add when --metrics_port is off. An error (--metrics_tls without the job's
// certificates, or certificates that do not load) is a usage error.
absl::StatusOr<MetricsServing> NetworkMetricsServing(const LaunchOptions& options,
                                                     const RendezvousSettings& settings,
                                                     const NodeRendezvous& node);

}  // namespace mxrun

#pragma once
// What a master shows on an HTTP endpoint, composed once for every host of a master (mxrun-master,
// and an agent that hosts its job's master or may be elected to with etcd): its metrics and its
// status page at "/", or, for an etcd replica that does not lead now, a page naming the one that
// does.

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/http/metrics_endpoint.h"
#include "rendezvous/master_state/master_state.h"

namespace mxrun {

// The runs a master serves now; nullopt for an etcd replica that does not lead.
using ServedRuns = std::function<std::optional<std::vector<RunSnapshot>>()>;

// "/": the status page, or the standby page naming `leader()` (may be empty: not known).
std::map<std::string, HttpServer::Handler> MasterPages(ServedRuns runs,
                                                       std::function<std::string()> leader);

// The master's metrics. With `host` (an agent's own metrics) they are appended to the host's
// page, and a replica that does not lead adds nothing; alone (mxrun-master) a replica that does
// not lead says so in its metrics.
MetricsRenderer MasterMetrics(ServedRuns runs, MetricsRenderer host = nullptr);

}  // namespace mxrun

#pragma once
// The master's Prometheus metrics (mxrun-master --metrics_port), made from the runs as the state
// machine has them (MasterState::Snapshot). Pure. docs/guide/operating.md lists them.
//
// Labels: run_id; per node also node (its rank in the current round, "" while waiting) and host.

#include <string>
#include <vector>

#include "common/http/metrics_text.h"
#include "rendezvous/master_state/master_state.h"

namespace mxrun {

// `leading`: false for an etcd-elected candidate that does not lead now (it holds no runs).
std::string RenderMasterMetrics(const std::vector<RunSnapshot>& runs, ExpositionFormat format,
                                bool leading = true);

}  // namespace mxrun

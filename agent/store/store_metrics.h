#pragma once
// The workers' store on an agent's metrics page (`--metrics_port`): what it holds now and what it
// has served, read at each scrape from WorkersStoreRendezvous::Totals() (a snapshot; nothing is
// pushed from the store's thread). docs/guide/operating.md lists the families.

#include <functional>
#include <optional>
#include <string>

#include "agent/store/workers_store_rendezvous.h"
#include "common/http/metrics_endpoint.h"
#include "common/http/metrics_text.h"

namespace mxrun {

// The families for `totals` (label: run_id).
std::string RenderStoreMetrics(const StoreTotals& totals, ExpositionFormat format);

// `host`'s page followed by the store's families (nothing more while `totals` says nullopt: no
// round yet).
MetricsRenderer StoreMetrics(std::function<std::optional<StoreTotals>()> totals,
                             MetricsRenderer host);

}  // namespace mxrun

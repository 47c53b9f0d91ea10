#pragma once
// Conversions between the wire messages (mxrun.v1) and the domain types the agent and the master
// state machine use. Kept in one place so that neither side handles protobuf details.

#include <chrono>
#include <vector>

#include "common/restart_phases.h"
#include "common/straggler_watch.h"
#include "common/worker_failure.h"
#include "mxrun.pb.h"
#include "rendezvous/rendezvous.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

v1::WorkerFailure ToProto(const WorkerFailure& failure);
WorkerFailure FromProto(const v1::WorkerFailure& failure);

v1::RoundAssignment ToProto(const RoundAssignment& round);
RoundAssignment FromProto(const v1::RoundAssignment& round);

v1::NodeInfo ToProto(const NodeDesc& desc);
NodeDesc FromProto(const v1::NodeInfo& info);

v1::JobSpec ToProto(const JobDesc& job);
JobDesc FromProto(const v1::JobSpec& spec);

v1::RestartPhases ToProto(const RestartPhases& phases);
v1::FlightRecords ToProto(const FlightRecordSet& set, bool request);
FlightRecordSet FromProto(const v1::FlightRecords& p);
// What an agent sent is checked before the master keeps or passes it on (sizes are bounded by the
// transport's message limit).
absl::Status ValidateFlightRecords(const v1::FlightRecords& p);
RestartPhases FromProto(const v1::RestartPhases& phases);

v1::MasterMessage ToProto(const ToAgent& message);
StragglerNews FromProto(const v1::StragglerNotice& notice);

// A rank's progress for a heartbeat sent at `now` (its age is measured on the agent's clock).
v1::RankProgress ToProto(const RankProgress& progress, std::chrono::steady_clock::time_point now);
std::vector<RankReport> FromProto(const v1::Heartbeat& heartbeat);

}  // namespace mxrun

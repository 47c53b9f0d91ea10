#pragma once
// Conversions between the wire messages (mxrun.v1) and the domain types the agent and the master
// state machine use. Kept in one place so that neither side handles protobuf details.

#include "common/worker_failure.h"
#include "mxrun.pb.h"
#include "rendezvous/master_state.h"
#include "rendezvous/rendezvous.h"

namespace mxrun {

v1::WorkerFailure ToProto(const WorkerFailure& failure);
WorkerFailure FromProto(const v1::WorkerFailure& failure);

v1::RoundAssignment ToProto(const RoundAssignment& round);
RoundAssignment FromProto(const v1::RoundAssignment& round);

v1::NodeInfo ToProto(const NodeDesc& desc);
NodeDesc FromProto(const v1::NodeInfo& info);

v1::JobSpec ToProto(const JobDesc& job);
JobDesc FromProto(const v1::JobSpec& spec);

v1::MasterMessage ToProto(const ToAgent& message);

}  // namespace mxrun

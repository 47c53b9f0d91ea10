#pragma once
// A worker failure that is a collective's: PyTorch gave up on a collective (a Gloo timeout, NCCL's
// watchdog, an NCCL error) rather than mxrun judging a hang. Its peers may still be waiting in
// that collective, so their flight recorders are taken before anything stops, as for a hang
// (flight_records.h). A failure from a peer's death ("Connection closed by peer") is not one: the
// cause is the peer, whose failure is its own report, and the restart is not held up for it.
// Pure.

#include <string>

#include "common/worker_failure.h"

namespace mxrun {

// The words in the failure's message, traceback or last lines that make it a collective's;
// empty when it is not one.
std::string CollectiveFailureSign(const WorkerFailure& failure);

}  // namespace mxrun

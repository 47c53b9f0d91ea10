#pragma once
// PyTorch's flight recorder for every rank, on unless the user chose (agent/hang/flight_records.h
// takes and judges the dumps): the workers get TORCH_FR_BUFFER_SIZE=2000 when neither it nor
// TORCH_NCCL_TRACE_BUFFER_SIZE is set (0 from the user turns the recorder off, and mxrun asks
// nothing), and each rank a socket in mxrun's scratch folder (MXRUN_FLIGHT_SOCKET) where the
// mxrun Python module serves it. The bundled trainer is left as it is: it has no recorder to
// serve.

#include <string>

#include "agent/hang/flight_records.h"
#include "agent/workers/worker_spec.h"
#include "launcher/entrypoint.h"
#include "launcher/launch_flags/launch_options.h"

namespace mxrun {

// Entries kept per process group: a few hundred bytes each, so at most about a megabyte.
inline constexpr int kDefaultFlightRecorderEntries = 2000;

// Sets `worker`'s environment and socket folder and `flight` from the options (quietly: a debug
// line; an info line only when the sockets cannot be made).
void SetUpFlightRecorder(const LaunchOptions& options, const WorkerCommand& command,
                         const std::string& scratch_dir, int local_world_size, WorkerSpec& worker,
                         FlightRecorderConfig& flight);

}  // namespace mxrun

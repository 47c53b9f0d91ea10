#pragma once
// PyTorch's flight recorder from every live rank of this node, taken before anything is stopped
// (a hang judged here, or a peer's hang reported by the master), and the verdict on them.
//
// Each worker that runs the mxrun Python module serves its recorder on MXRUN_FLIGHT_SOCKET
// (python/mxrun/_flight_recorder.py): the agent connects, checks that the process at the other
// end is the worker or one of its descendants (SO_PEERCRED: a socket in mxrun's scratch folder
// is trusted only when its server belongs to this run), writes `fr_trace\n` and reads back
// `ok <N>\n` and N bytes of JSON, or `error <why>\n`. All ranks are asked at once and waited for
// together under one deadline; each dump is capped in size. A rank that does not answer (no
// server: the script never called mxrun.step_done; a worker holding the GIL; stopped) is named
// with the reason, and the others are kept.
//
// In a job of several nodes, the node that judged the hang sends its dumps through the master and
// gets every other node's (rendezvous.h: GatherFlightRecords; the master asks each node, which
// takes its own live ranks' dumps before it stops anything), so that DIR holds the whole job's.
//
// The verdict is `python -m mxrun._flight_verdict DIR WORLD_SIZE`, run with the workers' Python:
// which ranks are behind on which collective, and PyTorch's own analyzer's findings.

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "agent/hang/hang_diagnostics.h"
#include "common/env_contract.h"
#include "rendezvous/wire/wire.h"

namespace mxrun {

struct FlightTarget {
  int global_rank = 0;
  pid_t pid = 0;       // the worker; the server must be it or a descendant
  std::string socket;  // MXRUN_FLIGHT_SOCKET given to it
  // false: the worker has ended; the dump it wrote at exit after an uncaught exception
  // (socket + kFlightExitSuffix) is taken instead.
  bool running = true;
};

struct FlightDump {
  int global_rank = 0;
  std::string file;  // DIR/rank<R>.json when it answered
  size_t bytes = 0;
  std::string error;     // why there is none
  bool at_exit = false;  // the dump the worker wrote as it died
};

// How the agent takes the recorders (launcher/flight_recorder_setup.h fills it in).
struct FlightRecorderConfig {
  bool on = false;               // workers were given MXRUN_FLIGHT_SOCKET
  std::string python;            // runs the verdict (the workers' Python); empty: none
  std::vector<std::string> env;  // its environment ("KEY=VALUE": the workers' PYTHONPATH)
  // A first dump imports torch._dynamo on its way to the stacks (823 modules, sympy among them):
  // 2-5 s of one core per rank on an idle 2-core machine whatever the number of entries (torch
  // 2.13), every rank at once on shared cores; 10 s ran out for all 3 ranks of a test on a
  // loaded CI machine. Only a worker that never answers (holding the GIL, stopped) makes the
  // restart wait this long.
  std::chrono::milliseconds fetch_budget{30000};
  // Importing torch for the analyzer takes 1-3 s on a busy 2-core machine.
  std::chrono::milliseconds verdict_timeout{20000};
  // The other nodes' dumps (the rendezvous's GatherFlightRecords); unset: one node only.
  // `meanwhile` is called every 50 ms or so while it waits (the FileTimer pipe is served).
  std::function<std::vector<FlightRecordSet>(
      const FlightRecordSet& own, const std::set<int>& expected, std::chrono::milliseconds budget,
      const std::function<void()>& meanwhile)>
      gather;
  // How long the other nodes may take: their own fetch, and the way through the master.
  std::chrono::milliseconds gather_budget{40000};  // above fetch_budget: they fetch too
};

// At most this much JSON goes into one node's set (the master takes messages of up to 64 MiB);
// the ranks past it are sent with an error instead.
inline constexpr size_t kMaxFlightMessage = size_t{48} << 20;

// Takes the recorders of `targets` (the running workers) into DIR/flight_recorder and returns the
// short form: which ranks gave none and why, then the verdict on the whole job's dumps there
// (`world_size` ranks expected). Empty when `config` is off or there is nobody to ask.
// `local_ranks`: this node's ranks in the round (`round`), live or not; the others are asked of
// the other nodes when `config.gather` is set.
// `keep_reading` is served all along (the FileTimer pipe: healthy workers' clients fail when it
// fills up).
std::vector<std::string> TakeFlightRecords(const FlightRecorderConfig& config,
                                           const std::vector<FlightTarget>& targets,
                                           const std::string& dir, int world_size, int round,
                                           const std::set<int>& local_ranks,
                                           const KeepReading& keep_reading = {});

// For another node's request (kFlightRequest): this node's live ranks' dumps, taken into
// DIR/flight_recorder, as the set to send (each rank's JSON, or why it has none).
FlightRecordSet TakeFlightRecordsForPeer(const FlightRecorderConfig& config,
                                         const std::vector<FlightTarget>& targets,
                                         const std::string& dir, int round);

// The set to send for `dumps` (read back from their files), at most kMaxFlightMessage of JSON.
FlightRecordSet ToFlightRecordSet(const std::vector<FlightDump>& dumps, int round);
// Writes the other nodes' dumps into `folder` as rank<R>.json; returns a line for each rank of
// `expected` that has none (with the reason its node gave, or that no answer came).
std::vector<std::string> WriteOtherNodesDumps(const std::vector<FlightRecordSet>& sets,
                                              const std::set<int>& expected,
                                              const std::string& folder, int* written);

struct FlightFetchOptions {
  std::chrono::milliseconds budget{3000};  // for every rank together
  size_t max_bytes = 64u << 20;            // per rank
};

// Asks every target at once and writes each answer to DIR/rank<R>.json. Never throws; a target
// that fails has its `error` set.
std::vector<FlightDump> FetchFlightRecords(const std::vector<FlightTarget>& targets,
                                           const std::string& dir,
                                           const FlightFetchOptions& options = {},
                                           const KeepReading& keep_reading = {});

// A reply read so far: complete (ok with its body, or an error line), or not yet. Pure.
struct FlightReply {
  bool complete = false;
  bool ok = false;
  std::string body;   // the JSON when ok
  std::string error;  // the worker's words, or what is wrong with the reply
};
// `eof`: the worker closed its end (nothing more will come).
FlightReply ParseFlightReply(std::string_view data, bool eof, size_t max_bytes);

// The verdict's lines on the dumps in `dir` (python -m mxrun._flight_verdict), or one line saying
// why there is none. `python` empty: none is known (--no_python workers) and no verdict is made.
std::vector<std::string> FlightVerdict(const std::string& python,
                                       const std::vector<std::string>& env, const std::string& dir,
                                       int world_size, std::chrono::milliseconds timeout,
                                       const KeepReading& keep_reading = {});

// One line per rank that gave no dump, and how many did: for the diagnostics' short form.
std::vector<std::string> DescribeFlightDumps(const std::vector<FlightDump>& dumps);

}  // namespace mxrun

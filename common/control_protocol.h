#pragma once
// The control channel between mxrun's agent and one worker: how a worker survives a re-formed
// group (in-process restart) instead of being killed and started again. docs/ARCHITECTURE.md
// describes it for other implementers; this file holds its messages.
//
// Transport: a connected AF_UNIX stream socket. The worker's end is file descriptor 3, named in
// MXRUN_CONTROL_FD; a worker that never reads or writes it changes nothing (torchrun's behaviour).
// Messages are JSON objects, one per line ('\n'), at most kMaxControlLine bytes.
//
// worker -> agent
//   {"hello": 1, "in_process_restart": true}
//       protocol version 1. With in_process_restart, the worker will take a new round's place
//       without exiting: when its group is re-formed, the agent keeps it running. A later hello
//       replaces an earlier one: a pre-started interpreter (--prestart) says true while it waits
//       as a standby, then false before it runs an ordinary script in its rank.
//   {"joined": N}
//       the worker is training in round N (MXRUN_ROUND names the round a worker starts in):
//       once every worker has said so, the agent starts its warm standbys.
//   {"step": N, "step_seconds": S}
//       progress: the worker completed step N (a non-negative integer; it may go back after a
//       restore), the step took S seconds (optional: without it the agent divides the time since
//       the previous report by the steps between them). Any worker may send it, in any language
//       (`os.write(3, b'{"step": 12}\n')` in Python); the agent's metrics, straggler report and
//       goodput are made from it, and it counts as a heartbeat. With "auto": true the mxrun
//       module counted the step for a script that never reports itself (its optimizer's steps):
//       it arms the first-step rule of later rounds only with --hang_timeout or
//       --round_join_timeout given (HangWatch::HeartbeatSeen). With "busy_seconds": B, B seconds of
//       each step were the rank's own work (input and forward, no collective: the mxrun module's
//       python/mxrun/_busy_time.py): under synchronous data parallel every rank's step time is the
//       slowest rank's, so stragglers are judged by B where the ranks report it.
//   {"leaving": true}
//       the worker's interpreter is exiting (the mxrun module says it at exit): a stop that
//       follows a peer's death lets it finish leaving rather than signal it (survivors_leave.h).
// A standby (MXRUN_STANDBY=1: started with no rank, spare for a failed one) says hello when it is
// loaded and ready; its round notice then carries its whole contract.
// agent -> worker
//   {"round": N, "env": {"RANK": "1", "WORLD_SIZE": "2", ...}, "failure_time": T}
//       the group was re-formed as round N: `env` is the worker's whole torchrun contract for it
//       (what a worker started for that round would find in its environment); T is when the
//       failure that caused it was seen, in seconds since the Unix epoch (0: not a failure).
// A worker that cannot take the round exits; the agent then starts a new process for its rank.

#include <cstddef>
#include <string>
#include <string_view>

#include "common/env_contract.h"

namespace mxrun {

inline constexpr int kControlFd = 3;
inline constexpr const char* kControlFdVariable = "MXRUN_CONTROL_FD";
inline constexpr std::size_t kMaxControlLine = 64 * 1024;
inline constexpr int kControlProtocolVersion = 1;

struct WorkerControlMessage {
  enum class Kind { kHello, kJoined, kProgress, kLeaving };
  Kind kind = Kind::kHello;
  int version = 0;                  // hello
  bool in_process_restart = false;  // hello
  int round = -1;                   // joined
  long long step = -1;              // progress
  double step_seconds = -1;         // progress; -1: not given
  // progress: the rank's own work per step, collectives' waits left out (the mxrun module's
  // python/mxrun/_busy_time.py); stragglers are judged by it; -1: not given
  double busy_seconds = -1;
  // progress: counted by the mxrun module for a script that never reports itself (the wheel's
  // optimizer hook, python/mxrun/_auto_progress.py): {"auto": true}
  bool automatic = false;
};

struct RoundNotice {
  int round = 0;
  EnvMap env;
  double failure_time = 0;
};

// Lines without their '\n'. Parsers throw std::invalid_argument saying what was wrong (not JSON,
// an unknown message, a field of the wrong type); unknown extra fields are ignored, so that newer
// peers can add some.
std::string HelloLine(bool in_process_restart);
std::string JoinedLine(int round);
std::string LeavingLine();
std::string ProgressLine(long long step, double step_seconds = -1);  // -1: no step time
WorkerControlMessage ParseWorkerControlLine(std::string_view line);
std::string RoundNoticeLine(const RoundNotice& notice);
RoundNotice ParseRoundNoticeLine(std::string_view line);

// Writes `line` and its '\n' to the channel `fd` (never raising SIGPIPE). False when the peer is
// gone, or the socket is non-blocking and full.
bool SendControlLine(int fd, std::string_view line);

}  // namespace mxrun

#pragma once
// The stop that follows a worker's death first lets the others leave by themselves.
//
// Why: when a worker dies (an exit or a signal, not a hang), its peers in a collective usually
// fail at once and exit on their own within a fraction of a second (Gloo: "Connection reset by
// peer"). A stop signal that reaches them while they are already leaving can make that exit much
// longer: PyTorch Lightning 2.6's SIGTERM handler first broadcasts on the broken group (about
// 1 s here, docs/BENCHMARKS.md). torchrun polls its workers every 0.1 s and so often finds the
// survivors gone before it signals them; mxrun sees the death at once. So the stop waits up to
// kSurvivorsLeave for the survivors that handle the stop signal and ends the wait as soon as they
// are all gone. A worker whose interpreter said it is exiting ({"leaving": true}, the mxrun
// module's at exit) gets up to kLeavingExit from the stop's start while every one waited for has
// said so. A survivor that hangs in its collective (NCCL without an error) costs kSurvivorsLeave,
// then gets the stop signal as before. One that does not handle the signal (a plain Python script:
// SIGTERM's default action) gets it at once: it ends it sooner than its own exit would. So does
// one that stops handling it while waited for (checked every kLeavingRecheck): CPython gives the
// signals their default action back once its atexit handlers ran and its output was flushed, and
// only then frees its modules, which took a Lightning survivor 0.5 s of CPU here (torchrun's stop
// ends that part by chance, when its poll comes after the death).

#include <chrono>
#include <functional>
#include <vector>

#include "agent/process/event_loop.h"
#include "agent/workers/worker_process.h"
#include "common/worker_failure.h"

namespace mxrun {

// Idle, a Lightning survivor reached its exit 0.04-0.11 s after its peer's death and was gone by
// about 0.3 s; the margin is for a loaded node (once its interpreter says it is leaving, up to
// kLeavingExit counts).
inline constexpr std::chrono::milliseconds kSurvivorsLeave{500};
inline constexpr std::chrono::milliseconds kLeavingExit{3'000};
inline constexpr std::chrono::milliseconds kLeavingRecheck{20};

// Whether the stop after `failure` waits for the survivors first: a death, not a hang (a hung
// worker's peers are not leaving) or a straggler stopped on purpose.
bool SurvivorsMayLeave(const WorkerFailure& failure);

// Whether the worker or one of its processes has a handler for `signo` (/proc/PID/status,
// SigCgt): without one, the signal ends it at once.
bool HandlesSignal(const WorkerProcess& worker, int signo);

// Calls `signal` once on each running one of `workers`. After `failure` (when given and
// SurvivorsMayLeave), first on those that do not handle `signo` (`handles`), then on each that
// stops handling it, then, once those that do had their time to leave (kSurvivorsLeave, or
// kLeavingExit while all of them said they are leaving; the loop and `reap` run meanwhile), on
// the ones still running; else on all at once.
void SignalSurvivors(EventLoop& loop, const std::vector<WorkerProcess*>& workers, int signo,
                     const WorkerFailure* failure,
                     const std::function<void(WorkerProcess&)>& signal,
                     const std::function<void()>& reap,
                     const std::function<bool(const WorkerProcess&, int)>& handles = HandlesSignal);

}  // namespace mxrun

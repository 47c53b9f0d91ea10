#include "agent/hang/hang_watch.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/signal_names.h"

namespace mxrun {
namespace {

using std::chrono::milliseconds;

std::string Seconds(milliseconds ms) {
  return absl::StrFormat("%.1f s", static_cast<double>(ms.count()) / 1000.0);
}

double WallSeconds(HangWatch::WallTime t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

std::string FormatUnixTime(double seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC",
                          absl::FromUnixMicros(static_cast<int64_t>(std::llround(seconds * 1e6))),
                          absl::UTCTimeZone());
}

}  // namespace

namespace {

bool BoundIsHangTimeout(const HangSettings& settings, bool kept) {
  return kept && !settings.round_join_timeout && settings.heartbeat_timeout.count() > 0;
}

}  // namespace

std::chrono::milliseconds FirstStepBound(const HangSettings& settings, bool kept) {
  if (settings.round_join_timeout) return *settings.round_join_timeout;
  return BoundIsHangTimeout(settings, kept) ? settings.heartbeat_timeout : kDefaultRoundJoinTimeout;
}

std::string FirstStepBoundSource(const HangSettings& settings, bool kept) {
  return absl::StrCat(
      BoundIsHangTimeout(settings, kept) ? "--hang_timeout=" : "--round_join_timeout=",
      Seconds(FirstStepBound(settings, kept)));
}

bool IsSilence(HangRule rule) {
  return rule == HangRule::kHeartbeat || rule == HangRule::kFirstStep;
}

const char* HangRuleName(HangRule rule) {
  switch (rule) {
    case HangRule::kFileTimer:
      return "FileTimer";
    case HangRule::kHeartbeat:
      return "heartbeat";
    case HangRule::kFirstStep:
      return "first step";
    case HangRule::kExitBarrier:
      return "exit barrier";
    case HangRule::kUninterruptible:
      return "uninterruptible sleep";
  }
  return "?";
}

void HangWatch::Reset() {
  workers_.clear();
  timers_.clear();
  barrier_since_.reset();
  barrier_cause_.clear();
}

HangWatch::Worker* HangWatch::Find(int local_rank) {
  auto it = workers_.find(local_rank);
  return it == workers_.end() ? nullptr : &it->second;
}

void HangWatch::WorkerStarted(int local_rank, int global_rank, Time now, bool kept) {
  Worker& worker = workers_[local_rank];
  worker = Worker{};
  worker.global_rank = global_rank;
  worker.running = true;
  worker.started = now;
  worker.kept = kept;
  const milliseconds bound = FirstStepBound(settings_, kept);
  if (beaten_before_ && bound.count() > 0) worker.first_step_due = now + bound + milliseconds(1);
}

void HangWatch::WorkerExited(int local_rank, bool succeeded, Time now) {
  Worker* worker = Find(local_rank);
  if (worker == nullptr || !worker->running) return;
  worker->running = false;
  // Its timers die with it (torchrun clears the timers of processes that are gone).
  for (auto it = timers_.begin(); it != timers_.end();) {
    it = it->second.local_rank == local_rank ? timers_.erase(it) : std::next(it);
  }
  if (succeeded) StartBarrier(absl::StrCat("rank ", worker->global_rank, " exited 0"), now);
}

void HangWatch::PeersFinished(const std::string& who, Time now) { StartBarrier(who, now); }

void HangWatch::StartBarrier(std::string cause, Time now) {
  if (barrier_since_) return;  // the first finisher starts it
  barrier_since_ = now;
  barrier_cause_ = std::move(cause);
}

void HangWatch::HeartbeatSeen(int local_rank, Time when, bool automatic) {
  Worker* worker = Find(local_rank);
  if (worker == nullptr || !worker->running) return;
  if (!automatic || settings_.heartbeat_timeout.count() > 0 || settings_.round_join_timeout) {
    beaten_before_ = true;
  }
  if (!worker->last_beat || when > *worker->last_beat) worker->last_beat = when;
}

void HangWatch::VerdictWithdrawn(int local_rank) {
  if (Worker* worker = Find(local_rank)) worker->judged = false;
}

HangWatch::TimerResult HangWatch::OnTimerRequest(int local_rank, const FileTimerRequest& request,
                                                 WallTime now) {
  Worker* worker = Find(local_rank);
  if (worker == nullptr || !worker->running) return TimerResult::kWorkerNotRunning;
  const auto key = std::make_pair(request.pid, request.scope_id);
  if (request.expiration_time < 0) {  // a release, as torchrun reads it
    return timers_.erase(key) > 0 ? TimerResult::kReleased : TimerResult::kReleaseUnknown;
  }
  if (timers_.count(key) == 0) {
    size_t mine = 0;  // per worker, so that one leaking rank cannot blind the watchdog to others
    for (const auto& [k, timer] : timers_) mine += timer.local_rank == local_rank;
    if (mine >= kMaxTimersPerWorker) return TimerResult::kTooMany;
  }
  timers_[key] = Timer{local_rank, request.expiration_time, request.signal, now};
  return TimerResult::kSet;
}

std::optional<HangWatch::Time> HangWatch::HeartbeatDeadline(const Worker& worker) const {
  if (settings_.heartbeat_timeout.count() <= 0 || !worker.last_beat) return std::nullopt;
  // "Longer than the timeout": judged once the silence exceeds it.
  return *worker.last_beat + settings_.heartbeat_timeout + milliseconds(1);
}

std::optional<HangWatch::Time> HangWatch::FirstStepDeadline(const Worker& worker) const {
  if (worker.last_beat) return std::nullopt;  // it reached a step: the heartbeat rule's now
  return worker.first_step_due;
}

std::vector<HangVerdict> HangWatch::Check(Time now, WallTime wall_now) {
  std::vector<HangVerdict> verdicts;
  const double wall = WallSeconds(wall_now);

  // FileTimer: per pid, as torchrun's FileTimerServer.
  std::map<pid_t, std::vector<std::pair<std::string, Timer>>> expired;
  for (const auto& [key, timer] : timers_) {
    if (timer.expiration_time <= wall) expired[key.first].emplace_back(key.second, timer);
  }
  std::vector<std::pair<double, HangVerdict>> timer_verdicts;
  std::set<int> signalled;  // a worker gets one verdict per check
  for (auto& [pid, list] : expired) {
    for (auto it = timers_.begin(); it != timers_.end();) {
      it = it->first.first == pid ? timers_.erase(it) : std::next(it);
    }
    std::sort(list.begin(), list.end(), [](const auto& a, const auto& b) {
      return a.second.expiration_time < b.second.expiration_time;
    });
    auto chosen = std::find_if(list.begin(), list.end(),
                               [](const auto& item) { return item.second.signal > 0; });
    if (chosen == list.end()) continue;  // no signal: torchrun does not reap it either
    const Timer& timer = chosen->second;
    Worker* worker = Find(timer.local_rank);
    if (worker == nullptr || !worker->running || worker->judged ||
        !signalled.insert(timer.local_rank).second) {
      continue;
    }
    // Not marked judged: the signal may hit only a child of the worker, or one it handles, and
    // then the worker stays subject to every rule (a new timer, its heartbeat, the barrier).
    HangVerdict v;
    v.local_rank = timer.local_rank;
    v.rule = HangRule::kFileTimer;
    v.pid = pid;
    v.signal = timer.signal;
    v.scope_id = chosen->first;
    v.since_heartbeat = SinceHeartbeat(timer.local_rank, now);
    v.detail = absl::StrCat(
        "timer '", v.scope_id, "' of pid ", pid, " expired at ",
        FormatUnixTime(timer.expiration_time), " (",
        Seconds(std::chrono::duration_cast<milliseconds>(
            std::chrono::duration<double>(timer.expiration_time - WallSeconds(timer.set_at)))),
        " after it was set; its signal: ", SignalName(timer.signal), ")");
    timer_verdicts.emplace_back(timer.expiration_time, std::move(v));
  }
  std::stable_sort(timer_verdicts.begin(), timer_verdicts.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (auto& [when, v] : timer_verdicts) verdicts.push_back(std::move(v));

  // Heartbeats: the longest silence first. Workers that went silent together (a stopped rank and
  // its peers waiting for it in a collective) are judged together, so that the agent can tell
  // which of them is the cause: once one is past the timeout, those within kTogether of it are too.
  const milliseconds timeout = settings_.heartbeat_timeout;
  const milliseconds together = std::min(timeout / 10, milliseconds(1000));
  bool any_due = false;
  for (const auto& [local_rank, worker] : workers_) {
    std::optional<Time> deadline = HeartbeatDeadline(worker);
    any_due = any_due || (worker.running && !worker.judged && deadline && now >= *deadline);
  }
  std::vector<HangVerdict> silent;
  for (auto& [local_rank, worker] : workers_) {
    if (!any_due || !worker.running || worker.judged || !worker.last_beat ||
        signalled.count(local_rank) > 0) {
      continue;
    }
    const milliseconds silence = std::chrono::duration_cast<milliseconds>(now - *worker.last_beat);
    const bool past = now >= *HeartbeatDeadline(worker);
    if (!past && silence < timeout - together) continue;
    worker.judged = true;
    HangVerdict v;
    v.local_rank = local_rank;
    v.rule = HangRule::kHeartbeat;
    v.since_heartbeat = silence;
    v.detail = past ? absl::StrCat("no heartbeat for ", Seconds(silence),
                                   " (--hang_timeout=", Seconds(timeout), ")")
                    : absl::StrCat(
                          "no heartbeat for ", Seconds(silence),
                          ", silent together with a worker past --hang_timeout=", Seconds(timeout));
    silent.push_back(std::move(v));
  }
  std::stable_sort(silent.begin(), silent.end(), [](const HangVerdict& a, const HangVerdict& b) {
    return *a.since_heartbeat > *b.since_heartbeat;
  });
  for (HangVerdict& v : silent) verdicts.push_back(std::move(v));

  // First step: by local rank (they started together).
  for (auto& [local_rank, worker] : workers_) {
    std::optional<Time> due = FirstStepDeadline(worker);
    if (!due || now < *due || !worker.running || worker.judged || signalled.count(local_rank) > 0) {
      continue;
    }
    worker.judged = true;
    HangVerdict v;
    v.local_rank = local_rank;
    v.rule = HangRule::kFirstStep;
    v.detail =
        absl::StrCat("no step reported in the ",
                     Seconds(std::chrono::duration_cast<milliseconds>(now - worker.started)),
                     " since its round began (", FirstStepBoundSource(settings_, worker.kept), ")");
    verdicts.push_back(std::move(v));
  }

  // The exit barrier: everyone still running, by local rank.
  if (barrier_since_ && settings_.exit_barrier_timeout.count() > 0 &&
      now - *barrier_since_ > settings_.exit_barrier_timeout) {
    const auto waited = std::chrono::duration_cast<milliseconds>(now - *barrier_since_);
    for (auto& [local_rank, worker] : workers_) {
      if (!worker.running || worker.judged || signalled.count(local_rank) > 0) continue;
      worker.judged = true;
      HangVerdict v;
      v.local_rank = local_rank;
      v.rule = HangRule::kExitBarrier;
      v.since_heartbeat = SinceHeartbeat(local_rank, now);
      v.detail =
          absl::StrCat("still running ", Seconds(waited), " after ", barrier_cause_,
                       " (--exit_barrier_timeout=", Seconds(settings_.exit_barrier_timeout), ")");
      verdicts.push_back(std::move(v));
    }
  }
  return verdicts;
}

std::optional<HangWatch::Time> HangWatch::NextDeadline(Time now, WallTime wall_now) const {
  std::optional<Time> next;
  auto consider = [&next](Time t) {
    if (!next || t < *next) next = t;
  };
  const double wall = WallSeconds(wall_now);
  for (const auto& [key, timer] : timers_) {
    const double left = std::max(0.0, timer.expiration_time - wall);
    consider(now +
             std::chrono::duration_cast<milliseconds>(
                 std::chrono::duration<double>(std::min(left, 1e7))) +
             milliseconds(1));
  }
  bool any_running = false;
  for (const auto& [local_rank, worker] : workers_) {
    if (!worker.running || worker.judged) continue;
    any_running = true;
    if (std::optional<Time> deadline = HeartbeatDeadline(worker)) consider(*deadline);
    if (std::optional<Time> deadline = FirstStepDeadline(worker)) consider(*deadline);
  }
  if (any_running && barrier_since_ && settings_.exit_barrier_timeout.count() > 0) {
    consider(*barrier_since_ + settings_.exit_barrier_timeout + milliseconds(1));
  }
  return next;
}

std::optional<std::chrono::milliseconds> HangWatch::SinceHeartbeat(int local_rank, Time now) const {
  auto it = workers_.find(local_rank);
  if (it == workers_.end() || !it->second.last_beat) return std::nullopt;
  return std::chrono::duration_cast<milliseconds>(now - *it->second.last_beat);
}

}  // namespace mxrun

#include "agent/hang/hang_monitor.h"

#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "agent/hang/collective_failure.h"
#include "agent/process/descendants.h"
#include "agent/process/proc_stat.h"
#include "common/files.h"
#include "common/signal_names.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

using std::chrono::milliseconds;

constexpr int kMaxBadLinesLogged = 20;
constexpr int kMaxAncestorSteps = 64;

// How often heartbeat files are polled: a quarter of the timeout, within [50 ms, 1 s].
milliseconds PollPeriod(milliseconds timeout) {
  return std::clamp(timeout / 4, milliseconds(50), milliseconds(1000));
}

bool SameTime(const timespec& a, const timespec& b) {
  return a.tv_sec == b.tv_sec && a.tv_nsec == b.tv_nsec;
}

std::chrono::system_clock::time_point FromTimespec(const timespec& t) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(
          std::chrono::seconds(t.tv_sec) + std::chrono::nanoseconds(t.tv_nsec)));
}

}  // namespace

// How long silent workers of a multi-node job wait for another node to name the culprit: about
// the timeout itself (that node judges at the same moment, then takes its diagnostics before it
// reports), between 2 and 10 s.
std::chrono::milliseconds PeerCulpritGrace(std::chrono::milliseconds heartbeat_timeout) {
  return std::clamp(heartbeat_timeout, std::chrono::milliseconds(2000),
                    std::chrono::milliseconds(10000));
}

HangMonitor::HangMonitor(HangMonitorConfig config, EventLoop& loop,
                         std::unique_ptr<FileTimerPipe> pipe)
    : config_(std::move(config)),
      loop_(loop),
      watch_(config_.settings),
      pipe_(std::move(pipe)),
      timer_(loop),
      dwell_(config_.uninterruptible_timeout),
      culprit_wait_(PeerCulpritGrace(config_.settings.heartbeat_timeout)),
      after_turn_(loop.AfterEachTurn([this] { Check(); })) {
  if (pipe_ == nullptr) return;
  loop_.Watch(pipe_->fd(), [this] {
    pipe_->OnReadable([this](const absl::StatusOr<FileTimerRequest>& request,
                             std::string_view line) { OnTimerLine(request, line); });
  });
}

HangMonitor::~HangMonitor() {
  if (pipe_) loop_.Unwatch(pipe_->fd());
}

void HangMonitor::Watch(WorkerGroup* group) {
  group_ = group;
  watch_.Reset();
  dwell_.Reset();
  culprit_wait_.Reset();
  exits_seen_.clear();
  stamps_.clear();
  if (group_ == nullptr) {
    timer_.Cancel();  // nothing to check until a group runs again
    armed_for_.reset();
    return;
  }
  const auto now = std::chrono::steady_clock::now();
  last_state_poll_ = now;
  std::set<pid_t> watched;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.pid <= 0) continue;
    // A process of the last round's group took this one in-process (its setup is done).
    watch_.WorkerStarted(worker.local_rank, worker.global_rank, now,
                         watched_pids_.count(worker.pid) > 0);
    watched.insert(worker.pid);
  }
  watched_pids_ = std::move(watched);
  last_poll_ = now;
}

void HangMonitor::RankStarted(int local_rank) {
  if (group_ == nullptr) return;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.local_rank != local_rank || worker.pid <= 0 || !worker.running) continue;
    watch_.WorkerStarted(local_rank, worker.global_rank, std::chrono::steady_clock::now(), false);
    watched_pids_.insert(worker.pid);
  }
}

void HangMonitor::PeersFinished(const std::string& who) {
  if (group_ == nullptr) return;
  watch_.PeersFinished(who, std::chrono::steady_clock::now());
}

std::optional<int> HangMonitor::OwnerOf(pid_t pid) const {
  if (group_ == nullptr) return std::nullopt;
  std::map<pid_t, int> workers;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.running) workers[worker.pid] = worker.local_rank;
  }
  const pid_t self = getpid();
  for (int step = 0; step < kMaxAncestorSteps && pid > 1 && pid != self; ++step) {
    if (auto it = workers.find(pid); it != workers.end()) return it->second;
    pid = ReadLiveParent(pid);
  }
  return std::nullopt;
}

void HangMonitor::OnTimerLine(const absl::StatusOr<FileTimerRequest>& request,
                              std::string_view line) {
  // Between rounds and while a group stops (its workers release their timers as they unwind),
  // there is nothing to watch: requests then are dropped without a word.
  if (group_ == nullptr) return;
  if (!request.ok()) {
    if (bad_lines_logged_ < kMaxBadLinesLogged) {
      spdlog::warn("FileTimer: ignored a request ({}): {}{}",
                   std::string(request.status().message()), line.substr(0, 200),
                   ++bad_lines_logged_ == kMaxBadLinesLogged
                       ? " (further bad requests are not logged)"
                       : "");
    }
    return;
  }
  std::optional<int> owner = OwnerOf(request->pid);
  if (!owner) {
    if (bad_lines_logged_ < kMaxBadLinesLogged) {
      ++bad_lines_logged_;
      spdlog::warn(
          "FileTimer: ignored a request from pid {} (scope '{}'): it is not one of this "
          "agent's running workers or their descendants",
          request->pid, request->scope_id);
    }
    return;
  }
  switch (watch_.OnTimerRequest(*owner, *request, std::chrono::system_clock::now())) {
    case HangWatch::TimerResult::kSet:
    case HangWatch::TimerResult::kReleased:
    case HangWatch::TimerResult::kReleaseUnknown:
    case HangWatch::TimerResult::kWorkerNotRunning:
      return;
    case HangWatch::TimerResult::kTooMany:
      if (bad_lines_logged_ < kMaxBadLinesLogged) {
        ++bad_lines_logged_;
        spdlog::warn("FileTimer: ignored timer '{}' of pid {}: its worker holds {} timers already",
                     request->scope_id, request->pid, HangWatch::kMaxTimersPerWorker);
      }
      return;
  }
}

void HangMonitor::ProgressSeen(int local_rank, bool automatic) {
  // Fed whatever --hang_timeout says: the first-step rule needs the beats too.
  if (group_ == nullptr) return;
  watch_.HeartbeatSeen(local_rank, std::chrono::steady_clock::now(), automatic);
}

void HangMonitor::PollHeartbeats(HangWatch::Time now) {
  const milliseconds since_poll = std::chrono::duration_cast<milliseconds>(now - last_poll_);
  last_poll_ = now;
  const auto wall_now = std::chrono::system_clock::now();
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (!worker.running || worker.heartbeat_file.empty()) continue;
    struct stat st {};
    if (stat(worker.heartbeat_file.c_str(), &st) != 0) continue;  // not beaten yet
    Stamp& old = stamps_[worker.local_rank];
    const bool changed = !old.exists || !SameTime(old.mtime, st.st_mtim) ||
                         !SameTime(old.ctime, st.st_ctim) || old.size != st.st_size ||
                         old.inode != st.st_ino;
    if (!changed) continue;
    old = Stamp{true, st.st_mtim, st.st_ctim, st.st_size, st.st_ino};
    // The beat happened at the file's time stamp, but never before the last poll (which saw
    // nothing new): a wall-clock step cannot age a beat beyond what was observed.
    const auto age = std::chrono::duration_cast<milliseconds>(
        wall_now - FromTimespec(st.st_mtime > st.st_ctime ? st.st_mtim : st.st_ctim));
    watch_.HeartbeatSeen(worker.local_rank, now - std::clamp(age, milliseconds(0), since_poll));
  }
}

void HangMonitor::Check() {
  CheckNow();
  Rearm();
}

void HangMonitor::Rearm() {
  const std::optional<Deadline> next = NextWake();
  if (next == armed_for_) return;
  timer_.Cancel();
  armed_for_ = next;
  if (next) {
    timer_.At(*next, [this] {
      armed_for_.reset();
      Check();
    });
  }
}

void HangMonitor::CheckNow() {
  // A group that has already failed or ended is the agent's to handle, not ours to diagnose.
  if (group_ == nullptr || group_->state() != WorkerGroup::State::kRunning) return;
  const auto now = std::chrono::steady_clock::now();
  // This runs at every turn of the agent's loop (every output chunk): look at the workers only
  // when one has ended since the last look.
  if (group_->ended() != static_cast<int>(exits_seen_.size())) {
    for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
      if (!worker.running && exits_seen_.insert(worker.local_rank).second) {
        watch_.WorkerExited(worker.local_rank, worker.exited_ok, now);
      }
    }
  }
  const milliseconds timeout = config_.settings.heartbeat_timeout;
  if (timeout.count() > 0) {
    std::optional<HangWatch::Time> due = watch_.NextDeadline(now, std::chrono::system_clock::now());
    if (now - last_poll_ >= PollPeriod(timeout) || (due && *due <= now)) PollHeartbeats(now);
  }
  std::vector<HangVerdict> verdicts = watch_.Check(now, std::chrono::system_clock::now());
  if (dwell_.enabled() && now - last_state_poll_ >= UninterruptiblePollPeriod(dwell_.timeout())) {
    for (HangVerdict& stuck : PollStates(now)) {
      const bool judged = std::any_of(verdicts.begin(), verdicts.end(), [&](const HangVerdict& v) {
        return v.local_rank == stuck.local_rank && v.rule != HangRule::kFileTimer;
      });
      if (!judged) verdicts.push_back(std::move(stuck));
    }
  }
  verdicts = SiftForPeerCulprit(std::move(verdicts), now);
  if (!verdicts.empty()) Act(verdicts);
}

std::vector<int> HangMonitor::StartingRanks(HangWatch::Time now, const std::set<int>& late) const {
  std::vector<int> starting;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.running && !worker.heartbeat_file.empty() && late.count(worker.local_rank) == 0 &&
        !watch_.SinceHeartbeat(worker.local_rank, now)) {
      starting.push_back(worker.global_rank);
    }
  }
  return starting;
}

bool HangMonitor::CannotRun(int local_rank) const {
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.local_rank != local_rank || !worker.running) continue;
    std::optional<ProcStat> stat = ReadProcStat(worker.pid);
    return stat && (IsStoppedState(stat->state) || stat->state == 'D');
  }
  return false;
}

std::vector<HangVerdict> HangMonitor::SiftForPeerCulprit(std::vector<HangVerdict> verdicts,
                                                         HangWatch::Time now) {
  if (verdicts.empty() && !culprit_wait_.holding()) return verdicts;
  const bool multi_node = group_->world_size() > static_cast<int>(group_->Workers().size());
  const bool local_culprit =
      std::any_of(verdicts.begin(), verdicts.end(),
                  [this](const HangVerdict& v) { return CannotRun(v.local_rank); });
  // On one node as well: a worker of this group that has not beaten yet (a process started for an
  // in-process round, still loading) holds the kept ones in their join, silent; they get the same
  // grace, instead of being judged for waiting on it.
  // A worker judged for taking no first step is late, not still starting.
  std::set<int> late;
  for (const HangVerdict& v : verdicts) {
    if (v.rule == HangRule::kFirstStep) late.insert(v.local_rank);
  }
  const std::vector<int> starting = StartingRanks(now, late);
  const bool was_holding = culprit_wait_.holding();
  std::vector<HangVerdict> out =
      culprit_wait_.Sift(std::move(verdicts), multi_node || !starting.empty(), local_culprit, now);
  if (!was_holding && culprit_wait_.holding()) {
    const double grace = static_cast<double>(culprit_wait_.grace().count()) / 1000.0;
    if (multi_node) {
      spdlog::warn(
          "this node's workers went silent, yet run: waiting up to {:g} s for another "
          "node to name a rank that cannot run (stopped or stuck, holding these up in a "
          "collective) before judging them hung",
          grace);
    } else {
      spdlog::warn(
          "this node's workers went silent, yet run, while rank(s) {} still start (no "
          "heartbeat yet): waiting up to {:g} s for them before judging the silent ones "
          "hung",
          absl::StrJoin(starting, ", "), grace);
    }
  }
  // Held ones that beat again meanwhile are not hung after all, and are watched again: a worker
  // held while it waited in a join, that then trained on and stopped later in the same round, was
  // otherwise never judged on its node, and its waiting peers on other nodes were judged instead
  // (found by the 20-minute soak: two hangs and a full restart for one SIGSTOP).
  const milliseconds timeout = config_.settings.heartbeat_timeout;
  out.erase(std::remove_if(out.begin(), out.end(),
                           [&](const HangVerdict& v) {
                             const std::optional<milliseconds> silent =
                                 watch_.SinceHeartbeat(v.local_rank, now);
                             const bool beat_again =
                                 (v.rule == HangRule::kHeartbeat && timeout.count() > 0 && silent &&
                                  *silent < timeout) ||
                                 (v.rule == HangRule::kFirstStep && silent);
                             if (beat_again) watch_.VerdictWithdrawn(v.local_rank);
                             return beat_again;
                           }),
            out.end());
  return out;
}

std::vector<HangVerdict> HangMonitor::PollStates(HangWatch::Time now) {
  last_state_poll_ = now;
  std::vector<UninterruptibleWatch::Observation> pass;
  std::map<int, int> global_ranks;  // by local rank
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (!worker.running || worker.pid <= 0) continue;
    std::optional<ProcStat> stat = ReadProcStat(worker.pid);
    pass.push_back({worker.local_rank, worker.pid, stat ? stat->state : '\0'});
    global_ranks[worker.local_rank] = worker.global_rank;
  }
  UninterruptibleWatch::Verdicts result = dwell_.Observe(pass, now);
  for (const UninterruptibleWatch::Entered& entered : result.entered) {
    spdlog::warn(
        "worker rank {} (local_rank {}, pid {}) entered uninterruptible sleep (D-state); "
        "will mark it hung if it remains for {:g} s",
        global_ranks[entered.local_rank], entered.local_rank, entered.pid,
        static_cast<double>(dwell_.timeout().count()) / 1000.0);
  }
  std::vector<HangVerdict> verdicts;
  for (UninterruptibleWatch::Stuck& stuck : result.stuck) {
    HangVerdict v;
    v.local_rank = stuck.local_rank;
    v.rule = HangRule::kUninterruptible;
    v.pid = stuck.pid;
    v.since_heartbeat = watch_.SinceHeartbeat(stuck.local_rank, now);
    // Where in the kernel it waits: what a user-space stack dump cannot show.
    const std::string wchan = ReadWchan(stuck.pid);
    const std::vector<std::string> stack = ReadKernelStack(stuck.pid);
    v.detail = absl::StrCat(
        stuck.detail, "; wchan: ", wchan.empty() ? "unknown" : wchan, "; kernel stack: ",
        stack.empty() ? std::string("not readable (/proc/PID/stack needs root)")
                      : absl::StrJoin(stack.begin(),
                                      stack.begin() + std::min<size_t>(stack.size(), 6), " < "));
    verdicts.push_back(std::move(v));
  }
  return verdicts;
}

std::optional<HangMonitor::Deadline> HangMonitor::NextWake() const {
  if (group_ == nullptr) return std::nullopt;
  const auto now = std::chrono::steady_clock::now();
  std::optional<Deadline> next = watch_.NextDeadline(now, std::chrono::system_clock::now());
  if (config_.settings.heartbeat_timeout.count() > 0) {
    const Deadline poll = last_poll_ + PollPeriod(config_.settings.heartbeat_timeout);
    if (!next || poll < *next) next = poll;
  }
  if (dwell_.enabled() && group_->state() == WorkerGroup::State::kRunning) {
    const Deadline poll = last_state_poll_ + UninterruptiblePollPeriod(dwell_.timeout());
    if (!next || poll < *next) next = poll;
  }
  if (std::optional<Deadline> held = culprit_wait_.deadline(); held && (!next || *held < *next)) {
    next = held;
  }
  return next;
}

std::string HangMonitor::MakeDiagnosticsDir() {
  // With a kept log folder the report lands beside the logs; a scratch folder would be removed at
  // exit, taking the report with it, so then a folder of its own is made (and kept).
  std::string run_id = config_.run_id;  // a file name: '/' and the like become '_'
  for (char& c : run_id) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '.') c = '_';
  }
  std::string base = group_->attempt_dir_kept()
                         ? group_->AttemptDir() + "/hang"
                         : absl::StrCat(config_.fallback_dir, "/mxrun-hang-", run_id);
  std::string templ = base + "-XXXXXX";
  MakeDirs(group_->attempt_dir_kept() ? group_->AttemptDir() : config_.fallback_dir);
  if (mkdtemp(templ.data()) == nullptr) {
    spdlog::warn("cannot create a folder for hang diagnostics at {}: {}", templ, ErrnoText(errno));
    return "";
  }
  return templ;
}

KeepReading HangMonitor::ServeTimerPipe() {
  // Healthy workers' FileTimer clients fail when the pipe fills up.
  KeepReading keep_reading;
  if (pipe_) {
    keep_reading.fd = pipe_->fd();
    keep_reading.on_readable = [this] {
      pipe_->OnReadable([this](const absl::StatusOr<FileTimerRequest>& request,
                               std::string_view line) { OnTimerLine(request, line); });
    };
  }
  return keep_reading;
}

std::vector<FlightTarget> HangMonitor::FlightTargets(std::set<int>* local_ranks) const {
  std::vector<FlightTarget> targets;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    local_ranks->insert(worker.global_rank);
    if (!worker.flight_socket.empty()) {
      targets.push_back({worker.global_rank, worker.pid, worker.flight_socket, worker.running});
    }
  }
  return targets;
}

void HangMonitor::TakeFlightRecordsOnCollectiveFailure(WorkerFailure& failure) {
  if (group_ == nullptr || !config_.flight.on || failure.hang.hung()) return;
  const std::string sign = CollectiveFailureSign(failure);
  if (sign.empty()) return;
  failure.collective_sign = sign;
  spdlog::warn(
      "worker rank {} failed in a collective (\"{}\"): taking every live rank's flight "
      "recorder before anything stops",
      failure.global_rank, sign);
  const KeepReading keep_reading = ServeTimerPipe();
  failure.flight_dir = MakeDiagnosticsDir();
  std::set<int> local_ranks;
  const std::vector<FlightTarget> targets = FlightTargets(&local_ranks);
  failure.flight =
      TakeFlightRecords(config_.flight, targets, failure.flight_dir, group_->world_size(),
                        group_->round_number(), local_ranks, keep_reading);
}

FlightRecordSet HangMonitor::TakeFlightRecordsForPeer(int round, const std::string& requester) {
  if (group_ == nullptr) return FlightRecordSet{round};
  std::vector<FlightTarget> running;
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    if (worker.running) running.push_back({worker.global_rank, worker.pid, worker.flight_socket});
  }
  spdlog::warn(
      "{} judged a hang: taking the flight recorders of this node's {} running rank(s) "
      "before anything stops",
      requester.empty() ? "another node" : requester, running.size());
  return mxrun::TakeFlightRecordsForPeer(config_.flight, running,
                                         running.empty() ? "" : MakeDiagnosticsDir(), round);
}

void HangMonitor::Act(std::vector<HangVerdict> verdicts) {
  const auto now = std::chrono::steady_clock::now();
  // A FileTimer whose process is gone (a child that died holding its timer) or no longer belongs to
  // the worker has nobody left to signal, and tells nothing about the worker.
  verdicts.erase(
      std::remove_if(verdicts.begin(), verdicts.end(),
                     [this](const HangVerdict& v) {
                       if (v.rule != HangRule::kFileTimer || OwnerOf(v.pid) == v.local_rank) {
                         return false;
                       }
                       spdlog::info(
                           "FileTimer: timer '{}' of pid {} expired, but that "
                           "process is gone; nothing to signal",
                           v.scope_id, v.pid);
                       return true;
                     }),
      verdicts.end());
  if (verdicts.empty()) return;
  // A worker that cannot run (stopped by SIGSTOP or a debugger, or in uninterruptible sleep) found
  // together with others is named first: the others are most likely waiting for it in a
  // collective. Only it is marked hung then; the silent ones it holds up stay, and take the next
  // round in-process where they can (they hold the state), as after any rank's death.
  // A local worker that cannot run, not judged yet (its last beat came a little later, or a busy
  // machine saw it later): the silent ones wait for it, so it is the one judged.
  for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    const bool judged = std::any_of(verdicts.begin(), verdicts.end(), [&](const HangVerdict& v) {
      return v.local_rank == worker.local_rank;
    });
    if (judged || !worker.running || !CannotRun(worker.local_rank)) continue;
    HangVerdict culprit;
    culprit.local_rank = worker.local_rank;
    culprit.rule = HangRule::kHeartbeat;
    culprit.pid = worker.pid;
    const std::optional<milliseconds> silent = watch_.SinceHeartbeat(worker.local_rank, now);
    culprit.detail = absl::StrCat(
        "cannot run (stopped or in uninterruptible sleep) while rank(s) "
        "of its node wait for it; no heartbeat for ",
        absl::StrFormat("%.1f", silent ? silent->count() / 1000.0 : 0.0), " s");
    verdicts.push_back(std::move(culprit));
  }
  auto cannot_run = [this](const HangVerdict& v) {
    for (const WorkerGroup::WorkerStatus& worker : group_->Workers()) {
      if (worker.local_rank != v.local_rank) continue;
      std::optional<ProcStat> stat = ReadProcStat(worker.pid);
      return stat && (IsStoppedState(stat->state) || stat->state == 'D');
    }
    return false;
  };
  const size_t culprits = static_cast<size_t>(
      std::stable_partition(verdicts.begin(), verdicts.end(), cannot_run) - verdicts.begin());
  const bool waiting_peers = culprits > 0 && culprits < verdicts.size();
  std::map<int, WorkerGroup::WorkerStatus> workers;
  for (WorkerGroup::WorkerStatus& worker : group_->Workers()) {
    workers[worker.local_rank] = std::move(worker);
  }
  std::vector<HungWorker> hung;
  std::vector<int> ranks;
  for (const HangVerdict& verdict : verdicts) {
    const WorkerGroup::WorkerStatus& worker = workers[verdict.local_rank];
    const bool waits = waiting_peers && ranks.size() >= culprits && IsSilence(verdict.rule);
    spdlog::warn("worker rank {} (local_rank {}, pid {}) is {} ({}): {}", worker.global_rank,
                 worker.local_rank, worker.pid, waits ? "silent" : "hung",
                 HangRuleName(verdict.rule), verdict.detail);
    HungWorker h;
    h.global_rank = worker.global_rank;
    h.local_rank = worker.local_rank;
    // A FileTimer set by a child of the worker: that child is the process that hung.
    h.pid = verdict.rule == HangRule::kFileTimer ? verdict.pid : worker.pid;
    h.rule = HangRuleName(verdict.rule);
    h.uninterruptible = verdict.rule == HangRule::kUninterruptible;
    h.detail = verdict.detail;
    h.heartbeat_watched = config_.settings.heartbeat_timeout.count() > 0;
    h.since_heartbeat = watch_.SinceHeartbeat(worker.local_rank, now);
    h.last_lines = group_->LastLinesOf(worker.local_rank);
    h.nccl_trace_file = worker.nccl_trace_file;
    h.started_at = worker.started_at;
    hung.push_back(std::move(h));
    ranks.push_back(worker.global_rank);
  }
  // The FileTimer pipe is served meanwhile (while the flight recorders are taken too).
  const KeepReading keep_reading = ServeTimerPipe();
  const std::string dir = MakeDiagnosticsDir();
  // Every live rank's flight recorder first, while nothing is stopped or traced: the ranks
  // waiting in a collective say which one they wait for.
  std::set<int> local_ranks;
  const std::vector<FlightTarget> targets = FlightTargets(&local_ranks);
  const std::vector<std::string> flight =
      TakeFlightRecords(config_.flight, targets, dir, group_->world_size(), group_->round_number(),
                        local_ranks, keep_reading);
  HangDiagnostics diagnostics =
      CollectHangDiagnostics(hung, dir, config_.diagnostics, keep_reading);
  if (!dir.empty()) {
    spdlog::warn("hang diagnostics of rank {} written to {} in {:.2f} s",
                 absl::StrJoin(ranks, ", "), dir,
                 static_cast<double>(diagnostics.took.count()) / 1000.0);
  }
  for (const HangVerdict& verdict : verdicts) {
    WorkerHang hang;
    hang.rule = HangRuleName(verdict.rule);
    hang.detail = verdict.detail;
    hang.diagnostics_dir = dir;
    // Every hung worker of this node in the short form: which one is the culprit is often read
    // off the others (a stopped rank, its peers waiting in a collective).
    for (const HungWorker& worker : hung) {  // in verdict order: the root cause first
      const std::vector<std::string>& lines = diagnostics.short_form[worker.local_rank];
      hang.diagnostics.insert(hang.diagnostics.end(), lines.begin(), lines.end());
    }
    hang.diagnostics.insert(hang.diagnostics.end(), flight.begin(), flight.end());
    const bool waits = waiting_peers && static_cast<size_t>(&verdict - verdicts.data()) >= culprits;
    if (waits && IsSilence(verdict.rule)) {
      spdlog::warn(
          "worker rank {} is silent while rank {} cannot run: taken to wait for it, not "
          "hung itself",
          workers[verdict.local_rank].global_rank,
          workers[verdicts.front().local_rank].global_rank);
      continue;
    }
    if (verdict.rule != HangRule::kFileTimer) {
      group_->MarkHung(verdict.local_rank, hang);
      continue;
    }
    // The FileTimer's own remedy, as torchrun applies it; checked again that the process still
    // belongs to that worker (a pid may have been reused while diagnostics ran).
    if (OwnerOf(verdict.pid) != verdict.local_rank) {
      spdlog::warn("FileTimer: pid {} no longer belongs to rank {}; not signalled", verdict.pid,
                   workers[verdict.local_rank].global_rank);
      continue;
    }
    group_->NoteHang(verdict.local_rank, hang);
    if (kill(verdict.pid, verdict.signal) != 0) {
      spdlog::warn("FileTimer: cannot send {} to pid {}: {}", SignalName(verdict.signal),
                   verdict.pid, ErrnoText(errno));
    }
  }
}

}  // namespace mxrun

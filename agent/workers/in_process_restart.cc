#include "agent/workers/in_process_restart.h"

#include <dirent.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>

#include <algorithm>
#include <optional>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "agent/process/descendants.h"
#include "agent/process/proc_stat.h"
#include "common/signal_names.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

// A standby started unbound: its rank's CPUs now apply to every thread of it and of its children
// (its memory policy cannot be changed from outside; pages it touches from now on follow the
// CPUs it runs on).
void RepinProcessTree(pid_t root, const std::vector<int>& cpus) {
  if (cpus.empty()) return;
  const int max_cpu = *std::max_element(cpus.begin(), cpus.end());
  cpu_set_t* set = CPU_ALLOC(max_cpu + 1);
  const size_t size = CPU_ALLOC_SIZE(max_cpu + 1);
  CPU_ZERO_S(size, set);
  for (int cpu : cpus) CPU_SET_S(cpu, size, set);
  std::vector<pid_t> processes = ListDescendants(root, {});
  processes.push_back(root);
  for (pid_t process : processes) {
    DIR* tasks = opendir(absl::StrCat("/proc/", process, "/task").c_str());
    if (tasks == nullptr) continue;
    while (dirent* entry = readdir(tasks)) {
      int tid = 0;
      if (absl::SimpleAtoi(entry->d_name, &tid)) sched_setaffinity(tid, size, set);
    }
    closedir(tasks);
  }
  CPU_FREE(set);
}

}  // namespace

InProcessRestart::InProcessRestart(WorkerGroup& group, EventLoop& loop, DeathGuardian& guardian)
    : group_(group),
      loop_(loop),
      spec_(group.spec()),
      guardian_(guardian),
      standby_start_(group.spec().prestart, loop),
      await_timer_(loop) {}

InProcessRestart::~InProcessRestart() {
  stopping_ = true;
  for (auto& standby : standbys_) group_.Release(*standby);
}

void InProcessRestart::RoundBegan(const RoundAssignment& round) { Begin(round, true); }

void InProcessRestart::Begin(const RoundAssignment& round, bool group_start) {
  round_ = round;
  standby_start_.RoundBegan(group_start, [this] { MaybeStartStandbys(); });
  pending_ = spec_.standby_workers > 0;
  replaced_this_round_ = 0;
  awaited_.clear();
  await_timer_.Cancel();
}

void InProcessRestart::StartStandbys(const RoundAssignment& round) {
  while (static_cast<int>(standbys_.size()) < spec_.standby_workers) {
    std::unique_ptr<WorkerProcess> standby = group_.SpawnStandby(round);
    if (standby == nullptr) return;  // said why; try again with the next round
    spdlog::info("standby worker started (pid {})", standby->pid);
    standbys_.push_back(std::move(standby));
  }
}

void InProcessRestart::MaybeStartStandbys() {
  HandAwaitedRanks();
  // Not while a rank waits for a standby: the waiting one is this round's spare, and another
  // would compete with it for the cores; the top-up comes once it has its rank.
  if (!pending_ || !awaited_.empty() || group_.first_failure()) return;
  // Once the workers have had the cores for their own start (standby_start.h).
  if (!standby_start_.Due([this] { return group_.AllJoined(round_.round); })) return;
  pending_ = false;
  StartStandbys(round_);
}

bool InProcessRestart::OnChildExit(pid_t pid, int wait_status) {
  for (auto it = standbys_.begin(); it != standbys_.end(); ++it) {
    WorkerProcess& standby = **it;
    if (standby.pid != pid || !standby.running) continue;
    standby.running = false;
    group_.Release(standby);
    standbys_.erase(it);
    if (stopping_) return true;
    // Replaced at once, so that the next failure still finds a warm spare; at most as many times
    // per round as there are standbys, so that one that cannot start is not restarted in a loop.
    const bool replace =
        !pending_ && !group_.first_failure() && replaced_this_round_ < spec_.standby_workers;
    spdlog::warn("standby worker (pid {}) ended ({}); {}", pid,
                 WIFSIGNALED(wait_status) ? SignalName(WTERMSIG(wait_status))
                                          : absl::StrCat("exit code ", WEXITSTATUS(wait_status)),
                 replace ? "starting another in its place"
                         : "the group has one spare fewer until the next round");
    if (replace) {
      ++replaced_this_round_;
      StartStandbys(round_);
    }
    return true;
  }
  return false;
}

void InProcessRestart::SignalStandbys(int signo) {
  for (const auto& standby : standbys_) {
    if (standby->running) kill(-standby->pid, signo);
  }
}

void InProcessRestart::StopStandbys() {
  stopping_ = true;
  for (auto& standby : standbys_) {
    if (standby->running) kill(-standby->pid, SIGKILL);
  }
}

bool InProcessRestart::HasReadyPrestarts() const {
  if (!spec_.prestart) return false;
  for (const auto& standby : standbys_) {
    if (Keepable(*standby)) return true;
  }
  return false;
}

std::vector<WorkerGroup::WorkerStatus> InProcessRestart::StopUnkeepable(
    int signo, std::chrono::milliseconds grace, const std::function<void()>& reap) {
  const std::vector<WorkerGroup::WorkerStatus> before = group_.Workers();
  group_.StopWhere([](const WorkerProcess& w) { return !Keepable(w); }, signo, grace, reap);
  std::vector<WorkerGroup::WorkerStatus> stopped;
  for (const WorkerGroup::WorkerStatus& now : group_.Workers()) {
    for (const WorkerGroup::WorkerStatus& was : before) {
      if (was.running && !now.running && now.pid == was.pid) stopped.push_back(was);
    }
  }
  // What the ended workers left behind (their process groups, orphans re-parented to the agent);
  // the kept workers' own children, and the standbys, run on.
  std::set<pid_t> spare = {guardian_.pid()};
  for (auto& standby : standbys_) spare.insert(standby->pid);
  for (WorkerProcess* worker : group_.RunningWorkers()) {
    if (Keepable(*worker)) spare.insert(worker->pid);
  }
  for (const WorkerGroup::WorkerStatus& worker : group_.Workers()) {
    if (worker.pid > 0 && spare.count(worker.pid) == 0) kill(-worker.pid, SIGKILL);
  }
  KillDescendants(spare);
  return stopped;
}

bool InProcessRestart::PromoteStandby(int local_rank, const RoundAssignment& round,
                                      double failure_time, std::vector<std::string>& started) {
  for (auto it = standbys_.begin(); it != standbys_.end(); ++it) {
    if (!Keepable(**it)) continue;  // still loading
    // A stopped standby (SIGSTOP, a debugger) would hold the round as a rank that never joins: it
    // goes, and is replaced as any standby that dies.
    if (const std::optional<ProcStat> stat = ReadProcStat((*it)->pid);
        stat && IsStoppedState(stat->state)) {
      spdlog::warn("standby worker (pid {}) is in state {}: not given a rank; stopping it",
                   (*it)->pid, ProcStateName(stat->state));
      kill(-(*it)->pid, SIGKILL);
      continue;
    }
    std::unique_ptr<WorkerProcess> standby = std::move(*it);
    standbys_.erase(it);
    WorkerProcess& worker = *standby;
    // Its rank's CPUs before it learns the rank, so that it never runs a step elsewhere.
    if (local_rank < static_cast<int>(spec_.numa.size())) {
      RepinProcessTree(worker.pid, spec_.numa[local_rank].cpus);
    }
    group_.Adopt(std::move(standby), local_rank, round);
    if (!worker.control->Send(
            RankNotice(spec_, local_rank, WorkerGroup::FilesOf(worker), round, failure_time))) {
      spdlog::warn("standby worker (pid {}) cannot be told its rank: dropping it", worker.pid);
      kill(-worker.pid, SIGKILL);  // reaped as an orphan; it had no place in the group
      worker.running = false;
      group_.Release(worker);
      group_.DropEnded();
      return false;
    }
    started.push_back(absl::StrCat(worker.global_rank, " (standby pid ", worker.pid, ")"));
    return true;
  }
  return false;
}

bool InProcessRestart::AwaitStandby(int local_rank, std::vector<std::string>& started) {
  for (const auto& standby : standbys_) {
    if (!standby->running || Keepable(*standby)) continue;  // ready ones were taken before
    if (const std::optional<ProcStat> stat = ReadProcStat(standby->pid);
        stat && IsStoppedState(stat->state)) {
      continue;  // stopped (SIGSTOP, a debugger): it would not get ready
    }
    const bool taken = std::any_of(awaited_.begin(), awaited_.end(),
                                   [&](const Awaited& a) { return a.standby == standby->pid; });
    if (taken) continue;
    const EventLoop::Deadline deadline = EventLoop::Deadline::clock::now() + kStandbyAwait;
    awaited_.push_back({local_rank, standby->pid, deadline});
    group_.SetRanksAwaited(static_cast<int>(awaited_.size()));
    // Only a wake-up: the agent's loop then calls MaybeStartStandbys, in the running phase.
    if (!await_timer_.armed()) await_timer_.At(deadline, [] {});
    started.push_back(absl::StrCat(round_.global_rank_base + local_rank, " (standby pid ",
                                   standby->pid, ", once it is ready)"));
    return true;
  }
  return false;
}

void InProcessRestart::HandAwaitedRanks() {
  if (awaited_.empty()) return;
  if (group_.first_failure()) {  // the group fails again: the next round decides anew
    awaited_.clear();
    group_.SetRanksAwaited(0);
    return;
  }
  const EventLoop::Deadline now = EventLoop::Deadline::clock::now();
  std::vector<Awaited> waiting;
  for (const Awaited& a : awaited_) {
    auto it = std::find_if(standbys_.begin(), standbys_.end(), [&](const auto& standby) {
      return standby->pid == a.standby && standby->running;
    });
    const bool gone = it == standbys_.end();
    const bool ready = !gone && Keepable(**it);
    if (!gone && !ready && now < a.deadline) {
      waiting.push_back(a);
      continue;
    }
    const int global_rank = round_.global_rank_base + a.local_rank;
    std::vector<std::string> started;
    if (ready && PromoteStandby(a.local_rank, round_, failure_time_, started)) {
      spdlog::warn("round {}: rank {} went to {} once it was ready", round_.round, global_rank,
                   started.front());
      if (late_start_) late_start_(a.local_rank);
      continue;
    }
    if (gone) {
      spdlog::warn(
          "round {}: the standby (pid {}) that rank {} waited for ended: a new process "
          "takes the rank",
          round_.round, a.standby, global_rank);
    } else if (!ready) {
      spdlog::warn(
          "round {}: the standby (pid {}) that rank {} waited for is not ready after {} "
          "s: stopping it; a new process takes the rank",
          round_.round, a.standby, global_rank, kStandbyAwait.count());
      kill(-a.standby, SIGKILL);  // reaped as a standby; the group has one spare fewer
    }
    WorkerProcess& worker = group_.StartRank(a.local_rank, round_, failure_time_);
    if (worker.running) {
      spdlog::warn("round {}: started rank {} (pid {})", round_.round, worker.global_rank,
                   worker.pid);
      if (late_start_) late_start_(a.local_rank);
    }
  }
  awaited_ = std::move(waiting);
  group_.SetRanksAwaited(static_cast<int>(awaited_.size()));
  if (awaited_.empty()) {
    await_timer_.Cancel();
  } else if (!await_timer_.armed()) {
    EventLoop::Deadline first = awaited_.front().deadline;
    for (const Awaited& a : awaited_) first = std::min(first, a.deadline);
    await_timer_.At(first, [] {});
  }
}

std::string InProcessRestart::Reassign(const RoundAssignment& round, double failure_time, int signo,
                                       std::chrono::milliseconds grace,
                                       const std::function<void()>& reap) {
  // Workers beyond the new round's local world size (a smaller node share) are stopped.
  group_.StopWhere([&](const WorkerProcess& w) { return w.local_rank >= round.local_world_size; },
                   signo, grace, reap);
  group_.BeginRound(round);
  Begin(round, false);
  failure_time_ = failure_time;
  // Tell each kept worker its place. Nothing here runs the loop, so no worker ends unseen.
  std::vector<std::string> kept, started;
  std::set<const WorkerProcess*> untold;
  for (WorkerProcess* worker : group_.RunningWorkers()) {
    worker->global_rank = round.global_rank_base + worker->local_rank;
    if (Keepable(*worker) &&
        worker->control->Send(RankNotice(spec_, worker->local_rank, WorkerGroup::FilesOf(*worker),
                                         round, failure_time))) {
      for (OutputRelay* relay : {worker->out.get(), worker->err.get()}) {
        if (relay != nullptr) {
          relay->Retarget(round.node_rank, worker->global_rank, worker->local_rank);
        }
      }
      kept.push_back(absl::StrCat(worker->global_rank, " (pid ", worker->pid, ")"));
    } else {
      spdlog::warn("worker local_rank {} (pid {}) cannot be told the new round: restarting it",
                   worker->local_rank, worker->pid);
      untold.insert(worker);
    }
  }
  if (!untold.empty()) {
    group_.StopWhere([&](const WorkerProcess& w) { return untold.count(&w) > 0; }, SIGKILL,
                     std::chrono::milliseconds(0), reap);
  }
  // Ended workers leave the group; a ready standby or a new process takes each rank nobody holds.
  group_.DropEnded();
  for (int local_rank = 0; local_rank < round.local_world_size && !group_.first_failure();
       ++local_rank) {
    if (group_.FindRunning(local_rank) != nullptr) continue;
    if (PromoteStandby(local_rank, round, failure_time, started)) continue;
    if (AwaitStandby(local_rank, started)) continue;
    WorkerProcess& worker = group_.StartRank(local_rank, round, failure_time);
    if (worker.running) {
      started.push_back(absl::StrCat(worker.global_rank, " (pid ", worker.pid, ")"));
    }
  }
  return absl::StrCat("kept rank(s) ", kept.empty() ? "none" : absl::StrJoin(kept, ", "),
                      "; started rank(s) ",
                      started.empty() ? "none" : absl::StrJoin(started, ", "));
}

}  // namespace mxrun

// A small worker program for the launcher's tests. Flags (all optional):
//   --exit=N                exit with N at the end (default 0)
//   --fail-below-attempt=K  apply --exit/--kill-self only while TORCHELASTIC_RESTART_COUNT < K
//   --only-rank=R           apply --exit/--kill-self only on global rank R (others exit 0);
//                           a worker that is going to fail skips --sleep
//   --sleep=S               sleep S seconds (fractional) before exiting
//   --sleep-below-attempt=K only sleep while TORCHELASTIC_RESTART_COUNT < K
//   --sleep-if-world=W      only sleep when WORLD_SIZE == W
//   --ignore-sigterm        print "ignored SIGTERM" on SIGTERM and carry on (grace, SIGKILL)
//   --fork-grandchild[=setsid]  fork a child that sleeps for 600 s (optionally in its own session)
//   --write-error-file=MSG  write MSG to TORCHELASTIC_ERROR_FILE in PyTorch's @record JSON shape
//   --env-out=DIR           write the environment to DIR/env.<RANK>
//   --lines=N --line-length=L  print N lines of L characters on stdout
//   --ready                 print "ready rank=<RANK> pid=<pid> grandchild=<pid> world=<WORLD_SIZE>
//                           attempt=<restart count> run=<TORCHELASTIC_RUN_ID>" once set up
//   --report-usr1           while sleeping, print "got SIGUSR1 rank=<RANK>" for each SIGUSR1
//   --progress=P            while sleeping, send a progress report ({"step": N}, N = 1, 2, ...)
//                           on the control channel every P seconds
//   --slow-rank=R           with --progress, global rank R takes 3P a step (a straggler)
//   --say=TEXT              print TEXT (the same on every rank) once set up, then "said
//   rank=<RANK>"
//   --say-at=T              with --say, wait until the Unix time T (fractional) to say it, so that
//                           every rank prints it within milliseconds
//   --say-stderr            with --say, print TEXT on stderr
//   --kill-self=SIG         raise signal SIG (number) at the end instead of exiting
//   --beat                  touch MXRUN_HEARTBEAT_FILE once set up (before any sleep)
//   --hang-rank=R           global rank R sleeps 600 s (until SIGTERM) after setting up, while the
//                           others go on (--hang-below-attempt=K: only while the restart count < K)
//   --stop-self             global rank --hang-rank stops itself (SIGSTOP) instead of sleeping
//   --grow-after=S          in the first attempt (of --only-rank's rank, if given), after S seconds
//                           print "growing rank=R pid=P", then touch memory 1 MiB a millisecond up
//                           to 1 GiB (for a memory limit's OOM kill)
//   --vfork-wait=S          after setting up, print "vfork-waiting rank=R pid=P" and vfork a child
//                           that sleeps S seconds then _exits: meanwhile this process is in
//                           uninterruptible sleep (D state; SIGKILL still ends it)
//   --vfork-below-attempt=K only --vfork-wait while TORCHELASTIC_RESTART_COUNT < K
//   --unreapable            with --vfork-wait, first fork a helper in a session of its own that
//                           ptrace-seizes this process: once this process dies only the helper
//                           could reap it, so its parent cannot until the helper is gone (30 s
//                           after the death, 120 s after the start at most); prints
//                           "traced rank=R tracer=H"
//   --keep[=exit]           in the first attempt (restart count 0) only: declare on the control
//                           channel (MXRUN_CONTROL_FD) that it takes new rounds in-process, and
//                           that it runs in MXRUN_ROUND ("joined"); with =exit it exits 5 when a
//                           round notice comes (it cannot recover). Started as a standby
//                           (MXRUN_STANDBY=1): says hello, waits up to 60 s for its rank, prints
//                           "standby promoted rank=R pid=P cpus=<Cpus_allowed_list>", exits 0.
//   --standby-hold=PATH     with --keep, a standby first prints "standby preparing pid=P" and
//                           says hello only once PATH exists (up to 60 s): a standby still
//                           preparing when a rank is lost
//   --fail-on-signal        a worker about to fail (--exit/--kill-self) first waits (up to 60 s)
//                           for SIGUSR1, which the test sends once the others are ready
//   --wait-notice           with --keep, after setting up (and unless failing): wait up to 60 s
//                           for a round notice, print "notice round=N rank=R pid=P", answer
//                           "joined", then go on
//   --abuse=KIND            on global rank 0, once set up (after "ready"), misuse a channel to the
//                           agent, then print "abused rank=0 kind=KIND ..." and go on:
//                           oversize: a 1 MiB control line, then {"step": 7};
//                           malformed: 10,000 lines that are not JSON, then {"step": 7};
//                           flood: progress reports without pause for up to 10 s (a SIGTERM
//                           ends it: "caught SIGTERM", exit 143; else "flood done sent=N");
//                           timer-foreign: a FileTimer request, expired and with SIGKILL, for
//                           the pid of its parent (the agent), which is not a worker's
// On SIGTERM (when not ignored) it prints "caught SIGTERM rank=<RANK>" and exits 143.

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <ctime>
#include <string>

namespace {

bool g_term = false;         // SleepSeconds took a SIGTERM (it is blocked, never handled)
bool g_report_usr1 = false;  // --report-usr1: SleepSeconds prints each SIGUSR1 and sleeps on
void PrintIgnoredTerm() {
  static const char kMessage[] = "ignored SIGTERM\n";
  ssize_t ignored = write(STDOUT_FILENO, kMessage, sizeof kMessage - 1);
  (void)ignored;
}

// This process's Cpus_allowed_list from /proc ("0-3").
std::string AllowedCpus() {
  FILE* status = std::fopen("/proc/self/status", "r");
  if (status == nullptr) return "?";
  char line[512];
  std::string cpus = "?";
  while (std::fgets(line, sizeof line, status) != nullptr) {
    if (std::strncmp(line, "Cpus_allowed_list:", 18) == 0) {
      cpus = line + 18;
      cpus.erase(0, cpus.find_first_not_of(" \t"));
      cpus.erase(cpus.find_last_not_of(" \t\n") + 1);
    }
  }
  std::fclose(status);
  return cpus;
}

std::string Env(const char* name) {
  const char* value = std::getenv(name);
  return value == nullptr ? "" : value;
}

bool Flag(const char* arg, const char* name, std::string* value) {
  size_t n = std::strlen(name);
  if (std::strncmp(arg, name, n) != 0) return false;
  if (arg[n] == '\0') {
    *value = "";
    return true;
  }
  if (arg[n] != '=') return false;
  *value = arg + n + 1;
  return true;
}

// SIGTERM stays blocked and is taken here synchronously (sigtimedwait), so one that arrives
// between setting up and starting to sleep is not lost: it is pending and ends the sleep at once.
// One wait for the whole time: the process stays in S (sleeping) for the hang reports to name,
// and under ThreadSanitizer no handler runs deferred. An ignored SIGTERM is printed and sleeps on.
void SleepSeconds(double seconds, bool ignore_term) {
  timespec end;
  clock_gettime(CLOCK_MONOTONIC, &end);
  const double until = static_cast<double>(end.tv_sec) + end.tv_nsec / 1e9 + seconds;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  if (g_report_usr1) sigaddset(&term, SIGUSR1);
  while (!g_term) {
    timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    const double left = until - (static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9);
    if (left <= 0) break;
    timespec ts;
    ts.tv_sec = static_cast<time_t>(left);
    ts.tv_nsec = static_cast<long>((left - static_cast<double>(ts.tv_sec)) * 1e9);
    const int taken = sigtimedwait(&term, nullptr, &ts);
    if (taken == SIGUSR1) {
      std::printf("got SIGUSR1 rank=%s\n", std::getenv("RANK") ? std::getenv("RANK") : "");
      std::fflush(stdout);
      continue;
    }
    if (taken != SIGTERM) continue;  // timed out, or EINTR
    if (ignore_term) {
      PrintIgnoredTerm();
    } else {
      g_term = true;
    }
  }
}

// The control channel's end (fd 3), or -1.
int ControlFd() {
  const std::string fd = Env("MXRUN_CONTROL_FD");
  return fd.empty() ? -1 : std::atoi(fd.c_str());
}

void Send(int fd, const std::string& line) {
  const std::string text = line + "\n";
  ssize_t ignored = write(fd, text.data(), text.size());
  (void)ignored;
}

// Waits up to `seconds` for one line from the agent; empty on timeout or end of stream.
// Reads one line from the control channel, waiting up to `seconds`; "" when none came. A SIGTERM
// (blocked, see SleepSeconds) ends the wait as it ends a sleep: g_term is set, unless ignored.
std::string ReadNotice(int fd, int seconds, bool ignore_term) {
  std::string line;
  sigset_t term;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  pollfd p{fd, POLLIN, 0};
  for (int slice = 0; slice < seconds * 10 && line.find('\n') == std::string::npos; ++slice) {
    const timespec zero{0, 0};
    if (sigtimedwait(&term, nullptr, &zero) == SIGTERM) {
      if (!ignore_term) {
        g_term = true;
        return "";
      }
      PrintIgnoredTerm();
    }
    if (poll(&p, 1, 100) != 1) continue;
    char c[4096];
    const ssize_t n = read(fd, c, sizeof c);
    if (n <= 0) return "";
    line.append(c, static_cast<size_t>(n));
  }
  return line;
}

// The text after `key` in `json` up to the next '"' or ','.
std::string After(const std::string& json, const std::string& key) {
  size_t at = json.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return json.substr(at, json.find_first_of("\",}", at) - at);
}

// Writes all of `data` to the blocking channel `fd`; false when the peer is gone.
bool WriteAll(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

// --abuse=KIND (see the top of this file). Returns the exit code to end with, or -1 to go on.
int Abuse(const std::string& kind, int control) {
  if (kind == "oversize" || kind == "malformed") {
    std::string junk;
    if (kind == "oversize") {
      junk = "{\"step\": \"" + std::string(1 << 20, 'x') + "\"}\n";
    } else {
      for (int i = 0; i < 10000; ++i) junk += "not json " + std::to_string(i) + "\n";
    }
    WriteAll(control, junk + "{\"step\": 7}\n");
    std::printf("abused rank=0 kind=%s\n", kind.c_str());
  } else if (kind == "flood") {
    std::string batch;
    long long sent = 0;
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    const time_t until = time(nullptr) + 10;
    timespec zero{0, 0};
    while (time(nullptr) < until) {
      if (sigtimedwait(&term, nullptr, &zero) == SIGTERM) {
        std::printf("caught SIGTERM rank=0 during the flood sent=%lld\n", sent);
        std::fflush(stdout);
        return 143;
      }
      batch.clear();
      for (int i = 0; i < 256; ++i) batch += "{\"step\": " + std::to_string(++sent) + "}\n";
      if (!WriteAll(control, batch)) break;
    }
    std::printf("flood done rank=0 sent=%lld\n", sent);
  } else if (kind == "timer-foreign") {
    const int pipe_fd = open(Env("TORCHELASTIC_TIMER_FILE").c_str(), O_WRONLY | O_NONBLOCK);
    const std::string request =
        "{\"version\": 1, \"pid\": " + std::to_string(getppid()) +
        ", \"scope_id\": \"abuse\", \"expiration_time\": " + std::to_string(time(nullptr) - 5) +
        ", \"signal\": 9}\n";
    const bool written = pipe_fd >= 0 && WriteAll(pipe_fd, request);
    if (pipe_fd >= 0) close(pipe_fd);
    std::printf("abused rank=0 kind=timer-foreign pid=%d written=%d\n", getppid(), written);
  } else {
    std::printf("--abuse=%s: unknown kind\n", kind.c_str());
    return 2;
  }
  std::fflush(stdout);
  return -1;
}

// The parent of a vfork child waits in the kernel, in D state (TASK_KILLABLE), until the child
// execs or exits. The child may make only async-signal-safe calls: nanosleep, _exit. A function of
// its own, so that none of main's variables live across the vfork.
__attribute__((noinline)) void VforkWait(double seconds) {
  timespec ts;
  ts.tv_sec = static_cast<time_t>(seconds);
  ts.tv_nsec = static_cast<long>((seconds - static_cast<double>(ts.tv_sec)) * 1e9);
  const pid_t waiter = vfork();
  if (waiter == 0) {
    while (nanosleep(&ts, &ts) != 0) {
    }
    _exit(0);
  }
  if (waiter > 0) waitpid(waiter, nullptr, 0);
}

}  // namespace

int main(int argc, char** argv) {
  int sleep_below = -1, sleep_world = -1;
  int exit_code = 0, fail_below = -1, only_rank = -1, lines = 0, line_length = 20, kill_self = 0;
  double sleep_seconds = 0;
  double progress_period = 0;  // --progress=S: while sleeping, a progress report every S seconds
  int slow_rank = -1;          // --slow-rank=R: that global rank reports 3x as slowly
  bool ignore_term = false, ready = false, grandchild = false, grandchild_setsid = false;
  bool beat = false, stop_self = false, keep = false, keep_exit = false, wait_notice = false;
  bool fail_on_signal = false, unreapable = false;
  int hang_rank = -1, hang_below = -1, vfork_below = -1;
  double vfork_seconds = 0;
  double grow_after = -1;  // --grow-after=S: S seconds after start, take memory until killed
  std::string error_message, env_out, say, abuse, standby_hold;
  // --barrier-dir=DIR: every rank marks DIR once its signals are set up, and a rank about to fail
  // first waits (at most 20 s) for the others' marks, so they are ready for the group's stop.
  std::string barrier_dir;
  double say_at = 0;
  bool say_stderr = false;
  for (int i = 1; i < argc; ++i) {
    std::string v;
    if (Flag(argv[i], "--exit", &v))
      exit_code = std::atoi(v.c_str());
    else if (Flag(argv[i], "--fail-below-attempt", &v))
      fail_below = std::atoi(v.c_str());
    else if (Flag(argv[i], "--only-rank", &v))
      only_rank = std::atoi(v.c_str());
    else if (Flag(argv[i], "--sleep", &v))
      sleep_seconds = std::atof(v.c_str());
    else if (Flag(argv[i], "--sleep-below-attempt", &v))
      sleep_below = std::atoi(v.c_str());
    else if (Flag(argv[i], "--sleep-if-world", &v))
      sleep_world = std::atoi(v.c_str());
    else if (Flag(argv[i], "--ignore-sigterm", &v))
      ignore_term = true;
    else if (Flag(argv[i], "--fork-grandchild", &v))
      grandchild = true, grandchild_setsid = v == "setsid";
    else if (Flag(argv[i], "--write-error-file", &v))
      error_message = v;
    else if (Flag(argv[i], "--env-out", &v))
      env_out = v;
    else if (Flag(argv[i], "--lines", &v))
      lines = std::atoi(v.c_str());
    else if (Flag(argv[i], "--line-length", &v))
      line_length = std::atoi(v.c_str());
    else if (Flag(argv[i], "--ready", &v))
      ready = true;
    else if (Flag(argv[i], "--kill-self", &v))
      kill_self = std::atoi(v.c_str());
    else if (Flag(argv[i], "--beat", &v))
      beat = true;
    else if (Flag(argv[i], "--hang-rank", &v))
      hang_rank = std::atoi(v.c_str());
    else if (Flag(argv[i], "--hang-below-attempt", &v))
      hang_below = std::atoi(v.c_str());
    else if (Flag(argv[i], "--stop-self", &v))
      stop_self = true;
    else if (Flag(argv[i], "--vfork-wait", &v))
      vfork_seconds = std::atof(v.c_str());
    else if (Flag(argv[i], "--vfork-below-attempt", &v))
      vfork_below = std::atoi(v.c_str());
    else if (Flag(argv[i], "--unreapable", &v))
      unreapable = true;
    else if (Flag(argv[i], "--keep", &v))
      keep = true, keep_exit = v == "exit";
    else if (Flag(argv[i], "--wait-notice", &v))
      wait_notice = true;
    else if (Flag(argv[i], "--fail-on-signal", &v))
      fail_on_signal = true;
    else if (Flag(argv[i], "--report-usr1", &v))
      g_report_usr1 = true;
    else if (Flag(argv[i], "--progress", &v))
      progress_period = std::atof(v.c_str());
    else if (Flag(argv[i], "--slow-rank", &v))
      slow_rank = std::atoi(v.c_str());
    else if (Flag(argv[i], "--say", &v))
      say = v;
    else if (Flag(argv[i], "--standby-hold", &v))
      standby_hold = v;
    else if (Flag(argv[i], "--say-at", &v))
      say_at = std::atof(v.c_str());
    else if (Flag(argv[i], "--say-stderr", &v))
      say_stderr = true;
    else if (Flag(argv[i], "--grow-after", &v))
      grow_after = std::atof(v.c_str());
    else if (Flag(argv[i], "--abuse", &v))
      abuse = v;
    else if (Flag(argv[i], "--barrier-dir", &v))
      barrier_dir = v;
    else {
      std::fprintf(stderr, "test_child: unknown argument %s\n", argv[i]);
      return 64;
    }
  }
  const std::string rank = Env("RANK");
  const int attempt = std::atoi(Env("TORCHELASTIC_RESTART_COUNT").c_str());
  sigset_t term;  // blocked: SleepSeconds takes it with sigtimedwait
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  sigprocmask(SIG_BLOCK, &term, nullptr);
  sigset_t usr1;  // blocked: --fail-on-signal takes it with sigtimedwait
  sigemptyset(&usr1);
  sigaddset(&usr1, SIGUSR1);
  sigprocmask(SIG_BLOCK, &usr1, nullptr);

  if (!env_out.empty()) {
    std::string path = env_out + "/env." + rank;
    FILE* f = std::fopen(path.c_str(), "w");
    for (char** e = environ; f != nullptr && *e != nullptr; ++e) std::fprintf(f, "%s\n", *e);
    if (f != nullptr) std::fclose(f);
  }
  pid_t child = 0;
  if (grandchild) {
    child = fork();
    if (child == 0) {
      if (grandchild_setsid) setsid();
      signal(SIGTERM, SIG_IGN);  // only SIGKILL should end it: the launcher must find it
      for (int i = 0; i < 600; ++i) sleep(1);
      _exit(0);
    }
  }
  for (int i = 0; i < lines; ++i) {
    std::string line = "rank=" + rank + " line=" + std::to_string(i) + " ";
    line.append(static_cast<size_t>(line_length) > line.size() ? line_length - line.size() : 0,
                'x');
    line.push_back('\n');
    fwrite(line.data(), 1, line.size(), stdout);
  }
  // Declared before "ready" is printed, so a test that saw "ready" knows the hello was sent.
  const int control = ControlFd();
  if (keep && control >= 0 && Env("MXRUN_STANDBY") == "1") {
    if (!standby_hold.empty()) {
      std::printf("standby preparing pid=%d\n", getpid());
      std::fflush(stdout);
      for (int i = 0; i < 6000 && access(standby_hold.c_str(), F_OK) != 0 && !g_term; ++i) {
        usleep(10'000);
      }
    }
    Send(control, "{\"hello\": 1, \"in_process_restart\": true}");
    const std::string notice = ReadNotice(control, 60, ignore_term);
    if (notice.empty()) return g_term ? 143 : 0;  // the job ended without needing it
    std::printf("standby promoted rank=%s pid=%d cpus=%s\n", After(notice, "\"RANK\":\"").c_str(),
                getpid(), AllowedCpus().c_str());
    return 0;
  }
  keep = keep && attempt == 0 && control >= 0;
  if (keep) {
    Send(control, "{\"hello\": 1, \"in_process_restart\": true}");
    Send(control, "{\"joined\": " + Env("MXRUN_ROUND") + "}");
  }
  if (ready) {
    std::printf("ready rank=%s pid=%d grandchild=%d world=%s attempt=%d run=%s\n", rank.c_str(),
                getpid(), child, Env("WORLD_SIZE").c_str(), attempt,
                Env("TORCHELASTIC_RUN_ID").c_str());
  }
  std::fflush(stdout);
  if (!abuse.empty() && rank == "0" && control >= 0) {
    if (const int code = Abuse(abuse, control); code >= 0) return code;
  }
  if (!say.empty()) {
    timespec now{};
    clock_gettime(CLOCK_REALTIME, &now);
    const double wait = say_at - (static_cast<double>(now.tv_sec) + now.tv_nsec / 1e9);
    if (wait > 0 && wait < 60) {
      timespec pause{static_cast<time_t>(wait),
                     static_cast<long>((wait - static_cast<long>(wait)) * 1e9)};
      while (nanosleep(&pause, &pause) != 0 && errno == EINTR) {
      }
    }
    std::fprintf(say_stderr ? stderr : stdout, "%s\n", say.c_str());
    std::fflush(say_stderr ? stderr : stdout);
    std::printf("said rank=%s\n", rank.c_str());
    std::fflush(stdout);
  }
  if (beat && !Env("MXRUN_HEARTBEAT_FILE").empty()) {
    FILE* f = std::fopen(Env("MXRUN_HEARTBEAT_FILE").c_str(), "a");
    if (f != nullptr) std::fclose(f);
  }
  if (hang_rank >= 0 && std::atoi(rank.c_str()) == hang_rank &&
      (hang_below < 0 || attempt < hang_below)) {
    std::printf("hanging rank=%s pid=%d\n", rank.c_str(), getpid());
    std::fflush(stdout);
    if (stop_self) raise(SIGSTOP);
    SleepSeconds(600, ignore_term);  // a SIGTERM ends it, and is reported below
  }
  if (grow_after >= 0 && attempt == 0 && (only_rank < 0 || std::atoi(rank.c_str()) == only_rank)) {
    // Memory touched 1 MiB at a time (so that it is really used), up to 1 GiB: a memory limit
    // the test set meanwhile makes the kernel's OOM killer end the process.
    SleepSeconds(grow_after, ignore_term);
    std::printf("growing rank=%s pid=%d\n", rank.c_str(), getpid());
    std::fflush(stdout);
    for (int mib = 0; mib < 1024; ++mib) {
      char* chunk = static_cast<char*>(std::malloc(1 << 20));
      if (chunk == nullptr) break;
      std::memset(chunk, 1, 1 << 20);
      usleep(1000);
    }
    std::printf("grew to 1 GiB rank=%s\n", rank.c_str());
    std::fflush(stdout);
  }
  if (vfork_seconds > 0 && (vfork_below < 0 || attempt < vfork_below)) {
    if (unreapable) {
      prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0);  // Yama's ptrace_scope=1 allows it then
      int attached[2];
      if (pipe(attached) != 0) return 70;
      const pid_t tracee = getpid();
      const pid_t tracer = fork();
      if (tracer == 0) {
        setsid();    // out of the worker's process group: the stop's SIGKILL does not reach it
        alarm(120);  // however things go, it lets go of the worker by then (SIGALRM ends it)
        const char ok = ptrace(PTRACE_SEIZE, tracee, nullptr, nullptr) == 0 ? '1' : '0';
        ssize_t ignored = write(attached[1], &ok, 1);
        (void)ignored;
        const int null_fd = open("/dev/null", O_WRONLY);  // holds none of the worker's pipes
        dup2(null_fd, STDOUT_FILENO);
        dup2(null_fd, STDERR_FILENO);
        while (true) {
          siginfo_t info{};
          if (waitid(P_PID, tracee, &info, WEXITED | WSTOPPED | WNOWAIT | __WALL) != 0) _exit(0);
          if (info.si_code == CLD_TRAPPED || info.si_code == CLD_STOPPED) {
            // A signal stopped it on its way in (a tracee's SIGCHLD too): let it through.
            ptrace(PTRACE_CONT, tracee, nullptr,
                   reinterpret_cast<void*>(static_cast<long>(info.si_status)));
            continue;
          }
          // It died: hold its zombie (unreaped) for 30 s, longer than the agent waits for it.
          sleep(30);
          _exit(0);
        }
      }
      char ok = '0';
      if (tracer < 0 || read(attached[0], &ok, 1) != 1 || ok != '1') {
        std::fprintf(stderr, "test_child: --unreapable: the helper cannot ptrace this process\n");
        return 71;
      }
      close(attached[0]);
      close(attached[1]);
      std::printf("traced rank=%s tracer=%d\n", rank.c_str(), tracer);
    }
    std::printf("vfork-waiting rank=%s pid=%d\n", rank.c_str(), getpid());
    std::fflush(stdout);
    VforkWait(vfork_seconds);
    std::printf("vfork-done rank=%s\n", rank.c_str());
    std::fflush(stdout);
  }

  const bool apply = (fail_below < 0 || attempt < fail_below) &&
                     (only_rank < 0 || std::atoi(rank.c_str()) == only_rank);
  const bool failing = apply && (exit_code != 0 || kill_self != 0);
  if (!barrier_dir.empty()) {
    const std::string mark = barrier_dir + "/" + std::to_string(attempt) + "." + rank;
    if (FILE* f = std::fopen(mark.c_str(), "w"); f != nullptr) std::fclose(f);
    const int world = std::atoi(Env("WORLD_SIZE").c_str());
    for (int r = 0; failing && r < world; ++r) {
      const std::string other =
          barrier_dir + "/" + std::to_string(attempt) + "." + std::to_string(r);
      for (int i = 0; i < 2000 && access(other.c_str(), F_OK) != 0; ++i) usleep(10'000);
    }
  }
  if (failing && fail_on_signal) {
    const timespec limit{60, 0};
    if (sigtimedwait(&usr1, nullptr, &limit) != SIGUSR1) {
      std::printf("no SIGUSR1 rank=%s\n", rank.c_str());
      return 7;
    }
  }
  if (keep && wait_notice && !failing) {
    const std::string notice = ReadNotice(control, 60, ignore_term);
    if (notice.empty() && g_term) {
      std::printf("caught SIGTERM rank=%s\n", rank.c_str());
      return 143;
    }
    if (notice.empty()) {
      std::printf("no notice rank=%s\n", rank.c_str());
      return 6;
    }
    if (keep_exit) {
      std::printf("cannot recover rank=%s pid=%d\n", rank.c_str(), getpid());
      return 5;
    }
    std::printf("notice round=%s rank=%s pid=%d restart=%s\n", After(notice, "\"round\":").c_str(),
                After(notice, "\"RANK\":\"").c_str(), getpid(),
                After(notice, "\"TORCHELASTIC_RESTART_COUNT\":\"").c_str());
    std::fflush(stdout);
    Send(control, "{\"joined\": " + After(notice, "\"round\":") + "}");
  }
  // A worker that is about to fail does so at once; the others sleep (when asked to).
  const bool sleep_now = !failing && (sleep_below < 0 || attempt < sleep_below) &&
                         (sleep_world < 0 || std::atoi(Env("WORLD_SIZE").c_str()) == sleep_world);
  if (sleep_seconds > 0 && sleep_now && progress_period > 0 && control >= 0) {
    // Progress reports ({"step": N}) every period while it sleeps.
    const double period = progress_period * (std::atoi(rank.c_str()) == slow_rank ? 3 : 1);
    const int steps = static_cast<int>(sleep_seconds / period);
    for (int step = 1; step <= steps && !g_term; ++step) {
      SleepSeconds(period, ignore_term);
      Send(control, "{\"step\": " + std::to_string(step) + "}");
    }
  } else if (sleep_seconds > 0 && sleep_now) {
    SleepSeconds(sleep_seconds, ignore_term);
  }
  if (g_term) {
    std::printf("caught SIGTERM rank=%s\n", rank.c_str());
    std::fflush(stdout);
    return 143;
  }

  if (!apply) return 0;
  if (!error_message.empty()) {
    std::string path = Env("TORCHELASTIC_ERROR_FILE");
    FILE* f = std::fopen(path.c_str(), "w");
    if (f != nullptr) {
      std::fprintf(f,
                   "{\"message\": {\"message\": \"%s\", \"extraInfo\": {\"py_callstack\": "
                   "\"Traceback: test_child main\", \"timestamp\": \"%ld\"}}}\n",
                   error_message.c_str(), static_cast<long>(time(nullptr)));
      std::fclose(f);
    }
  }
  std::fprintf(stderr, "test_child rank=%s exiting with %d\n", rank.c_str(), exit_code);
  if (kill_self > 0) raise(kill_self);
  return exit_code;
}

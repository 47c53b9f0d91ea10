#include "agent/hang/hang_diagnostics.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "agent/process/helper_run.h"
#include "agent/process/proc_stat.h"
#include "agent/process/process_launcher.h"
#include "common/files.h"
#include "common/strings.h"

namespace mxrun {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct ThreadInfo {
  pid_t tid = 0;
  ProcStat stat;
  std::string wchan;  // the kernel function it sleeps in; empty when running or unknown
};

std::string ReadSmallFile(const std::string& path) {
  std::optional<std::string> text = ReadWholeFile(path);
  return text ? std::string(absl::StripTrailingAsciiWhitespace(*text)) : "";
}

std::vector<ThreadInfo> ReadThreads(pid_t pid) {
  std::vector<ThreadInfo> threads;
  const std::string task_dir = absl::StrCat("/proc/", pid, "/task");
  DIR* dir = opendir(task_dir.c_str());
  if (dir == nullptr) return threads;
  while (dirent* entry = readdir(dir)) {
    if (entry->d_name[0] == '.') continue;
    ThreadInfo thread;
    thread.tid = std::atoi(entry->d_name);
    const std::string base = absl::StrCat(task_dir, "/", entry->d_name);
    std::optional<ProcStat> stat = ReadProcStatFile(base + "/stat");
    if (!stat) continue;  // the thread ended meanwhile
    thread.stat = *stat;
    thread.wchan = ReadSmallFile(base + "/wchan");
    if (thread.wchan == "0") thread.wchan.clear();
    threads.push_back(std::move(thread));
    if (threads.size() >= 4096) break;
  }
  closedir(dir);
  std::sort(threads.begin(), threads.end(),
            [](const ThreadInfo& a, const ThreadInfo& b) { return a.tid < b.tid; });
  return threads;
}

std::string FormatDuration(milliseconds ms) {
  return absl::StrFormat("%.1f s", static_cast<double>(ms.count()) / 1000.0);
}

// A stack-dump tool run for one worker.
struct StackDump {
  std::string tool;     // "gdb", "py-spy"; empty: none was run
  std::string skipped;  // why no dump was made
  std::string output_path;
  StartedHelper helper;  // the tool's process (helper_run.h)
  std::string output;
};

bool IsPythonProcess(pid_t pid) {
  char target[4096];
  const std::string link = absl::StrCat("/proc/", pid, "/exe");
  const ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0) return false;
  absl::string_view path(target, static_cast<size_t>(n));
  const size_t slash = path.rfind('/');
  return absl::StartsWith(slash == absl::string_view::npos ? path : path.substr(slash + 1),
                          "python");
}

// `tool`: the dumper to use; empty: as the options say.
void StartStackDump(const HungWorker& worker, const std::string& dir,
                    const DiagnosticsOptions& options, const std::string& tool_wanted,
                    StackDump& dump) {
  if (options.stack_dumper == "none") {
    dump.skipped = "turned off (MXRUN_STACK_DUMPER=none)";
    return;
  }
  if (dir.empty()) {
    dump.skipped = "no folder to write it to";
    return;
  }
  if (ReadSmallFile("/proc/sys/kernel/yama/ptrace_scope") == "3") {
    dump.skipped = "ptrace is disabled on this machine (kernel.yama.ptrace_scope=3)";
    return;
  }
  // py-spy shows a Python worker's Python frames; eu-stack (elfutils) takes milliseconds where
  // gdb takes a second or more on a process with LibTorch loaded, and the kill waits for it.
  std::vector<std::string> candidates;
  if (!tool_wanted.empty()) {
    candidates = {tool_wanted};
  } else if (!options.stack_dumper.empty()) {
    candidates = {options.stack_dumper};
  } else if (IsPythonProcess(worker.pid)) {
    candidates = {"py-spy", "eu-stack", "gdb"};
  } else {
    candidates = {"eu-stack", "gdb"};
  }
  std::string executable;
  for (const std::string& tool : candidates) {
    if (absl::StatusOr<std::string> path = ResolveExecutable(tool, options.path_env); path.ok()) {
      executable = *path;
      dump.tool = tool;
      break;
    }
  }
  if (executable.empty()) {
    dump.skipped =
        options.stack_dumper.empty()
            ? "none of eu-stack, gdb (or py-spy, for Python) is installed "
              "(apt-get install elfutils)"
            : absl::StrCat("MXRUN_STACK_DUMPER=", options.stack_dumper, " is not installed");
    return;
  }
  const std::string pid = std::to_string(worker.pid);
  std::vector<std::string> argv;
  if (dump.tool == "py-spy") {
    argv = {"py-spy", "dump", "--pid", pid};
  } else if (dump.tool == "eu-stack") {
    argv = {"eu-stack", "-p", pid, "-m"};
  } else {
    argv = {"gdb",
            "-p",
            pid,
            "-batch",
            "-nx",
            "-iex",
            "set debuginfod enabled off",
            "-ex",
            "set pagination off",
            "-ex",
            "thread apply all bt"};
  }
  dump.output_path = absl::StrCat(dir, "/.rank", worker.global_rank, ".", dump.tool);
  const int out = open(dump.output_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) {
    dump.skipped = absl::StrCat("cannot create ", dump.output_path, ": ", ErrnoText(errno));
    dump.tool.clear();
    return;
  }
  // HOME: gdb wants one for its caches (it writes nothing there with these settings).
  absl::StatusOr<StartedHelper> started = StartHelper(
      executable, std::move(argv), {"PATH=" + options.path_env, "LC_ALL=C", "HOME=" + dir}, out);
  close(out);
  if (!started.ok()) {
    dump.skipped = std::string(started.status().message());
    dump.tool.clear();
    return;
  }
  dump.helper = *started;
}

// Waits for every started dump until `deadline` (helper_run.h), serving `keep_reading`
// meanwhile, then reads what each wrote.
void FinishStackDumps(std::vector<StackDump>& dumps, Clock::time_point started,
                      Clock::time_point deadline, const KeepReading& keep_reading) {
  std::vector<StartedHelper*> helpers;
  for (StackDump& dump : dumps) helpers.push_back(&dump.helper);
  WaitForHelpers(helpers, started, deadline, keep_reading.fd, keep_reading.on_readable);
  for (StackDump& dump : dumps) {
    if (!dump.output_path.empty()) {
      dump.output = ReadWholeFile(dump.output_path).value_or("");
      unlink(dump.output_path.c_str());
    }
  }
}

// The worker's NCCL flight-recorder dump, when it wrote one, copied beside the report.
std::vector<std::string> CopyNcclTraces(const HungWorker& worker, const std::string& dir) {
  std::vector<std::string> copied;
  struct stat st {};
  if (worker.nccl_trace_file.empty() || stat(worker.nccl_trace_file.c_str(), &st) != 0 ||
      !S_ISREG(st.st_mode) ||
      std::chrono::system_clock::from_time_t(st.st_mtim.tv_sec + 1) < worker.started_at) {
    return copied;
  }
  std::optional<std::string> data = ReadWholeFile(worker.nccl_trace_file);
  if (!data) return copied;
  const size_t slash = worker.nccl_trace_file.rfind('/');
  const std::string target = dir + "/" + worker.nccl_trace_file.substr(slash + 1);
  std::ofstream(target, std::ios::binary | std::ios::trunc) << *data;
  copied.push_back(target);
  return copied;
}

std::string StackSummary(const StackDump& dump, pid_t pid) {
  if (dump.tool.empty()) return absl::StrCat("no stack dump: ", dump.skipped);
  if (absl::StrContains(dump.output, "Operation not permitted") ||
      absl::StrContains(dump.output, "Permission denied")) {
    return absl::StrCat("no stack dump: the kernel refused ", dump.tool,
                        " ptrace (kernel.yama.ptrace_scope, or no CAP_SYS_PTRACE)");
  }
  if (dump.helper.timed_out) {
    return absl::StrCat("no stack dump: ", dump.tool, " ran out of time");
  }
  std::string top = TopFrames(dump.output, pid, 4);
  if (top.empty()) return absl::StrCat("no stack in ", dump.tool, "'s output");
  return absl::StrCat("stack (", dump.tool, "): ", top);
}

// The function's name at the start of a frame's text: "ns::f (args) at x.cc:3",
// "ns::f(int, std::function<void (int)>) (args)" and "f@GLIBC_2.2.5" give "ns::f" and "f";
// "(anonymous namespace)", "operator()" and template arguments are kept whole.
std::string FunctionName(absl::string_view text) {
  constexpr absl::string_view kAnonymous = "(anonymous namespace)";
  constexpr absl::string_view kCall = "operator()";
  size_t i = 0;
  int angle = 0;
  while (i < text.size()) {
    if (text.substr(i).substr(0, kAnonymous.size()) == kAnonymous) {
      i += kAnonymous.size();
      continue;
    }
    if (text.substr(i).substr(0, kCall.size()) == kCall) {
      i += kCall.size();
      continue;
    }
    const char c = text[i];
    if (c == '<') ++angle;
    if (c == '>' && angle > 0) --angle;
    if (angle == 0 && (c == '(' || c == ' ' || c == '@')) break;
    ++i;
  }
  std::string name(text.substr(0, i));
  if (name.size() > 120) name = name.substr(0, 117) + "...";
  return name;
}

}  // namespace

bool IsStackDumper(const std::string& name) {
  return name.empty() || name == "py-spy" || name == "eu-stack" || name == "gdb" || name == "none";
}

std::string TopFrames(std::string_view dump_text, pid_t tid, size_t count) {
  const absl::string_view dump(dump_text.data(), dump_text.size());
  const std::vector<absl::string_view> lines = absl::StrSplit(dump, '\n');
  // The thread's section: gdb's "Thread 1 (Thread 0x.. (LWP <tid>) ...):", eu-stack's
  // "TID <tid>:", py-spy's "Thread <tid> (idle): ...". Else the first section.
  auto is_section = [](absl::string_view line) {
    return absl::StartsWith(line, "Thread ") || absl::StartsWith(line, "TID ");
  };
  const std::string gdb_tag = absl::StrCat("(LWP ", tid, ")");
  const std::string eu_stack_tag = absl::StrCat("TID ", tid, ":");
  const std::string py_spy_tag = absl::StrCat("Thread ", tid, " ");
  size_t start = lines.size();
  for (size_t i = 0; i < lines.size() && start == lines.size(); ++i) {
    if (is_section(lines[i]) && (absl::StrContains(lines[i], gdb_tag) || lines[i] == eu_stack_tag ||
                                 absl::StartsWith(lines[i], py_spy_tag))) {
      start = i + 1;
    }
  }
  for (size_t i = 0; i < lines.size() && start == lines.size(); ++i) {
    if (is_section(lines[i])) start = i + 1;
  }
  std::vector<std::string> frames;
  for (size_t i = start; i < lines.size() && frames.size() < count; ++i) {
    absl::string_view line = lines[i];
    if (is_section(line) || line.empty()) break;
    std::string name;
    if (absl::ConsumePrefix(&line, "#")) {
      // gdb: "#1  0x00.. in name (args) at file:line"; eu-stack: "#1  0x00.. name - module".
      while (!line.empty() && absl::ascii_isdigit(line.front())) line.remove_prefix(1);
      line = absl::StripLeadingAsciiWhitespace(line);
      if (absl::StartsWith(line, "0x")) {
        const size_t space = line.find(' ');
        line = space == absl::string_view::npos ? absl::string_view() : line.substr(space + 1);
        absl::ConsumePrefix(&line, "in ");
      }
      if (line.empty() || absl::StartsWith(line, "- ")) continue;  // no symbol
      name = FunctionName(line);
      // Frames without a symbol, and the C library's internals (__futex_abstimed_wait, ...),
      // say little in a one-line summary: the frames that called them do.
      if (name.empty() || name == "??" || absl::StartsWith(name, "__")) continue;
    } else if (absl::StartsWith(line, "    ")) {  // py-spy: "    name (file.py:12)"
      line = absl::StripLeadingAsciiWhitespace(line);
      name = std::string(line.substr(0, line.find(" (")));
    } else {
      continue;
    }
    frames.push_back(std::move(name));
  }
  std::string text;
  for (const std::string& frame : frames) absl::StrAppend(&text, text.empty() ? "" : " < ", frame);
  return text;
}

HangDiagnostics CollectHangDiagnostics(const std::vector<HungWorker>& hung, const std::string& dir,
                                       const DiagnosticsOptions& options,
                                       const KeepReading& keep_reading) {
  const Clock::time_point started = Clock::now();
  HangDiagnostics result;
  // The /proc state first, before a tracer stops anything.
  std::vector<std::optional<ProcStat>> before(hung.size());
  std::vector<std::vector<ThreadInfo>> threads(hung.size());
  for (size_t i = 0; i < hung.size(); ++i) {
    before[i] = ReadProcStat(hung[i].pid);
    threads[i] = ReadThreads(hung[i].pid);
  }
  std::vector<StackDump> dumps(hung.size());
  std::vector<std::vector<std::string>> kernel_stacks(hung.size());
  for (size_t i = 0; i < hung.size(); ++i) {
    if (before[i] && before[i]->state == 'D') kernel_stacks[i] = ReadKernelStack(hung[i].pid);
    if (!before[i]) {
      dumps[i].skipped = "the process is gone";
    } else if (hung[i].uninterruptible) {
      dumps[i].skipped = "a tracer cannot attach to a process in uninterruptible sleep";
    } else {
      StartStackDump(hung[i], dir, options, "", dumps[i]);
    }
  }
  bool gdb_started = false;
  for (const StackDump& dump : dumps) gdb_started = gdb_started || dump.tool == "gdb";
  const Clock::time_point deadline =
      started + (gdb_started ? std::max(options.stack_dump_budget, options.gdb_stack_dump_budget)
                             : options.stack_dump_budget);
  FinishStackDumps(dumps, started, deadline, keep_reading);
  // eu-stack cannot unwind through code without unwind tables (a JIT-compiled kernel, say), where
  // gdb's heuristics still find the callers: ask gdb for those, within what is left of the budget.
  if (options.stack_dumper.empty()) {
    std::vector<size_t> retry;
    for (size_t i = 0; i < hung.size(); ++i) {
      if (dumps[i].tool == "eu-stack" && !dumps[i].helper.timed_out &&
          TopFrames(dumps[i].output, hung[i].pid, 1).empty()) {
        retry.push_back(i);
      }
    }
    std::vector<StackDump> second(retry.size());
    for (size_t k = 0; k < retry.size() && Clock::now() < deadline; ++k) {
      StartStackDump(hung[retry[k]], dir, options, "gdb", second[k]);
    }
    FinishStackDumps(second, started, deadline, keep_reading);
    for (size_t k = 0; k < retry.size(); ++k) {
      StackDump& first = dumps[retry[k]];
      if (second[k].tool.empty() || second[k].output.empty()) continue;
      second[k].output =
          absl::StrCat(second[k].output, "\n(eu-stack, which could not unwind the main thread:)\n",
                       first.output);
      first = std::move(second[k]);
    }
  }

  for (size_t i = 0; i < hung.size(); ++i) {
    const HungWorker& worker = hung[i];
    // A tracer that was killed mid-attach can leave the process stopped: undo what we did.
    std::optional<ProcStat> after = ReadProcStat(worker.pid);
    if (before[i] && after && IsStoppedState(after->state) && !IsStoppedState(before[i]->state)) {
      kill(worker.pid, SIGCONT);
    }
    const std::vector<std::string> traces =
        dir.empty() ? std::vector<std::string>{} : CopyNcclTraces(worker, dir);

    std::vector<std::string>& lines = result.short_form[worker.local_rank];
    const std::string state =
        before[i] ? ProcStateName(before[i]->state) : std::string("gone (exited meanwhile)");
    std::string main_wait;
    std::map<char, int> by_state;
    for (const ThreadInfo& t : threads[i]) {
      ++by_state[t.stat.state];
      if (t.tid == worker.pid && !t.wchan.empty()) main_wait = t.wchan;
    }
    std::string counts;
    for (const auto& [s, n] : by_state)
      absl::StrAppend(&counts, counts.empty() ? "" : ", ", n, " ", std::string(1, s));
    lines.push_back(absl::StrCat(
        "rank ", worker.global_rank, " (pid ", worker.pid, "): ", state, "; ", threads[i].size(),
        " thread(s)", counts.empty() ? "" : absl::StrCat(" (", counts, ")"),
        main_wait.empty() ? "" : absl::StrCat("; main thread waits in ", main_wait),
        !worker.heartbeat_watched ? ""
        : worker.since_heartbeat
            ? absl::StrCat("; last heartbeat ", FormatDuration(*worker.since_heartbeat), " ago")
            : "; no heartbeat yet"));
    if (!kernel_stacks[i].empty()) {
      std::vector<std::string> top(
          kernel_stacks[i].begin(),
          kernel_stacks[i].begin() + std::min<size_t>(kernel_stacks[i].size(), 4));
      lines.push_back(absl::StrCat("  kernel stack: ", absl::StrJoin(top, " < ")));
    }
    if (!worker.uninterruptible || kernel_stacks[i].empty()) {
      lines.push_back(absl::StrCat("  ", StackSummary(dumps[i], worker.pid)));
    }
    if (!traces.empty()) {
      lines.push_back(absl::StrCat("  NCCL flight recorder: ", traces.size(), " dump(s) copied"));
    }

    std::string report;
    absl::StrAppend(&report, "mxrun hang diagnostics\n");
    absl::StrAppend(&report, "time         : ",
                    absl::FormatTime("%Y-%m-%d %H:%M:%E3S UTC", absl::Now(), absl::UTCTimeZone()),
                    "\n");
    absl::StrAppend(&report, "rank         : ", worker.global_rank, " (local_rank ",
                    worker.local_rank, "), pid ", worker.pid, "\n");
    absl::StrAppend(&report, "rule         : ", worker.rule, ": ", worker.detail, "\n");
    absl::StrAppend(
        &report, "heartbeat    : ",
        !worker.heartbeat_watched ? std::string("not watched (--hang_timeout off)")
        : worker.since_heartbeat
            ? absl::StrCat("last seen ", FormatDuration(*worker.since_heartbeat), " ago")
            : std::string("never seen"),
        "\n");
    absl::StrAppend(&report, "state        : ", state,
                    before[i] ? absl::StrCat(" (", before[i]->comm, ")") : "", "\n");
    absl::StrAppend(&report, "\nthreads (tid, name, state, wait channel):\n");
    for (const ThreadInfo& t : threads[i]) {
      absl::StrAppend(&report, "  ", t.tid, "  ", t.stat.comm, "  ", std::string(1, t.stat.state),
                      "  ", t.wchan.empty() ? "-" : t.wchan, "\n");
    }
    if (!kernel_stacks[i].empty()) {
      absl::StrAppend(&report, "\nkernel stack (/proc/", worker.pid, "/stack):\n");
      for (const std::string& frame : kernel_stacks[i]) absl::StrAppend(&report, "  ", frame, "\n");
    }
    absl::StrAppend(&report, "\nlast output lines:\n");
    for (const std::string& line : worker.last_lines) absl::StrAppend(&report, "  ", line, "\n");
    absl::StrAppend(&report, "\nstack dump: ");
    if (dumps[i].tool.empty()) {
      absl::StrAppend(&report, "skipped: ", dumps[i].skipped, "\n");
    } else {
      const StartedHelper& tool = dumps[i].helper;
      absl::StrAppend(&report, dumps[i].tool, ", ",
                      FormatDuration(std::chrono::duration_cast<milliseconds>(tool.took)),
                      tool.timed_out ? " (killed: out of time)" : "", "\n", dumps[i].output, "\n");
    }
    for (const std::string& trace : traces) {
      absl::StrAppend(&report, "NCCL flight-recorder dump: ", trace, "\n");
    }
    if (!dir.empty()) {
      std::ofstream(absl::StrCat(dir, "/rank", worker.global_rank, ".txt"), std::ios::trunc)
          << report;
    }
  }
  result.took = std::chrono::duration_cast<milliseconds>(Clock::now() - started);
  return result;
}

}  // namespace mxrun

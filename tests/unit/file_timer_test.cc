// The FileTimer protocol's lines and pipe (agent/hang/file_timer.h), the /proc stat parser and the
// stack summary of hang diagnostics. A real named pipe in a temporary folder; no sleeps: writes to
// a pipe are readable at once.

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>

#include "agent/hang/file_timer.h"
#include "agent/hang/hang_diagnostics.h"
#include "agent/process/proc_stat.h"
#include "common/worker_failure.h"
#include "tests/temp_dir.h"

using mxrun::FileTimerPipe;
using mxrun::FileTimerRequest;
using mxrun::ParseFileTimerLine;
using mxrun::testing::TempDir;

namespace {

// A line exactly as torch.distributed.elastic.timer.FileTimerRequest.to_json() writes it.
const char kTorchLine[] =
    R"({"version": 1, "pid": 4321, "scope_id": "/work/train.py#17", "expiration_time": )"
    R"(1700000000.25, "signal": 9})";

std::string Error(const std::string& line) {
  absl::StatusOr<FileTimerRequest> r = ParseFileTimerLine(line);
  REQUIRE_FALSE(r.ok());
  return std::string(r.status().message());
}

// Writes as FileTimerClient does: a non-blocking open, one write, close.
void ClientWrite(const std::string& path, const std::string& data) {
  int fd = open(path.c_str(), O_WRONLY | O_NONBLOCK);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, data.data(), data.size()) == static_cast<ssize_t>(data.size()));
  close(fd);
}

struct Received {
  std::vector<FileTimerRequest> requests;
  std::vector<std::string> errors;
};

Received Drain(FileTimerPipe& pipe) {
  Received got;
  pipe.OnReadable([&](const absl::StatusOr<FileTimerRequest>& r, std::string_view) {
    if (r.ok()) {
      got.requests.push_back(*r);
    } else {
      got.errors.emplace_back(r.status().message());
    }
  });
  return got;
}

}  // namespace

TEST_CASE("FileTimer lines: torch's own request and release", "[file_timer]") {
  absl::StatusOr<FileTimerRequest> r = ParseFileTimerLine(kTorchLine);
  REQUIRE(r.ok());
  CHECK(r->pid == 4321);
  CHECK(r->scope_id == "/work/train.py#17");
  CHECK(r->expiration_time == 1700000000.25);
  CHECK(r->signal == SIGKILL);
  absl::StatusOr<FileTimerRequest> release = ParseFileTimerLine(
      R"({"version": 1, "pid": 4321, "scope_id": "s", "expiration_time": -1, "signal": 0})");
  REQUIRE(release.ok());
  CHECK(release->expiration_time < 0);
  CHECK(release->signal == 0);
  // A negative signal means "do not kill" to torch: kept as no signal.
  CHECK(ParseFileTimerLine(
            R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": 1, "signal": -3})")
            ->signal == 0);
}

TEST_CASE("FileTimer lines: bad ones say what is wrong", "[file_timer]") {
  CHECK(Error("not json") == "not a JSON object");
  CHECK(Error("[1, 2]") == "not a JSON object");
  CHECK(Error(R"({"pid": 1, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        "'version' must be 1");
  CHECK(Error(R"({"version": 2, "pid": 1, "scope_id": "s", "expiration_time": 1, "signal": 9})") ==
        "'version' must be 1");
  CHECK_THAT(Error(R"({"version": 1, "pid": "1", "scope_id": "s", "expiration_time": 1,
                      "signal": 9})"),
             Catch::StartsWith("'pid' must be"));
  CHECK_THAT(Error(R"({"version": 1, "pid": 0, "scope_id": "s", "expiration_time": 1,
                      "signal": 9})"),
             Catch::StartsWith("'pid' must be"));
  CHECK(Error(R"({"version": 1, "pid": 1, "scope_id": 7, "expiration_time": 1, "signal": 9})") ==
        "'scope_id' must be a string");
  CHECK_THAT(Error(R"({"version": 1, "pid": 1, "scope_id": "s", "signal": 9})"),
             Catch::StartsWith("'expiration_time' must be a number"));
  CHECK_THAT(Error(R"({"version": 1, "pid": 1, "scope_id": "s", "expiration_time": 1,
                      "signal": 999})"),
             Catch::StartsWith("'signal' must be an integer"));
  CHECK_THAT(Error(std::string(5000, ' ')), Catch::StartsWith("longer than 4096 bytes"));
  CHECK_THAT(Error(R"({"version": 1, "pid": 1, "scope_id": "s", "expiration_time": 1,
                      "signal": 18446744073709551615})"),
             Catch::StartsWith("'signal' must be an integer"));
  CHECK(
      Error(R"({"version": 1, "pid": 1, "scope_id": "s", "expiration_time": NaN, "signal": 9})") ==
      "'expiration_time' is NaN");
}

TEST_CASE("FileTimer lines: Python's Infinity, as json.dumps writes it", "[file_timer]") {
  absl::StatusOr<FileTimerRequest> never = ParseFileTimerLine(
      R"({"version": 1, "pid": 5, "scope_id": "Infinity", "expiration_time": Infinity, "signal": 9})");
  REQUIRE(never.ok());
  CHECK(never->expiration_time > 1e300);  // never expires
  CHECK(never->scope_id == "Infinity");
  absl::StatusOr<FileTimerRequest> release = ParseFileTimerLine(
      R"({"version": 1, "pid": 5, "scope_id": "s", "expiration_time": -Infinity, "signal": 0})");
  REQUIRE(release.ok());
  CHECK(release->expiration_time < 0);
}

TEST_CASE("FileTimer pipe: clients' lines arrive whole, bad and oversize ones are refused",
          "[file_timer]") {
  TempDir dir;
  const std::string path = dir.path() + "/timer";
  auto pipe = FileTimerPipe::Create(path);
  REQUIRE(pipe.ok());
  struct stat st {};
  REQUIRE(stat(path.c_str(), &st) == 0);
  CHECK(S_ISFIFO(st.st_mode));

  ClientWrite(path, std::string(kTorchLine) + "\n");
  ClientWrite(path, "garbage\n");
  ClientWrite(path, std::string(kTorchLine).substr(0, 20));  // a line in two writes
  Received got = Drain(**pipe);
  CHECK(got.requests.size() == 1);
  CHECK(got.errors == std::vector<std::string>{"not a JSON object"});
  ClientWrite(path, std::string(kTorchLine).substr(20) + "\n");
  ClientWrite(path, std::string(9000, 'x') + "\n" + kTorchLine + "\n");
  got = Drain(**pipe);
  CHECK(got.requests.size() == 2);
  CHECK(got.errors == std::vector<std::string>{"longer than 4096 bytes (PIPE_BUF)"});
  CHECK(Drain(**pipe).requests.empty());  // nothing more, and no end of file: we hold a writer

  pipe->reset();
  CHECK(access(path.c_str(), F_OK) != 0);  // removed with the server
}

TEST_CASE("FileTimer pipe: an old pipe is replaced, any other file is left alone", "[file_timer]") {
  TempDir dir;
  const std::string stale = dir.path() + "/stale";
  REQUIRE(mkfifo(stale.c_str(), 0600) == 0);
  CHECK(FileTimerPipe::Create(stale).ok());

  const std::string regular = dir.path() + "/data.txt";
  std::ofstream(regular) << "precious";
  auto refused = FileTimerPipe::Create(regular);
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("exists and is not a named pipe"));
  CHECK(mxrun::ReadWholeFile(regular) == "precious");
}

TEST_CASE("/proc stat lines: comm with spaces and parentheses", "[hang]") {
  auto stat = mxrun::ParseProcStat("1234 (my (odd) name) T 77 1234 1234 0 -1 4194560");
  REQUIRE(stat.has_value());
  CHECK(stat->comm == "my (odd) name");
  CHECK(stat->state == 'T');
  CHECK(stat->ppid == 77);
  CHECK_FALSE(mxrun::ParseProcStat("garbage").has_value());
  CHECK(mxrun::ProcStateName('T') == "T (stopped: SIGSTOP, SIGTSTP or a debugger)");
  auto self = mxrun::ReadProcStat(getpid());
  REQUIRE(self.has_value());
  CHECK(self->ppid == getppid());
}

TEST_CASE("the top of a thread's stack from gdb and py-spy dumps", "[hang]") {
  const char gdb[] =
      "[Thread debugging using libthread_db enabled]\n"
      "Thread 2 (Thread 0x7f (LWP 101) \"worker\"):\n"
      "#0  0x00007f in epoll_wait (epfd=3) at epoll_wait.c:30\n"
      "\n"
      "Thread 1 (Thread 0x7e (LWP 100) \"python3\"):\n"
      "#0  __GI___clock_nanosleep (clock_id=1) at clock_nanosleep.c:71\n"
      "#1  0x00000000005d64b4 in ?? ()\n"
      "#2  0x0000000000545963 in c10d::ProcessGroupGloo::allreduce (this=0x1) at pg.cpp:9\n"
      "#3  0x000000000053acbc in PyObject_Vectorcall ()\n"
      "#4  0x000000000052b9e0 in _PyEval_EvalFrameDefault ()\n";
  CHECK(mxrun::TopFrames(gdb, 100, 3) ==
        "c10d::ProcessGroupGloo::allreduce < PyObject_Vectorcall < _PyEval_EvalFrameDefault");
  CHECK(mxrun::TopFrames(gdb, 101, 3) == "epoll_wait");
  const char cpp[] =
      "Thread 1 (Thread 0x7f (LWP 7) \"train\"):\n"
      "#0  __futex_abstimed_wait_common64 (private=0) at futex-internal.c:57\n"
      "#1  0x00007f in c10d::Work::wait(std::chrono::duration<long, std::ratio<1l, 1000l> >) () "
      "from libtorch_cpu.so\n"
      "#2  0x00005583 in mxrun::trainer::(anonymous namespace)::Trainer::TrainEpoch (this=0x1, "
      "epoch=0) at trainer.cc:9\n";
  CHECK(mxrun::TopFrames(cpp, 7, 4) ==
        "c10d::Work::wait < mxrun::trainer::(anonymous namespace)::Trainer::TrainEpoch");
  const char py_spy[] =
      "Process 100: python3 train.py\n"
      "Python v3.11.2 (/usr/bin/python3.11)\n\n"
      "Thread 100 (idle): \"MainThread\"\n"
      "    wait (threading.py:320)\n"
      "    step (train.py:40)\n"
      "    <module> (train.py:55)\n";
  CHECK(mxrun::TopFrames(py_spy, 100, 2) == "wait < step");
  const char eu_stack[] =
      "PID 13337 - process\n"
      "TID 13337:\n"
      "#0  0x00007f0ccb35a503 clock_nanosleep@GLIBC_2.2.5 - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "#1  0x00007f0ccb35ee53 __nanosleep - /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "#2  0x0000561ac924e4af - /usr/bin/sleep\n"
      "#3  0x0000558882104ca7 std::mersenne_twister_engine<unsigned long, 64ul>::operator()() - "
      "/usr/bin/train\n"
      "#4  0x00005588821047b3 mxrun::trainer::MakeSyntheticImages(long, int, unsigned long) - "
      "/usr/bin/train\n"
      "TID 13340:\n"
      "#0  0x00007f5c6831f829 syscall - /usr/lib/x86_64-linux-gnu/libc.so.6\n";
  CHECK(mxrun::TopFrames(eu_stack, 13337, 3) ==
        "clock_nanosleep < std::mersenne_twister_engine<unsigned long, 64ul>::operator() < "
        "mxrun::trainer::MakeSyntheticImages");
  CHECK(mxrun::TopFrames(eu_stack, 13340, 3) == "syscall");
  CHECK(mxrun::TopFrames("ptrace: Operation not permitted.\n", 100, 3).empty());
}

TEST_CASE("a hang in words: the rule, the numbers, and how the worker ended", "[hang]") {
  mxrun::WorkerFailure f;
  f.hang.rule = "heartbeat";
  f.hang.detail = "no heartbeat for 10.2 s (--hang_timeout=10.0 s)";
  CHECK(mxrun::DescribeExit(f) ==
        "hung (heartbeat): no heartbeat for 10.2 s (--hang_timeout=10.0 s)");
  f.hang.rule = "FileTimer";
  f.hang.detail = "timer 's' of pid 5 expired";
  f.term_signal = SIGKILL;
  CHECK(mxrun::DescribeExit(f) ==
        "hung (FileTimer): timer 's' of pid 5 expired, then Signal 9 (SIGKILL)");
}

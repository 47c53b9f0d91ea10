#include <catch2/catch.hpp>

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/process/process_launcher.h"

TEST_CASE("a spawned process leads its own session and process group, with the given environment",
          "[spawn]") {
  int out[2];
  REQUIRE(pipe2(out, O_CLOEXEC) == 0);
  mxrun::SpawnRequest request;
  request.executable = "/bin/sh";
  request.argv = {"sh", "-c", "echo $MXRUN_TEST_VALUE $(cut -d' ' -f5,6 /proc/$$/stat) $$"};
  request.env = {"MXRUN_TEST_VALUE=hello", "PATH=/usr/bin:/bin"};
  request.stdout_fd = out[1];
  auto pid = mxrun::SpawnProcess(request);
  close(out[1]);
  REQUIRE(pid.ok());
  int status = 0;
  REQUIRE(waitpid(*pid, &status, 0) == *pid);
  char buffer[128] = {};
  ssize_t n = read(out[0], buffer, sizeof buffer - 1);
  close(out[0]);
  std::string text(buffer, n > 0 ? n : 0);
  // /proc/<pid>/stat fields 5 and 6: the process group and the session (setsid, as torchrun's
  // start_new_session), so that with sched_autogroup each worker gets a share of its own.
  const std::string id = std::to_string(*pid);
  CHECK(text == "hello " + id + " " + id + " " + id + "\n");
}

TEST_CASE("an exec failure is reported with the errno text, not as a silent exit", "[spawn]") {
  char path[] = "/tmp/mxrun-notexec-XXXXXX";
  int fd = mkstemp(path);
  REQUIRE(fd >= 0);
  REQUIRE(write(fd, "just text\n", 10) == 10);
  close(fd);
  chmod(path, 0755);
  mxrun::SpawnRequest request;
  request.executable = path;
  request.argv = {path};
  auto pid = mxrun::SpawnProcess(request);
  REQUIRE_FALSE(pid.ok());
  CHECK_THAT(std::string(pid.status().message()), Catch::Contains("Exec format error"));
  unlink(path);
}

TEST_CASE("executables are resolved on PATH like execvp", "[spawn]") {
  CHECK(*mxrun::ResolveExecutable("sh", "/nonexistent:/bin") == "/bin/sh");
  auto missing = mxrun::ResolveExecutable("no-such-program-xyz", "/bin:/usr/bin");
  REQUIRE_FALSE(missing.ok());
  CHECK(absl::IsNotFound(missing.status()));
  auto not_exec = mxrun::ResolveExecutable("/etc/passwd", "");
  CHECK(absl::IsPermissionDenied(not_exec.status()));
}

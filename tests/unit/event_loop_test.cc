// The agent's event loop sees every worker's exit, also when another thread of the process takes
// the SIGCHLD: the NVIDIA driver starts threads with SIGCHLD unblocked once NVML is loaded (seen on
// an H200: mxrun waited for a worker that had long exited, in 1 run of 2). No sleeps: each wait is
// the loop's own, bounded by a deadline.

#include <catch2/catch.hpp>

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "agent/process/event_loop.h"

namespace {

// A thread that wants SIGCHLD, as the driver's do: the kernel may deliver the process's SIGCHLD
// to it, and with the default action (ignore) it is gone before the signalfd reads it.
class SigchldThief {
 public:
  SigchldThief() {
    REQUIRE(pipe(stop_) == 0);
    thread_ = std::thread([fd = stop_[0]] {
      sigset_t mask;
      sigemptyset(&mask);
      sigaddset(&mask, SIGCHLD);
      pthread_sigmask(SIG_UNBLOCK, &mask, nullptr);
      pollfd p{fd, POLLIN, 0};
      while (poll(&p, 1, -1) <= 0) {
      }
    });
  }
  ~SigchldThief() {
    char c = 'x';
    (void)!write(stop_[1], &c, 1);
    thread_.join();
    close(stop_[0]);
    close(stop_[1]);
  }

 private:
  int stop_[2] = {-1, -1};
  std::thread thread_;
};

}  // namespace

TEST_CASE("event loop: every child's exit is seen while another thread takes SIGCHLD",
          "[event_loop]") {
  pid_t child = -1;
  bool reaped = false;
  auto loop = mxrun::EventLoop::Create({SIGCHLD}, [&](int signo) {
    if (signo == SIGCHLD && child > 0 && waitpid(child, nullptr, WNOHANG) == child) reaped = true;
  });
  REQUIRE(loop.ok());
  SigchldThief thief;  // after Create: it unblocks SIGCHLD for itself only
  for (int i = 0; i < 20; ++i) {
    child = fork();
    REQUIRE(child >= 0);
    if (child == 0) _exit(0);
    (*loop)->WatchChild(child);
    reaped = false;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(3);
    while (!reaped && std::chrono::steady_clock::now() < deadline) (*loop)->RunOnce(deadline);
    INFO("child " << i << " (pid " << child << ")");
    if (!reaped) waitpid(child, nullptr, 0);  // leave no zombie behind
    REQUIRE(reaped);
  }
}

// A load generator for a TCPStore server (mxrun's workers' store or PyTorch's own): N simulated
// ranks, each on a connection of its own, doing what init_process_group with a store-based
// barrier does (torch.distributed's _store_based_barrier):
//   VALIDATE, PING (as every TCPStore client connects), ADD "init/" 1 (world_size given),
//   SET "/rank/<r>" <its address> (what a backend publishes), ADD "/barrier" 1, and the rank
//   whose ADD answers N SETs "/barrier/last"; every rank WAITs for "/barrier/last".
// Non-blocking sockets on one epoll loop per thread (--threads T, default 1: rank r is thread
// r % T's); at most --connecting connections are being set up at once, shared out among the
// threads, as a job's ranks start over a spread of time rather than in one instant (the listen
// backlog, net.core.somaxconn, is finite for every server alike). One thread spends about as much
// CPU time as the barrier takes at 16,384 ranks (its side of every connection is kernel work), so
// on one machine it, not the server, can set the pace: more threads, on cores of their own, stand
// for ranks on other hosts.
//
// On loopback each simulated host (4,096 ranks) connects from an address of its own in 127/8, as
// ranks on many hosts would: from one source address, Linux's search for a free ephemeral port
// turns quadratic past about 14,000 connections (measured: 3.5 s of the load generator's own
// kernel time at 16,384 ranks, against 0.7 s at 12,000), which would be charged to the server.
//
// Prints one JSON line: {"ranks": N, "connected_s": ..., "barrier_s": ..., "failed": F}, where
// connected_s is from the first connect to the last rank's PING answered and barrier_s from the
// first connect to the last rank's WAIT answered. Built with the project (build/bin/store_loadgen);
// scripts/bench/store_scale.py drives it.
//
//   store_loadgen --port 29500 --ranks 16384 [--host 127.0.0.1] [--connecting 512] [--threads 1]
//                 [--deadline 300]   (seconds: the ranks not done by then are "unfinished")

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/store/store_wire.h"

namespace {

using Clock = std::chrono::steady_clock;

enum class Phase { kConnecting, kPong, kInit, kBarrierAdd, kWait, kDone, kFailed };

struct Rank {
  int fd = -1;
  Phase phase = Phase::kConnecting;
  std::string out;  // to send
  std::size_t sent = 0;
  std::string in;            // received, not yet taken
  bool watching_out = true;  // registered for EPOLLOUT (from the connect on)
};

std::string Request(mxrun::StoreOp op, std::vector<std::string> keys = {},
                    std::vector<std::string> values = {}, std::int64_t number = 0,
                    std::uint32_t word = 0) {
  mxrun::StoreRequest request;
  request.op = op;
  request.keys = std::move(keys);
  request.values = std::move(values);
  request.number = number;
  request.word = word;
  return mxrun::EncodeStoreRequest(request);
}

constexpr int kRanksPerHost = 4096;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// What the threads share: the counts that say when every rank connected and every rank is done,
// and the times they did.
struct Progress {
  Progress(int ranks, int deadline_s) : ranks(ranks), deadline(std::chrono::seconds(deadline_s)) {}
  const int ranks;
  const std::chrono::seconds deadline;
  const Clock::time_point start = Clock::now();
  std::atomic<int> connected{0};
  std::atomic<int> finished{0};  // done or failed
  std::atomic<int> failed{0};
  std::atomic<Clock::rep> connected_at{0};  // since start; 0: not yet
  std::atomic<Clock::rep> barrier_at{0};
  void Connected() {
    if (connected.fetch_add(1) + 1 == ranks) connected_at = (Clock::now() - start).count();
  }
  void Finished(bool ok) {
    if (!ok) failed.fetch_add(1);
    if (finished.fetch_add(1) + 1 == ranks) barrier_at = (Clock::now() - start).count();
  }
};

// Thread `thread` of `threads`: the ranks r with r % threads == thread, on an epoll loop of its
// own. Its ranks' connections are left open in `kept` (closed once every thread is done, as ranks
// keep their store's connection: a close would be the server's work during the others' barrier).
void RunRanks(int thread, int threads, int connecting, const sockaddr_in& address,
              Progress& progress, std::vector<int>& kept) {
  const int ranks = progress.ranks;
  const bool loopback = (ntohl(address.sin_addr.s_addr) >> 24) == 127;
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  // The thread's ranks by local index (its epoll tag); global_rank says which rank each is.
  const int mine = (ranks - thread + threads - 1) / threads;
  auto global_rank = [&](int local) { return thread + local * threads; };
  std::vector<Rank> all(static_cast<std::size_t>(mine));
  int next = 0, in_setup = 0, finished = 0;
  auto finish = [&](bool ok) {
    ++finished;
    progress.Finished(ok);
  };
  const std::string validate =
      Request(mxrun::StoreOp::kValidate, {}, {}, 0, mxrun::kStoreValidationMagic);

  auto fail = [&](int local) {
    Rank& rank = all[static_cast<std::size_t>(local)];
    if (rank.phase == Phase::kFailed || rank.phase == Phase::kDone) return;
    if (rank.phase == Phase::kConnecting || rank.phase == Phase::kPong) --in_setup;
    rank.phase = Phase::kFailed;
    finish(false);
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, rank.fd, nullptr);
    close(rank.fd);
  };
  auto flush = [&](int local) {
    Rank& rank = all[static_cast<std::size_t>(local)];
    while (rank.sent < rank.out.size()) {
      const ssize_t n =
          send(rank.fd, rank.out.data() + rank.sent, rank.out.size() - rank.sent, MSG_NOSIGNAL);
      if (n > 0) {
        rank.sent += static_cast<std::size_t>(n);
      } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        break;
      } else {
        fail(local);
        return;
      }
    }
    if (rank.sent == rank.out.size()) {
      rank.out.clear();
      rank.sent = 0;
    }
    // Re-registered only when that changes: a call per reply would be the simulator's own cost
    // (three of them per rank), not the store's.
    if (rank.watching_out == rank.out.empty()) {
      rank.watching_out = !rank.out.empty();
      epoll_event event{};
      event.events = EPOLLIN | (rank.watching_out ? static_cast<std::uint32_t>(EPOLLOUT) : 0u);
      event.data.u32 = static_cast<std::uint32_t>(local);
      epoll_ctl(epoll_fd, EPOLL_CTL_MOD, rank.fd, &event);
    }
  };
  auto open_more = [&] {
    while (next < mine && in_setup < connecting) {
      const int local = next++;
      const int r = global_rank(local);
      Rank& rank = all[static_cast<std::size_t>(local)];
      rank.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      const int on = 1;
      setsockopt(rank.fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      ++in_setup;
      bool bound = true;
      if (loopback && rank.fd >= 0) {
        sockaddr_in source{};
        source.sin_family = AF_INET;
        // 127.0.1.1, 127.0.1.2, ...: one per simulated host; the port is chosen at connect.
        source.sin_addr.s_addr = htonl(0x7f000101u + static_cast<std::uint32_t>(r / kRanksPerHost));
        setsockopt(rank.fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &on, sizeof on);
        bound = bind(rank.fd, reinterpret_cast<sockaddr*>(&source), sizeof source) == 0;
      }
      if (rank.fd < 0 || !bound ||
          (connect(rank.fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 &&
           errno != EINPROGRESS)) {
        rank.phase = Phase::kFailed;
        finish(false);
        --in_setup;
        if (rank.fd >= 0) close(rank.fd);
        continue;
      }
      epoll_event event{};
      event.events = EPOLLOUT | EPOLLIN;
      event.data.u32 = static_cast<std::uint32_t>(local);
      epoll_ctl(epoll_fd, EPOLL_CTL_ADD, rank.fd, &event);
    }
  };
  // What a rank sends next once its last reply came.
  auto advance = [&](int local) {
    const int r = global_rank(local);
    Rank& rank = all[static_cast<std::size_t>(local)];
    for (;;) {
      switch (rank.phase) {
        case Phase::kPong:
          if (rank.in.size() < 4) return;
          rank.in.erase(0, 4);
          --in_setup;
          progress.Connected();
          rank.phase = Phase::kInit;
          rank.out += Request(mxrun::StoreOp::kAdd, {"init/"}, {}, 1);
          break;
        case Phase::kInit:
          if (rank.in.size() < 8) return;
          rank.in.erase(0, 8);
          rank.phase = Phase::kBarrierAdd;
          rank.out += Request(mxrun::StoreOp::kSet, {"/rank/" + std::to_string(r)},
                              {"127.0.0.1:" + std::to_string(20000 + r % 40000)});
          rank.out += Request(mxrun::StoreOp::kAdd, {"/barrier"}, {}, 1);
          break;
        case Phase::kBarrierAdd: {
          if (rank.in.size() < 8) return;
          std::int64_t count = 0;
          std::memcpy(&count, rank.in.data(), 8);
          rank.in.erase(0, 8);
          if (count == ranks) rank.out += Request(mxrun::StoreOp::kSet, {"/barrier/last"}, {"1"});
          rank.out += Request(mxrun::StoreOp::kWait, {"/barrier/last"});
          rank.phase = Phase::kWait;
          break;
        }
        case Phase::kWait:
          if (rank.in.empty()) return;
          rank.in.erase(0, 1);
          rank.phase = Phase::kDone;
          finish(true);
          epoll_ctl(epoll_fd, EPOLL_CTL_DEL, rank.fd, nullptr);  // kept open, as a rank's store is
          return;
        default:
          return;
      }
    }
  };

  open_more();
  std::vector<epoll_event> events(1024);
  const auto deadline = progress.start + progress.deadline;
  while (finished < mine && Clock::now() < deadline) {
    const int n = epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), 1000);
    for (int i = 0; i < n; ++i) {
      const int local = static_cast<int>(events[i].data.u32);
      Rank& rank = all[static_cast<std::size_t>(local)];
      if (rank.phase == Phase::kFailed || rank.phase == Phase::kDone) continue;
      if (rank.phase == Phase::kConnecting) {
        int error = 0;
        socklen_t length = sizeof error;
        getsockopt(rank.fd, SOL_SOCKET, SO_ERROR, &error, &length);
        if (error != 0) {
          fail(local);
          continue;
        }
        rank.phase = Phase::kPong;
        rank.out = validate + Request(mxrun::StoreOp::kPing, {}, {}, 0,
                                      static_cast<std::uint32_t>(global_rank(local)));
        flush(local);
        continue;
      }
      if (events[i].events & EPOLLOUT) flush(local);
      if (rank.phase == Phase::kFailed) continue;
      if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
        char buffer[4096];
        const ssize_t got = read(rank.fd, buffer, sizeof buffer);
        if (got <= 0) {
          if (got < 0 && errno == EAGAIN) continue;
          fail(local);
          continue;
        }
        rank.in.append(buffer, static_cast<std::size_t>(got));
        advance(local);
        if (rank.phase != Phase::kFailed && !rank.out.empty()) flush(local);
      }
    }
    open_more();
  }
  for (Rank& rank : all) {
    if (rank.fd >= 0 && rank.phase != Phase::kFailed) kept.push_back(rank.fd);
  }
  close(epoll_fd);
}

}  // namespace
int main(int argc, char** argv) {
  std::string host = "127.0.0.1";
  int port = 0, ranks = 0, connecting = 512, threads = 1, deadline_s = 300;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--host")
      host = argv[i + 1];
    else if (flag == "--port")
      port = std::atoi(argv[i + 1]);
    else if (flag == "--ranks")
      ranks = std::atoi(argv[i + 1]);
    else if (flag == "--connecting")
      connecting = std::atoi(argv[i + 1]);
    else if (flag == "--threads")
      threads = std::atoi(argv[i + 1]);
    else if (flag == "--deadline")
      deadline_s = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr,
                   "store_loadgen: unknown flag %s (accepted: --host --port --ranks --connecting "
                   "--threads --deadline)\n",
                   argv[i]);
      return 2;
    }
  }
  if (port <= 0 || port > 65535 || ranks <= 0 || connecting <= 0 || deadline_s <= 0) {
    std::fprintf(stderr,
                 "store_loadgen: --port (1-65535) and --ranks (> 0) are required; --connecting "
                 "and --deadline must be above 0\n");
    return 2;
  }
  if (threads < 1 || threads > 256 || threads > ranks || threads > connecting) {
    std::fprintf(stderr,
                 "store_loadgen: --threads must be 1-256 and at most --ranks and --connecting, "
                 "got %d\n",
                 threads);
    return 2;
  }
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  if (limit.rlim_cur < static_cast<rlim_t>(ranks) + 64) {
    limit.rlim_cur = std::min<rlim_t>(limit.rlim_max, static_cast<rlim_t>(ranks) + 64);
    setrlimit(RLIMIT_NOFILE, &limit);
  }
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<std::uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    std::fprintf(stderr, "store_loadgen: --host must be an IPv4 address, got %s\n", host.c_str());
    return 2;
  }
  const sockaddr_in& target = address;
  Progress progress(ranks, deadline_s);
  std::vector<std::thread> workers;
  std::vector<std::vector<int>> kept(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) {
    // --connecting shared out: the first threads take the remainder.
    const int share = connecting / threads + (t < connecting % threads ? 1 : 0);
    workers.emplace_back(RunRanks, t, threads, share, std::cref(target), std::ref(progress),
                         std::ref(kept[static_cast<std::size_t>(t)]));
  }
  for (std::thread& worker : workers) worker.join();
  const Clock::rep end = (Clock::now() - progress.start).count();
  const Clock::rep barrier_at = progress.barrier_at ? progress.barrier_at.load() : end;
  const Clock::rep connected_at = progress.connected_at ? progress.connected_at.load() : end;
  const int failed = progress.failed;
  const int done = progress.finished - failed;
  std::printf(
      "{\"ranks\": %d, \"threads\": %d, \"connected_s\": %.4f, \"barrier_s\": %.4f, "
      "\"failed\": %d, \"unfinished\": %d}\n",
      ranks, threads, Seconds(Clock::duration(connected_at)), Seconds(Clock::duration(barrier_at)),
      failed, ranks - done - failed);
  for (const std::vector<int>& fds : kept) {
    for (int fd : fds) close(fd);
  }
  return failed == 0 && done == ranks ? 0 : 1;
}

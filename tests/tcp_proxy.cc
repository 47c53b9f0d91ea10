// A TCP proxy for the network-fault tests: it forwards every connection made to --listen on to
// --to, and makes the faults this machine's kernel cannot (no netem qdisc, no iptables):
//
//   --delay-ms=N          each chunk is forwarded N ms after it arrived, in both directions
//   --stall-ms=S --stall-every-ms=P
//                         nothing is forwarded during the first S ms of every period of P ms (the
//                         first period starts P ms after launch, so connections get established);
//                         data waits and is delivered when the stall ends, as after a stalled link
//   SIGUSR1 / SIGUSR2     hold everything (a partition: no FIN or RST, bytes wait) / release it
//
// Prints "listening on HOST:PORT" once ready; stops on SIGTERM or SIGINT. One thread, one poll
// loop.

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

struct Chunk {
  Clock::time_point due;
  std::string bytes;
};

// One direction of one connection: bytes read from `from`, written to `to` when due.
struct Pipe {
  int from = -1;
  int to = -1;
  std::deque<Chunk> queue;
  bool eof = false;  // `from` closed: shut `to` down for writing once the queue is empty
  bool shut = false;
};

struct Connection {
  Pipe up;    // client -> server
  Pipe down;  // server -> client
  bool dead = false;
};

bool SplitHostPort(const std::string& text, sockaddr_in& out) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  std::memset(&out, 0, sizeof(out));
  out.sin_family = AF_INET;
  out.sin_port = htons(static_cast<uint16_t>(std::atoi(text.c_str() + colon + 1)));
  return inet_pton(AF_INET, text.substr(0, colon).c_str(), &out.sin_addr) == 1;
}

[[noreturn]] void Die(const std::string& what) {
  std::fprintf(stderr, "tcp_proxy: %s: %s\n", what.c_str(), std::strerror(errno));
  std::exit(1);
}

void NonBlocking(int fd) { fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK); }

}  // namespace

int main(int argc, char** argv) {
  std::string listen_at;
  std::string to;
  long delay_ms = 0;
  long stall_ms = 0;
  long stall_every_ms = 0;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&](const char* name) -> const char* {
      const size_t n = std::strlen(name);
      return arg.compare(0, n, name) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--listen=")) {
      listen_at = v;
    } else if (const char* v = value("--to=")) {
      to = v;
    } else if (const char* v = value("--delay-ms=")) {
      delay_ms = std::atol(v);
    } else if (const char* v = value("--stall-ms=")) {
      stall_ms = std::atol(v);
    } else if (const char* v = value("--stall-every-ms=")) {
      stall_every_ms = std::atol(v);
    } else {
      std::fprintf(stderr, "tcp_proxy: unknown argument %s\n", arg.c_str());
      return 2;
    }
  }
  sockaddr_in listen_addr{};
  sockaddr_in target{};
  if (!SplitHostPort(listen_at, listen_addr) || !SplitHostPort(to, target) ||
      (stall_ms > 0 && stall_every_ms <= stall_ms)) {
    std::fprintf(stderr,
                 "usage: tcp_proxy --listen=IP:PORT --to=IP:PORT [--delay-ms=N] "
                 "[--stall-ms=S --stall-every-ms=P (P > S)]\n");
    return 2;
  }

  sigset_t signals;
  sigemptyset(&signals);
  for (int s : {SIGUSR1, SIGUSR2, SIGTERM, SIGINT}) sigaddset(&signals, s);
  sigprocmask(SIG_BLOCK, &signals, nullptr);
  const int signal_fd = signalfd(-1, &signals, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd < 0) Die("signalfd");

  const int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  const int one = 1;
  setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listener, reinterpret_cast<sockaddr*>(&listen_addr), sizeof(listen_addr)) != 0) {
    Die("bind " + listen_at);
  }
  if (listen(listener, 128) != 0) Die("listen");
  NonBlocking(listener);
  socklen_t len = sizeof(listen_addr);
  getsockname(listener, reinterpret_cast<sockaddr*>(&listen_addr), &len);
  char host[INET_ADDRSTRLEN];
  inet_ntop(AF_INET, &listen_addr.sin_addr, host, sizeof(host));
  std::printf("listening on %s:%d\n", host, ntohs(listen_addr.sin_port));
  std::fflush(stdout);

  const Clock::time_point started = Clock::now();
  bool held = false;  // SIGUSR1 .. SIGUSR2
  // The end of the stall under way (or `now` when none): nothing is written before it.
  auto blocked_until = [&](Clock::time_point now) -> Clock::time_point {
    if (stall_ms <= 0) return now;
    const long since = std::chrono::duration_cast<milliseconds>(now - started).count();
    if (since < stall_every_ms) return now;
    const long into = since % stall_every_ms;
    return into < stall_ms ? now + milliseconds(stall_ms - into) : now;
  };
  std::vector<std::unique_ptr<Connection>> connections;

  for (;;) {
    const Clock::time_point now = Clock::now();
    // Write what is due.
    for (auto& c : connections) {
      for (Pipe* p : {&c->up, &c->down}) {
        while (!held && !p->queue.empty() && p->queue.front().due <= now &&
               blocked_until(now) <= now) {
          std::string& bytes = p->queue.front().bytes;
          const ssize_t n = send(p->to, bytes.data(), bytes.size(), MSG_NOSIGNAL);
          if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
          if (n < 0) {
            c->dead = true;
            break;
          }
          bytes.erase(0, static_cast<size_t>(n));
          if (bytes.empty()) p->queue.pop_front();
        }
        if (p->eof && p->queue.empty() && !p->shut) {
          shutdown(p->to, SHUT_WR);
          p->shut = true;
        }
      }
      if (c->up.shut && c->down.shut) c->dead = true;
    }
    for (auto it = connections.begin(); it != connections.end();) {
      if ((*it)->dead) {
        close((*it)->up.from);
        close((*it)->up.to);
        it = connections.erase(it);
      } else {
        ++it;
      }
    }

    // Sleep until input, a signal, or the next chunk that falls due.
    std::vector<pollfd> fds{{signal_fd, POLLIN, 0}, {listener, POLLIN, 0}};
    Clock::time_point wake = now + std::chrono::seconds(1);
    for (auto& c : connections) {
      for (Pipe* p : {&c->up, &c->down}) {
        short events = p->eof ? 0 : POLLIN;
        if (!p->queue.empty()) {
          const Clock::time_point due = std::max(p->queue.front().due, blocked_until(now));
          if (due <= now && !held) events |= POLLOUT;  // the socket was full
          if (due > now) wake = std::min(wake, due);
        }
        // Only sockets with something to wait for: a hung-up one reports POLLHUP at once, which
        // would spin this loop while a hold keeps its bytes.
        if (events & POLLIN) fds.push_back({p->from, POLLIN, 0});
        if (events & POLLOUT) fds.push_back({p->to, POLLOUT, 0});
      }
    }
    const long timeout =
        std::max<long>(1, std::chrono::duration_cast<milliseconds>(wake - now).count());
    if (poll(fds.data(), fds.size(), static_cast<int>(timeout)) < 0 && errno != EINTR) Die("poll");

    signalfd_siginfo info{};
    while (read(signal_fd, &info, sizeof(info)) == sizeof(info)) {
      if (info.ssi_signo == SIGUSR1) held = true;
      if (info.ssi_signo == SIGUSR2) held = false;
      if (info.ssi_signo == SIGTERM || info.ssi_signo == SIGINT) return 0;
    }
    if (fds[1].revents & POLLIN) {
      for (;;) {
        const int client = accept4(listener, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (client < 0) break;
        const int server = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (connect(server, reinterpret_cast<sockaddr*>(&target), sizeof(target)) != 0) {
          close(client);  // the target is down: the client sees its connection closed
          close(server);
          continue;
        }
        NonBlocking(server);
        setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        auto c = std::make_unique<Connection>();
        c->up.from = client;
        c->up.to = server;
        c->down.from = server;
        c->down.to = client;
        connections.push_back(std::move(c));
      }
    }
    // Read what arrived; it is due `delay_ms` from now.
    const Clock::time_point arrived = Clock::now();
    for (auto& c : connections) {
      for (Pipe* p : {&c->up, &c->down}) {
        if (p->eof) continue;
        char buffer[65536];
        const ssize_t n = recv(p->from, buffer, sizeof(buffer), 0);
        if (n > 0) {
          p->queue.push_back({arrived + milliseconds(delay_ms), std::string(buffer, n)});
        } else if (n == 0) {
          p->eof = true;
        } else if (errno != EAGAIN && errno != EWOULDBLOCK) {
          c->dead = true;
        }
      }
    }
  }
}

#include "common/store/store_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"

namespace mxrun {
namespace {

using Clock = std::chrono::steady_clock;

// Descriptors the agent keeps for itself when the open-file limit sizes max_clients: its
// workers' pipes and channels, its logs, gRPC's.
constexpr std::size_t kReservedFds = 256;

// epoll tags: connections by their id (from 1, far below these), listeners, the stop.
constexpr std::uint64_t kListenerTag = std::uint64_t{1} << 62;
constexpr std::uint64_t kWakeTag = ~std::uint64_t{0};

std::size_t ClientsTheFdLimitAllows() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return 65536;
  return limit.rlim_cur > kReservedFds * 2 ? limit.rlim_cur - kReservedFds : limit.rlim_cur / 2;
}

}  // namespace

struct StoreServer::Impl {
  struct Connection {
    int fd = -1;
    std::string peer;
    std::string input;
    std::size_t needed = 1;  // decode again once input holds this much
    std::string output;
    std::size_t output_sent = 0;
    bool writable_watched = false;
    bool reading = true;
    bool validated = false;
    Clock::time_point connected;
  };

  Options options;
  std::vector<int> listen_fds;
  int wake_fd = -1;  // eventfd: the destructor's stop
  int epoll_fd = -1;
  std::thread thread;

  mutable std::mutex mutex;  // guards state and refused for Counts() from other threads
  StoreState state;
  std::uint64_t refused = 0;

  std::map<StoreClientId, Connection> connections;  // by id, which grows: oldest first
  StoreClientId next_id = 1;
  std::size_t unvalidated = 0;  // connections still to send VALIDATE
  // Their ids in connect order (so by deadline), validated or closed ones dropped lazily from the
  // front: the next deadline and the expired ones without a walk over every connection, which at
  // 16,384 connecting ranks cost the server a sixth of its CPU time.
  std::deque<StoreClientId> unvalidated_order;
  std::vector<StoreOutput> outputs;
  // Clients read from again once their replies drained: their buffered requests are processed
  // by the loop, not from inside another client's send.
  std::vector<StoreClientId> resumed;

  explicit Impl(Options given) : options(std::move(given)), state(options.state) {}

  ~Impl() {
    for (auto& [id, connection] : connections) close(connection.fd);
    for (int fd : listen_fds) close(fd);
    if (wake_fd >= 0) close(wake_fd);
    if (epoll_fd >= 0) close(epoll_fd);
  }

  void Log(const std::string& line) {
    if (options.log) {
      options.log(line);
    } else {
      std::fprintf(stderr, "%s\n", line.c_str());
    }
  }

  // Listens on every address `host` names ("localhost": 127.0.0.1 and ::1, where there is one),
  // on one port for all of them: a client tries the addresses its resolver gives in turn, and
  // each must reach this store, never another process's.
  absl::Status Bind(int* port, std::string* address) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const int rc = getaddrinfo(options.host.c_str(), "0", &hints, &found);
    if (rc != 0 || found == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("the workers' store: cannot listen on '",
                                                     options.host, "': ", gai_strerror(rc)));
    }
    std::vector<sockaddr_storage> addresses;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      sockaddr_storage one{};
      std::memcpy(&one, a->ai_addr, a->ai_addrlen);
      const bool seen = std::any_of(addresses.begin(), addresses.end(), [&](const auto& other) {
        return std::memcmp(&other, &one, sizeof one) == 0;
      });
      if (!seen) addresses.push_back(one);
    }
    freeaddrinfo(found);
    std::string last_error = "no address";
    // With port 0, a port the kernel gives on the first address may be taken on another: try again.
    for (int attempt = 0; attempt < (options.port == 0 ? 16 : 1); ++attempt) {
      std::vector<int> fds;
      int chosen = options.port;
      bool failed = false;
      for (sockaddr_storage& each : addresses) {
        const int fd = socket(each.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        const int on = 1;
        if (fd >= 0) {
          setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
          // Replies go at once. Linux gives an accepted socket its listener's TCP_NODELAY, which
          // spares a call per connection (16,384 at a large job's start).
          setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
          if (each.ss_family == AF_INET6) setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on);
          SetPort(each, chosen);
        }
        // The backlog as deep as the kernel allows (net.core.somaxconn): every rank connects at
        // once.
        if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&each), SockLen(each)) != 0 ||
            listen(fd, 65535) != 0) {
          const int error = errno;
          if (fd >= 0) close(fd);
          // An address this machine does not have (::1 with IPv6 off) is no one else's either.
          if (error == EADDRNOTAVAIL || error == EAFNOSUPPORT) continue;
          last_error = std::strerror(error);
          failed = true;
          break;
        }
        fds.push_back(fd);
        if (chosen == 0) {
          sockaddr_storage bound{};
          socklen_t length = sizeof bound;
          getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
          chosen = GetPort(bound);
        }
      }
      if (!failed && !fds.empty()) {
        listen_fds = std::move(fds);
        *port = chosen;
        *address = absl::StrCat(Numeric(addresses.front()), ":", chosen);
        return absl::OkStatus();
      }
      for (int fd : fds) close(fd);
    }
    return absl::UnavailableError(absl::StrCat("the workers' store: cannot listen on ",
                                               options.host, ":", options.port, ": ", last_error));
  }

  static socklen_t SockLen(const sockaddr_storage& a) {
    return a.ss_family == AF_INET6 ? sizeof(sockaddr_in6) : sizeof(sockaddr_in);
  }
  static void SetPort(sockaddr_storage& a, int port) {
    if (a.ss_family == AF_INET6) {
      reinterpret_cast<sockaddr_in6*>(&a)->sin6_port = htons(static_cast<uint16_t>(port));
    } else {
      reinterpret_cast<sockaddr_in*>(&a)->sin_port = htons(static_cast<uint16_t>(port));
    }
  }
  static int GetPort(const sockaddr_storage& a) {
    return a.ss_family == AF_INET6 ? ntohs(reinterpret_cast<const sockaddr_in6*>(&a)->sin6_port)
                                   : ntohs(reinterpret_cast<const sockaddr_in*>(&a)->sin_port);
  }
  // The address without its port ("[::1]" for IPv6).
  static std::string Numeric(const sockaddr_storage& a) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(&a)->sin6_addr, text, sizeof text);
      return absl::StrCat("[", text, "]");
    }
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&a)->sin_addr, text, sizeof text);
    return text;
  }

  void Serve() {
    std::vector<epoll_event> events(256);
    bool stopping = false;
    while (!stopping) {
      const int ready =
          epoll_wait(epoll_fd, events.data(), static_cast<int>(events.size()), WaitMilliseconds());
      if (ready < 0 && errno != EINTR) {
        Log(absl::StrCat("mxrun: the workers' store: epoll_wait: ", std::strerror(errno)));
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      for (int i = 0; i < ready; ++i) {
        const std::uint64_t tag = events[i].data.u64;
        if (tag == kWakeTag) {
          stopping = true;
        } else if (tag >= kListenerTag) {
          AcceptAll(listen_fds[tag - kListenerTag]);
        } else {
          auto found = connections.find(tag);
          if (found == connections.end()) continue;
          if (events[i].events & EPOLLOUT) Flush(tag, found->second);
          if (!connections.contains(tag)) continue;
          if (events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
            if (found->second.reading) {
              Read(tag, found->second);
            } else if (events[i].events & (EPOLLHUP | EPOLLERR)) {
              Close(tag);  // gone while paused: epoll would report it again and again
            }
          }
        }
      }
      while (!resumed.empty()) {
        const std::vector<StoreClientId> ids = std::move(resumed);
        resumed.clear();
        for (StoreClientId id : ids) {
          if (auto found = connections.find(id); found != connections.end()) {
            Process(id, found->second);
          }
        }
      }
      if (unvalidated > 0) CloseUnvalidated(Clock::now());
    }
  }

  // The longest-connected connection still to validate, or none.
  Connection* OldestUnvalidated() {
    while (!unvalidated_order.empty()) {
      auto found = connections.find(unvalidated_order.front());
      if (found != connections.end() && !found->second.validated) return &found->second;
      unvalidated_order.pop_front();
    }
    return nullptr;
  }

  int WaitMilliseconds() {
    if (unvalidated == 0) {
      // Every id left in the queue is validated or gone: dropped here, or a job whose clients
      // all validate at once would keep one per connection it ever had.
      unvalidated_order.clear();
      return -1;
    }
    // Wake for the first connection still to validate.
    const Connection* oldest = OldestUnvalidated();
    if (oldest == nullptr) return -1;
    const auto left = oldest->connected + options.validate_timeout - Clock::now();
    return static_cast<int>(
        std::max<long long>(0, std::chrono::ceil<std::chrono::milliseconds>(left).count()));
  }

  void CloseUnvalidated(Clock::time_point now) {
    while (const Connection* oldest = OldestUnvalidated()) {
      if (now - oldest->connected < options.validate_timeout) return;
      const StoreClientId id = unvalidated_order.front();
      unvalidated_order.pop_front();
      Refuse(id, absl::StrCat("sent no VALIDATE within ", options.validate_timeout.count(),
                              " ms of connecting"));
    }
  }

  void AcceptAll(int listen_fd) {
    for (;;) {
      sockaddr_storage peer{};
      socklen_t length = sizeof peer;
      const int fd = accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &length,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EINTR || errno == ECONNABORTED) continue;
        if (errno == EMFILE || errno == ENFILE) {
          Log("mxrun: the workers' store: out of file descriptors; a connection waits");
        }
        return;  // EAGAIN: all taken
      }
      if (connections.size() >= options.max_clients && !MakeRoom()) {
        ++refused;
        Log(absl::StrCat("mxrun: the workers' store: refused a connection: ", options.max_clients,
                         " clients are connected (the most it takes)"));
        close(fd);
        continue;
      }
      const StoreClientId id = next_id++;
      Connection connection;
      connection.fd = fd;
      connection.peer = PeerName(peer);
      connection.connected = Clock::now();
      epoll_event event{};
      event.events = EPOLLIN;
      event.data.u64 = id;
      if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, fd, &event) != 0) {
        close(fd);
        continue;
      }
      connections.emplace(id, std::move(connection));
      ++unvalidated;
      unvalidated_order.push_back(id);
      state.Connect(id);
    }
  }

  // At the cap: drops the longest-connected client that has not validated.
  bool MakeRoom() {
    if (OldestUnvalidated() == nullptr) return false;
    const StoreClientId id = unvalidated_order.front();
    unvalidated_order.pop_front();
    Refuse(id, absl::StrCat("dropped, not validated, to make room: ", options.max_clients,
                            " clients are connected (the most it takes)"));
    return true;
  }

  static std::string PeerName(const sockaddr_storage& peer) {
    char text[INET6_ADDRSTRLEN] = {};
    if (peer.ss_family == AF_INET6) {
      const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&peer);
      inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
      return absl::StrCat("[", text, "]:", ntohs(v6->sin6_port));
    }
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(&peer);
    inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
    return absl::StrCat(text, ":", ntohs(v4->sin_port));
  }

  void Read(StoreClientId id, Connection& connection) {
    if (!connection.reading) return;
    char chunk[64 * 1024];
    std::size_t taken = 0;
    while (taken < kReadBurst) {
      const ssize_t n = read(connection.fd, chunk, sizeof chunk);
      if (n > 0) {
        connection.input.append(chunk, static_cast<std::size_t>(n));
        taken += static_cast<std::size_t>(n);
        // A short read emptied the socket: epoll (level-triggered) reports it again when more
        // comes, so no second read to hear EAGAIN (a third of the server's reads at 16,384 ranks).
        if (static_cast<std::size_t>(n) < sizeof chunk) break;
        continue;
      }
      if (n < 0 && (errno == EINTR)) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      // The client went (0) or the connection failed: what it sent before counts (a rank that
      // sets its key and exits).
      Process(id, connection);
      Close(id);
      return;
    }
    Process(id, connection);
  }

  // Decodes and applies the whole requests received, then sends what they produced.
  void Process(StoreClientId id, Connection& connection) {
    std::size_t at = 0;
    while (connection.input.size() - at >= connection.needed) {
      if (connection.output.size() - connection.output_sent > options.max_output_bytes) {
        // It does not read its replies: leave the rest unread until it does.
        PauseReading(id, connection);
        break;
      }
      const StoreDecoded decoded =
          DecodeStoreRequest(std::string_view(connection.input).substr(at), options.wire);
      if (decoded.kind == StoreDecoded::Kind::kRefused) {
        Refuse(id, decoded.error);
        return;
      }
      if (decoded.kind == StoreDecoded::Kind::kNeedMore) {
        if (decoded.needed > options.max_request_bytes) {
          Refuse(id, absl::StrCat("a request of at least ", decoded.needed, " bytes (at most ",
                                  options.max_request_bytes, ")"));
          return;
        }
        connection.needed = decoded.needed;
        break;
      }
      at += decoded.consumed;
      connection.needed = 1;
      outputs.clear();
      const absl::Status applied = state.Apply(id, decoded.request, outputs);
      if (!applied.ok()) {
        Refuse(id, std::string(applied.message()));
        return;
      }
      if (!connection.validated) {
        connection.validated = true;
        --unvalidated;
      }
      for (StoreOutput& output : outputs) Send(output);
      if (!connections.contains(id)) return;  // its own reply failed to go
    }
    connection.input.erase(0, at);
  }

  void Send(StoreOutput& output) {
    auto found = connections.find(output.client);
    if (found == connections.end()) return;
    Connection& connection = found->second;
    if (connection.output_sent == connection.output.size()) {
      connection.output.clear();
      connection.output_sent = 0;
    }
    connection.output += output.bytes;
    Flush(output.client, connection);
  }

  void Flush(StoreClientId id, Connection& connection) {
    while (connection.output_sent < connection.output.size()) {
      const ssize_t n = send(connection.fd, connection.output.data() + connection.output_sent,
                             connection.output.size() - connection.output_sent, MSG_NOSIGNAL);
      if (n > 0) {
        connection.output_sent += static_cast<std::size_t>(n);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
      Close(id);
      return;
    }
    const bool pending = connection.output_sent < connection.output.size();
    if (!pending) {
      connection.output.clear();
      connection.output_sent = 0;
    }
    if (pending != connection.writable_watched || (!pending && !connection.reading)) {
      connection.writable_watched = pending;
      if (!pending && !connection.reading) {
        connection.reading = true;
        resumed.push_back(id);  // what it sent while paused
      }
      Rewatch(id, connection);
    }
  }

  void PauseReading(StoreClientId id, Connection& connection) {
    connection.reading = false;
    Rewatch(id, connection);
  }

  void Rewatch(StoreClientId id, Connection& connection) {
    epoll_event event{};
    event.events = (connection.reading ? std::uint32_t{EPOLLIN} : 0u) |
                   (connection.writable_watched ? std::uint32_t{EPOLLOUT} : 0u);
    event.data.u64 = id;
    epoll_ctl(epoll_fd, EPOLL_CTL_MOD, connection.fd, &event);
  }

  void Refuse(StoreClientId id, const std::string& why) {
    auto found = connections.find(id);
    if (found == connections.end()) return;
    ++refused;
    Log(absl::StrCat("mxrun: the workers' store: closed the connection from ", found->second.peer,
                     ": ", why));
    Close(id);
  }

  void Close(StoreClientId id) {
    auto found = connections.find(id);
    if (found == connections.end()) return;
    if (!found->second.validated) --unvalidated;
    epoll_ctl(epoll_fd, EPOLL_CTL_DEL, found->second.fd, nullptr);
    close(found->second.fd);
    connections.erase(found);
    state.Disconnect(id);
  }
};

absl::StatusOr<std::unique_ptr<StoreServer>> StoreServer::Start(Options options) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("the workers' store: port ", options.port,
                                                   " is not valid; accepted: 0 to 65535"));
  }
  if (options.max_clients == 0) options.max_clients = ClientsTheFdLimitAllows();
  auto impl = std::make_unique<Impl>(std::move(options));
  int port = 0;
  std::string address;
  if (absl::Status bound = impl->Bind(&port, &address); !bound.ok()) return bound;
  impl->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  impl->epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (impl->wake_fd < 0 || impl->epoll_fd < 0) {
    return absl::InternalError(
        absl::StrCat("the workers' store: eventfd/epoll: ", std::strerror(errno)));
  }
  epoll_event event{};
  event.events = EPOLLIN;
  for (std::size_t i = 0; i < impl->listen_fds.size(); ++i) {
    event.data.u64 = kListenerTag + i;
    epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->listen_fds[i], &event);
  }
  event.data.u64 = kWakeTag;
  epoll_ctl(impl->epoll_fd, EPOLL_CTL_ADD, impl->wake_fd, &event);
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Serve(); });
  std::unique_ptr<StoreServer> server(new StoreServer(std::move(impl)));
  server->port_ = port;
  server->address_ = address;
  return server;
}

StoreServer::StoreServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

StoreServer::~StoreServer() {
  const std::uint64_t one = 1;
  if (write(impl_->wake_fd, &one, sizeof one) < 0) {
    // An eventfd write fails only when its counter would overflow: it is set already.
  }
  if (impl_->thread.joinable()) impl_->thread.join();
}

StoreCounts StoreServer::Counts() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->state.Counts();
}

std::uint64_t StoreServer::refused_clients() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->refused;
}

}  // namespace mxrun

#include "common/http/http_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <exception>
#include <list>
#include <mutex>
#include <system_error>
#include <thread>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace mxrun {
namespace {

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Status";
  }
}

bool IsToken(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("!#$%&'*+-.^_`|~").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

int MillisLeft(HttpClock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - HttpClock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

}  // namespace

bool WaitForFd(int fd, short events, HttpClock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int left = MillisLeft(deadline);
    if (left == 0) return false;
    const int rc = poll(&p, 1, left);
    if (rc > 0) return true;
    if (rc == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::variant<HttpRequest, HttpParseError> ParseHttpRequestHead(std::string_view whole) {
  const absl::string_view head(whole.data(), whole.size());
  std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
  if (lines.empty() || lines[0].empty()) return HttpParseError{400, "empty request"};
  std::vector<absl::string_view> parts = absl::StrSplit(lines[0], ' ');
  if (parts.size() != 3) {
    return HttpParseError{400, "the request line is not 'METHOD TARGET HTTP/1.1'"};
  }
  HttpRequest request;
  request.method = std::string(parts[0]);
  if (parts[2] != "HTTP/1.1" && parts[2] != "HTTP/1.0") {
    return HttpParseError{505, absl::StrCat("only HTTP/1.0 and HTTP/1.1 are served, not '",
                                            parts[2].substr(0, 40), "'")};
  }
  if (request.method != "GET" && request.method != "HEAD") {
    return HttpParseError{405, "only GET and HEAD are served"};
  }
  absl::string_view target = parts[1];
  if (target.empty() || target[0] != '/') {
    return HttpParseError{400, "the request target must be a path starting with '/'"};
  }
  if (const size_t q = target.find('?'); q != absl::string_view::npos) {
    request.query = std::string(target.substr(q + 1));
    target = target.substr(0, q);
  }
  request.path = std::string(target);
  for (size_t i = 1; i < lines.size(); ++i) {
    if (lines[i].empty()) continue;  // the blank line that ends the head
    const size_t colon = lines[i].find(':');
    if (colon == absl::string_view::npos || !IsToken(std::string_view(lines[i].data(), colon))) {
      return HttpParseError{400, "a header line is not 'Name: value'"};
    }
    request.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  return request;
}

std::string FormatHttpResponse(const HttpResponse& response, bool head_only) {
  std::string out = absl::StrCat("HTTP/1.1 ", response.status, " ", Reason(response.status),
                                 "\r\nContent-Type: ", response.content_type,
                                 "\r\nContent-Length: ", response.body.size(),
                                 "\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n");
  if (!head_only) out += response.body;
  return out;
}

struct HttpServer::Impl {
  Options options;
  Handler handler;
  int listen_fd = -1;
  int stop_pipe[2] = {-1, -1};
  std::string bound_host;
  std::thread thread;

  // The connections being served, each on a thread of its own: a client that sends nothing, or a
  // byte a second, holds its own thread until its deadline and never the others'. At
  // kMaxConnections a new one drops the open one that has been silent the longest.
  struct Connection {
    int fd;
    HttpClock::time_point last_activity;
    bool dropped = false;
  };
  std::mutex mu;
  std::condition_variable all_closed;
  std::list<Connection> open;  // guarded by mu
  size_t live = 0;             // of them, not dropped (guarded by mu)
  std::mutex handler_mu;       // the handler sees one request at a time, as before

  ~Impl() {
    if (thread.joinable()) {
      const char byte = 0;
      (void)!write(stop_pipe[1], &byte, 1);
      thread.join();
    }
    {
      // Wakes every connection's thread (its read or write fails at once) and waits for them.
      std::unique_lock lock(mu);
      for (Connection& c : open) shutdown(c.fd, SHUT_RDWR);
      all_closed.wait(lock, [this] { return open.empty(); });
    }
    for (int fd : {listen_fd, stop_pipe[0], stop_pipe[1]}) {
      if (fd >= 0) close(fd);
    }
  }

  void Serve() {
    for (;;) {
      pollfd fds[2] = {{listen_fd, POLLIN, 0}, {stop_pipe[0], POLLIN, 0}};
      if (poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[1].revents != 0) return;
      const int fd = accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) continue;  // the client went away, or out of descriptors for a moment
      std::list<Connection>::iterator connection;
      {
        std::lock_guard lock(mu);
        if (live >= kMaxConnections) DropIdlest();
        connection = open.insert(open.end(), Connection{fd, HttpClock::now()});
        ++live;
      }
      try {
        std::thread([this, connection] { ServeConnection(connection); }).detach();
      } catch (const std::system_error&) {  // no thread to be had: this client waits no longer
        Forget(connection);
      }
    }
  }

  // Called with mu held: the connection silent the longest is shut down; its thread ends it.
  void DropIdlest() {
    auto idlest = open.end();
    for (auto it = open.begin(); it != open.end(); ++it) {
      if (!it->dropped && (idlest == open.end() || it->last_activity < idlest->last_activity)) {
        idlest = it;
      }
    }
    if (idlest == open.end()) return;
    idlest->dropped = true;
    --live;
    shutdown(idlest->fd, SHUT_RDWR);
  }

  void ServeConnection(std::list<Connection>::iterator connection) {
    HandleConnection(connection->fd, [this, connection] {
      std::lock_guard lock(mu);
      connection->last_activity = HttpClock::now();
    });
    Forget(connection);
  }

  void Forget(std::list<Connection>::iterator connection) {
    std::lock_guard lock(mu);
    close(connection->fd);
    if (!connection->dropped) --live;
    open.erase(connection);
    if (open.empty()) all_closed.notify_all();
  }

  // Connection I/O, plain or through TLS, each call bounded by the connection's deadline.
  struct Stream {
    int fd;
    std::unique_ptr<TlsConnection> tls;
    HttpClock::time_point deadline;
    std::function<void()> on_bytes;  // each read that brought bytes: the client is alive

    long Read(char* buffer, size_t size) {
      const long n = ReadSome(buffer, size);
      if (n > 0 && on_bytes) on_bytes();
      return n;
    }
    long ReadSome(char* buffer, size_t size) {
      if (tls) return tls->Read(buffer, size, deadline);
      for (;;) {
        const ssize_t n = read(fd, buffer, size);
        if (n >= 0) return n;
        if (errno == EINTR) continue;
        if (errno != EAGAIN || !WaitForFd(fd, POLLIN, deadline)) return -1;
      }
    }
    bool Write(std::string_view data) {
      if (tls) return tls->Write(data, deadline);
      while (!data.empty()) {
        const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
        if (n > 0) {
          data.remove_prefix(static_cast<size_t>(n));
        } else if (n < 0 && errno == EINTR) {
          continue;
        } else if (n < 0 && errno == EAGAIN) {
          if (!WaitForFd(fd, POLLOUT, deadline)) return false;
        } else {
          return false;
        }
      }
      return true;
    }
  };

  void HandleConnection(int fd, std::function<void()> on_bytes) {
    Stream stream{fd, nullptr, HttpClock::now() + kConnectionTimeout, std::move(on_bytes)};
    if (options.tls) {
      stream.tls = options.tls->Accept(fd, stream.deadline);
      if (!stream.tls) return;  // no certificate, a wrong one, or plain HTTP: nothing to say
    }
    std::string head;
    char buffer[4096];
    bool complete = false;
    while (!complete && head.size() <= kMaxRequestHead) {
      const long n = stream.Read(buffer, sizeof buffer);
      if (n <= 0) break;
      head.append(buffer, static_cast<size_t>(n));
      complete = head.find("\r\n\r\n") != std::string::npos;
    }
    if (complete || head.size() > kMaxRequestHead) {
      HttpResponse response;
      bool head_only = false;
      if (!complete) {
        response = {431, "text/plain; charset=utf-8",
                    absl::StrCat("the request head exceeds ", kMaxRequestHead, " bytes\n")};
      } else {
        auto parsed = ParseHttpRequestHead(head.substr(0, head.find("\r\n\r\n") + 2));
        if (auto* error = std::get_if<HttpParseError>(&parsed)) {
          response = {error->status, "text/plain; charset=utf-8", error->message + "\n"};
        } else {
          const HttpRequest& request = std::get<HttpRequest>(parsed);
          head_only = request.method == "HEAD";
          try {
            std::lock_guard lock(handler_mu);
            response = handler(request);
          } catch (const std::exception& e) {
            response = {500, "text/plain; charset=utf-8", absl::StrCat(e.what(), "\n")};
          }
        }
      }
      stream.Write(FormatHttpResponse(response, head_only));
    }
  }

  absl::Status Bind(int* port) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    const std::string host = options.bind_all ? "::" : options.host;
    const std::string service = std::to_string(options.port);
    int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found);
    if (rc != 0 && options.bind_all) {  // no IPv6 here: every IPv4 interface
      rc = getaddrinfo("0.0.0.0", service.c_str(), &hints, &found);
    }
    if (rc != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(options.who, ": cannot resolve '", host, "': ", gai_strerror(rc)));
    }
    std::string last_error = "no address";
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
      if (fd < 0) continue;
      const int on = 1, off = 0;
      setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
      if (a->ai_family == AF_INET6 && options.bind_all) {
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 too
      }
      if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, SOMAXCONN) == 0) {
        sockaddr_storage bound{};
        socklen_t length = sizeof bound;
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length);
        char text[INET6_ADDRSTRLEN] = {};
        if (bound.ss_family == AF_INET6) {
          const auto* v6 = reinterpret_cast<const sockaddr_in6*>(&bound);
          inet_ntop(AF_INET6, &v6->sin6_addr, text, sizeof text);
          *port = ntohs(v6->sin6_port);
          bound_host = absl::StrCat("[", text, "]");
        } else {
          const auto* v4 = reinterpret_cast<const sockaddr_in*>(&bound);
          inet_ntop(AF_INET, &v4->sin_addr, text, sizeof text);
          *port = ntohs(v4->sin_port);
          bound_host = text;
        }
        listen_fd = fd;
        freeaddrinfo(found);
        return absl::OkStatus();
      }
      last_error = std::strerror(errno);
      close(fd);
    }
    freeaddrinfo(found);
    return absl::UnavailableError(absl::StrCat(options.who, ": cannot listen on ", host, ":",
                                               options.port, ": ", last_error));
  }
};

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpServer::~HttpServer() = default;

bool HttpServer::tls() const { return impl_->options.tls != nullptr; }

std::string HttpServer::url() const {
  return absl::StrCat(tls() ? "https://" : "http://", impl_->bound_host, ":", port_);
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const Options& options,
                                                              Handler handler) {
  if (options.port < 0 || options.port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat(options.who, ": port ", options.port, " is not valid; accepted: 0 to 65535"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = options;
  impl->handler = std::move(handler);
  int port = 0;
  if (absl::Status bound = impl->Bind(&port); !bound.ok()) return bound;
  if (pipe2(impl->stop_pipe, O_CLOEXEC) != 0) {
    return absl::InternalError(absl::StrCat(options.who, ": pipe: ", std::strerror(errno)));
  }
  Impl* raw = impl.get();
  impl->thread = std::thread([raw] { raw->Serve(); });
  std::unique_ptr<HttpServer> server(new HttpServer(std::move(impl)));
  server->port_ = port;
  return server;
}

}  // namespace mxrun

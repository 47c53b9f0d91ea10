#pragma once
// A small HTTP/1.1 server for what a Prometheus server and a browser fetch from mxrun: the metrics
// page and the master's status page. GET and HEAD only, one response per connection
// ("Connection: close"), bounded requests. One thread accepts; each connection is served on a
// thread of its own under a deadline (kConnectionTimeout from its accept), so that clients that
// send nothing, or a byte a second, never delay a scrape; at most kMaxConnections are open, a new
// one dropping the one silent the longest. The handler sees one request at a time. Not a general
// web server: nothing here serves files or takes input beyond the path and headers.
//
// Optionally TLS, through a TlsAcceptor (common/http/tls/http_tls.h: OpenSSL with the job's
// certificates, clients must present a certificate the job's CA signed). This file links no TLS
// library, so the lean `mxrun` binary serves plain metrics without loading OpenSSL.

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>

#include "absl/status/statusor.h"

namespace mxrun {

using HttpClock = std::chrono::steady_clock;

// Waits until `fd` is ready for `events` (POLLIN, POLLOUT) or the deadline passes.
bool WaitForFd(int fd, short events, HttpClock::time_point deadline);

// One connection after its TLS handshake.
class TlsConnection {
 public:
  virtual ~TlsConnection() = default;
  // Bytes read (> 0), 0 at the end of the stream, -1 on an error or at the deadline.
  virtual long Read(char* buffer, size_t size, HttpClock::time_point deadline) = 0;
  virtual bool Write(std::string_view data, HttpClock::time_point deadline) = 0;
};
// Makes the TLS end of an accepted connection (a non-blocking socket); nullptr when the
// handshake fails (no certificate, a wrong one, plain HTTP) or the deadline passes.
class TlsAcceptor {
 public:
  virtual ~TlsAcceptor() = default;
  virtual std::unique_ptr<TlsConnection> Accept(int fd, HttpClock::time_point deadline) = 0;
};

struct HttpRequest {
  std::string method;                          // GET or HEAD
  std::string path;                            // without the query
  std::string query;                           // after '?', undecoded
  std::map<std::string, std::string> headers;  // names lower-case
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

// Parses a request head (up to and including the blank line). Errors say what was wrong; the
// server answers them with 400, 405 or 505.
struct HttpParseError {
  int status = 400;
  std::string message;
};
std::variant<HttpRequest, HttpParseError> ParseHttpRequestHead(std::string_view head);
// The whole response as sent: status line, Content-Type, Content-Length, Connection: close.
// HEAD gets the headers only.
std::string FormatHttpResponse(const HttpResponse& response, bool head_only);

class HttpServer {
 public:
  using Handler = std::function<HttpResponse(const HttpRequest&)>;

  static constexpr size_t kMaxRequestHead = 16 * 1024;
  static constexpr std::chrono::milliseconds kConnectionTimeout{2000};
  // Open connections at most: each holds a thread and at most kMaxRequestHead + 4 KiB of
  // buffers (mxrun-master holding 128 idle ones: 1.9 MiB more resident, stacks included).
  static constexpr size_t kMaxConnections = 128;

  struct Options {
    std::string host = "127.0.0.1";  // address to listen on; "0.0.0.0"/"::" with bind_all
    bool bind_all = false;
    int port = 0;                      // 0: the kernel picks one (port() says which)
    std::shared_ptr<TlsAcceptor> tls;  // HTTPS through it; null: plain HTTP
    std::string who = "metrics";       // names the server in errors
  };

  // Binds and starts serving; an error says what could not be bound or loaded.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const Options& options, Handler handler);
  ~HttpServer();  // stops the thread; a request in progress is finished first
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const { return port_; }
  bool tls() const;
  // "http://HOST:PORT" or "https://...", HOST as bound (bracketed for IPv6).
  std::string url() const;

 private:
  struct Impl;
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
  int port_ = 0;
};

}  // namespace mxrun

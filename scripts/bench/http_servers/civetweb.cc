// One of three minimal servers of the same page, for scripts/bench/http_slow_clients.py (issue 39):
// civetweb (Debian 12's libcivetweb-dev 1.15), its defaults. Argument: the port. Prints "port N".
#include <signal.h>

#include <cstdio>
#include <string>

#include <civetweb.h>

namespace {
std::string body(20 * 1024, 'm');

int Metrics(mg_connection* connection, void*) {
  mg_printf(connection,
            "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\n"
            "Content-Length: %zu\r\nConnection: close\r\n\r\n",
            body.size());
  mg_write(connection, body.data(), body.size());
  return 200;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::string ports = std::string("127.0.0.1:") + argv[1];
  const char* options[] = {"listening_ports", ports.c_str(), nullptr};
  mg_init_library(0);
  mg_context* context = mg_start(nullptr, nullptr, options);
  if (context == nullptr) return 1;
  mg_set_request_handler(context, "/metrics", Metrics, nullptr);
  std::printf("port %s\n", argv[1]);
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
  mg_stop(context);
  return 0;
}

// One of three minimal servers of the same page, for scripts/bench/http_slow_clients.py (issue 39):
// mxrun's own common/http/http_server. Prints "port N", serves /metrics until SIGTERM.
#include <signal.h>

#include <cstdio>
#include <string>

#include "common/http/http_server.h"

int main() {
  const std::string body(20 * 1024, 'm');  // about a master's page
  auto server = mxrun::HttpServer::Start({}, [&body](const mxrun::HttpRequest&) {
    return mxrun::HttpResponse{200, "text/plain; version=0.0.4", body};
  });
  if (!server.ok()) return 1;
  std::printf("port %d\n", (*server)->port());
  std::fflush(stdout);
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigprocmask(SIG_BLOCK, &set, nullptr);
  int sig = 0;
  sigwait(&set, &sig);
  return 0;
}

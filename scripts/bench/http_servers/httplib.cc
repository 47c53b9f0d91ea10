// One of three minimal servers of the same page, for scripts/bench/http_slow_clients.py (issue 39):
// cpp-httplib (Debian 12's libcpp-httplib-dev 0.11), its defaults. Prints "port N".
#include <cstdio>
#include <string>

#include <httplib.h>

int main() {
  const std::string body(20 * 1024, 'm');
  httplib::Server server;
  server.Get("/metrics", [&body](const httplib::Request&, httplib::Response& response) {
    response.set_content(body, "text/plain; version=0.0.4");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::printf("port %d\n", port);
  std::fflush(stdout);
  server.listen_after_bind();
  return 0;
}

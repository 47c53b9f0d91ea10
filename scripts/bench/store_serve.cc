// mxrun's workers' store alone (common/store/store_server.h), for scripts/bench/store_scale.py to
// load beside PyTorch's own TCPStore server: listens on 127.0.0.1 (a port from the kernel), prints
// "port N", serves until stdin closes.

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/store/store_server.h"

int main() {
  rlimit limit{};
  getrlimit(RLIMIT_NOFILE, &limit);
  limit.rlim_cur = limit.rlim_max;  // as many connections as the hard limit allows
  setrlimit(RLIMIT_NOFILE, &limit);
  auto server = mxrun::StoreServer::Start({});
  if (!server.ok()) {
    std::fprintf(stderr, "store_serve: %s\n", std::string(server.status().message()).c_str());
    return 1;
  }
  std::printf("port %d\n", (*server)->port());
  std::fflush(stdout);
  char byte;
  while (read(0, &byte, 1) > 0) {
  }
  return 0;
}

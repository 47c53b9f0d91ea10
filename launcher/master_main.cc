// mxrun-master: the rendezvous master on its own, for a head node (a systemd service) that outlives
// any training node. Prints "mxrun-master listening on HOST:PORT" once it serves.
//
//   mxrun-master [--host=ADDR] [--port=29400] [--bind_all] [--token_file=PATH] [--state_dir=DIR]
// The token is read from --token_file, else from MXRUN_RDZV_TOKEN. SIGTERM or SIGINT stop it.

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "CLI/CLI.hpp"
#include "common/env_contract.h"
#include "common/service_notify.h"
#include "launcher/token.h"
#include "rendezvous/master_server.h"
#include "rendezvous/net.h"

extern char** environ;

int main(int argc, char** argv) {
  CLI::App app{"mxrun-master: the mxrun rendezvous master (many runs, keyed by run id)",
               "mxrun-master"};
  std::string host = "127.0.0.1";
  int port = mxrun::kDefaultRendezvousPort;
  bool bind_all = false;
  std::string token_file;
  std::string state_dir;
  app.add_option("--host", host, "address to listen on (default 127.0.0.1)");
  app.add_option("--port", port,
                 "port (0: any free port; default " + std::to_string(port) + ")")
      ->check(CLI::Range(0, 65535));
  app.add_flag("--bind_all,--bind-all", bind_all, "listen on every interface");
  app.add_option("--token_file,--token-file", token_file,
                 "file holding the shared token every agent must present");
  app.add_option("--state_dir,--state-dir", state_dir,
                 "keep the running jobs' rendezvous state here, so that after a crash and restart "
                 "the agents reconnect and running workers carry on");
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "mxrun-master: error: %s\n", e.what());
    return 2;
  }

  mxrun::MasterServerOptions options;
  options.host = host;
  options.port = port;
  options.bind_all = bind_all;
  options.state_dir = state_dir;
  const mxrun::EnvMap env = mxrun::EnvFromStrings(environ);
  absl::StatusOr<std::string> token = mxrun::ReadRendezvousToken(token_file, env);
  if (!token.ok()) {
    std::fprintf(stderr, "mxrun-master: error: --token_file=%s: %s\n", token_file.c_str(),
                 std::string(token.status().message()).c_str());
    return 2;
  }
  options.token = std::move(*token);

  // Block the stop signals before gRPC starts its threads; wait for them here.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigprocmask(SIG_BLOCK, &stop, nullptr);
  absl::StatusOr<std::unique_ptr<mxrun::MasterServer>> server = mxrun::MasterServer::Start(options);
  if (!server.ok()) {
    std::fprintf(stderr, "mxrun-master: error: %s\n", std::string(server.status().message()).c_str());
    return 3;
  }
  std::printf("mxrun-master listening on %s%s\n", (*server)->address().c_str(),
              options.token.empty() ? "" : " (token required)");
  std::fflush(stdout);
  // As a systemd Type=notify service: ready once it serves.
  mxrun::ServiceNotifier notifier = mxrun::ServiceNotifier::FromEnv(env, static_cast<long>(getpid()));
  notifier.Ready("listening on " + (*server)->address());
  int signo = 0;
  sigwait(&stop, &signo);
  notifier.Stopping("stopping on signal " + std::to_string(signo));
  std::fprintf(stderr, "mxrun-master: stopping on signal %d\n", signo);
  (*server)->Shutdown(std::chrono::seconds(2));
  return 0;
}

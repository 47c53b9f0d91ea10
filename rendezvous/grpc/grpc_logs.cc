#include "rendezvous/grpc/grpc_logs.h"

#include <grpc/support/log.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>

#include "absl/strings/match.h"

namespace mxrun {
namespace {

std::mutex g_mutex;
std::function<void(const std::string&)> g_warn;
std::function<void(const std::string&)> g_debug;
std::chrono::steady_clock::time_point g_last_warning{};

void OnGrpcLog(gpr_log_func_args* args) {
  const std::string message = args->message == nullptr ? "" : args->message;
  std::optional<std::string> tls = DescribeTlsFailure(message);
  std::lock_guard<std::mutex> lock(g_mutex);
  const auto now = std::chrono::steady_clock::now();
  if (tls && g_warn) {
    if (now - g_last_warning >= std::chrono::seconds(10)) {  // the repeats of a retrying peer: once
      g_last_warning = now;
      g_warn(*tls);
    }
    return;
  }
  if (g_debug) {
    g_debug(std::string(args->severity == GPR_LOG_SEVERITY_ERROR ? "error: " : "") + args->file +
            ":" + std::to_string(args->line) + ": " + message);
  }
}

}  // namespace

std::optional<std::string> DescribeTlsFailure(const std::string& message) {
  if (!absl::StrContains(message, "Handshake failed")) return std::nullopt;
  std::string what;
  if (absl::StrContains(message, "wrong version number") ||
      absl::StrContains(message, "http request") || absl::StrContains(message, "packet length")) {
    what =
        "the other side does not speak TLS: one of the master and this peer has mutual TLS "
        "(--rdzv_conf cert,key,cacert; mxrun-master --cert --key --cacert) and the other not";
  } else if (absl::StrContains(message, "peer did not return a certificate") ||
             absl::StrContains(message, "certificate required")) {
    what = "the client presented no certificate: give it --rdzv_conf cert=,key=,cacert=";
  } else if (absl::StrContains(message, "certificate verify failed") ||
             absl::StrContains(message, "unknown ca") ||
             absl::StrContains(message, "bad certificate")) {
    what = "a certificate is not from the CA the other side trusts (cacert), or has expired";
  } else {
    what = "see GRPC_VERBOSITY=debug for gRPC's details";
  }
  return "TLS handshake failed: " + what;
}

void RouteGrpcLogs(std::function<void(const std::string&)> warn,
                   std::function<void(const std::string&)> debug) {
  if (std::getenv("GRPC_VERBOSITY") != nullptr) return;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_warn = std::move(warn);
    g_debug = std::move(debug);
  }
  gpr_set_log_function(OnGrpcLog);
}

}  // namespace mxrun

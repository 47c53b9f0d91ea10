#pragma once
// systemd's service notification protocol (sd_notify(3)), without libsystemd: datagrams of
// "KEY=VALUE" lines sent to the socket named by NOTIFY_SOCKET (a path, or '@' for an abstract
// name). mxrun running as a Type=notify unit says READY=1 once registered with the rendezvous,
// STATUS= on round changes and restarts, STOPPING=1 when it stops, and WATCHDOG=1 every half
// WatchdogSec. Outside systemd (no NOTIFY_SOCKET) every call does nothing.

#include <chrono>
#include <optional>
#include <string>

#include "common/env_contract.h"

namespace mxrun {

class ServiceNotifier {
 public:
  using Clock = std::chrono::steady_clock;

  ServiceNotifier() = default;  // disabled
  // From NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID (the watchdog is ours only when
  // WATCHDOG_PID is unset or equals `own_pid`).
  static ServiceNotifier FromEnv(const EnvMap& env, long own_pid);

  bool enabled() const { return !socket_path_.empty(); }
  // READY=1 the first time (with the status); later calls only update the status.
  void Ready(const std::string& status);
  void Status(const std::string& status);
  void Stopping(const std::string& status);

  // When the next WATCHDOG=1 is due (nullopt: no watchdog). Tick sends it if due.
  std::optional<Clock::time_point> NextWatchdog() const;
  void Tick(Clock::time_point now);

  // Sends one datagram; false when it could not be delivered (the error is not fatal: a service
  // manager that went away must not stop training).
  bool Send(const std::string& message) const;

 private:
  std::string socket_path_;
  std::chrono::microseconds watchdog_interval_{0};  // half of WATCHDOG_USEC
  Clock::time_point next_watchdog_{};
  bool ready_sent_ = false;
};

}  // namespace mxrun

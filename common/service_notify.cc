#include "common/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>

namespace mxrun {

ServiceNotifier ServiceNotifier::FromEnv(const EnvMap& env, long own_pid) {
  ServiceNotifier n;
  auto socket = env.find("NOTIFY_SOCKET");
  if (socket == env.end() || socket->second.empty()) return n;
  if (socket->second[0] != '/' && socket->second[0] != '@') return n;  // not a unix socket name
  if (socket->second.size() >= sizeof(sockaddr_un{}.sun_path)) return n;
  n.socket_path_ = socket->second;
  auto usec = env.find("WATCHDOG_USEC");
  auto pid = env.find("WATCHDOG_PID");
  const bool for_us = pid == env.end() || pid->second == std::to_string(own_pid);
  if (usec != env.end() && for_us) {
    char* end = nullptr;
    const long long value = std::strtoll(usec->second.c_str(), &end, 10);
    if (end != usec->second.c_str() && *end == '\0' && value > 0) {
      n.watchdog_interval_ = std::chrono::microseconds(value / 2);
      n.next_watchdog_ = Clock::now() + n.watchdog_interval_;
    }
  }
  return n;
}

bool ServiceNotifier::Send(const std::string& message) const {
  if (!enabled()) return false;
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, socket_path_.data(), socket_path_.size());
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  const socklen_t len =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + socket_path_.size());
  const ssize_t sent = ::sendto(fd, message.data(), message.size(), MSG_NOSIGNAL,
                                reinterpret_cast<const sockaddr*>(&addr), len);
  ::close(fd);
  return sent == static_cast<ssize_t>(message.size());
}

void ServiceNotifier::Ready(const std::string& status) {
  if (!ready_sent_) {
    ready_sent_ = Send("READY=1\nSTATUS=" + status);
    if (ready_sent_) return;
  }
  Status(status);
}

void ServiceNotifier::Status(const std::string& status) { Send("STATUS=" + status); }

void ServiceNotifier::Stopping(const std::string& status) { Send("STOPPING=1\nSTATUS=" + status); }

std::optional<ServiceNotifier::Clock::time_point> ServiceNotifier::NextWatchdog() const {
  if (!enabled() || watchdog_interval_.count() == 0) return std::nullopt;
  return next_watchdog_;
}

void ServiceNotifier::Tick(Clock::time_point now) {
  if (!NextWatchdog() || now < next_watchdog_) return;
  Send("WATCHDOG=1");
  next_watchdog_ = now + watchdog_interval_;
}

}  // namespace mxrun

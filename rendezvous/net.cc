#include "rendezvous/net.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/strings.h"

namespace mxrun {
namespace {

int PortOf(const sockaddr_storage& address) {
  return address.ss_family == AF_INET6
             ? ntohs(reinterpret_cast<const sockaddr_in6*>(&address)->sin6_port)
             : ntohs(reinterpret_cast<const sockaddr_in*>(&address)->sin_port);
}

std::string TextOf(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {};
  if (address->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr, text,
              sizeof text);
  } else {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof text);
  }
  return text;
}

struct AddrInfoDeleter {
  void operator()(addrinfo* info) const { freeaddrinfo(info); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

absl::StatusOr<AddrInfoPtr> Resolve(const std::string& host, int port, int socktype) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = socktype;
  addrinfo* found = nullptr;
  const std::string service = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), service.c_str(), &hints, &found); rc != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve '", host, "': ", gai_strerror(rc)));
  }
  return AddrInfoPtr(found);
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(const std::string& text, int default_port) {
  HostPort result;
  std::string port_text;
  auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat(
        "endpoint '", text, "' is not valid; accepted: host, host:port or [ipv6]:port"));
  };
  if (text.empty()) return bad();
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string::npos) return bad();
    result.host = text.substr(1, close - 1);
    if (close + 1 < text.size()) {
      if (text[close + 1] != ':') return bad();
      port_text = text.substr(close + 2);
    }
  } else if (std::count(text.begin(), text.end(), ':') == 1) {
    size_t colon = text.find(':');
    result.host = text.substr(0, colon);
    port_text = text.substr(colon + 1);
  } else {
    result.host = text;  // a name, an IPv4 address or a bare IPv6 address
  }
  if (result.host.empty()) return bad();
  result.port = default_port;
  if (!port_text.empty() &&
      (!absl::SimpleAtoi(port_text, &result.port) || result.port < 0 || result.port > 65535)) {
    return bad();
  }
  return result;
}

std::string JoinHostPort(const std::string& host, int port) {
  if (host.find(':') != std::string::npos && host.front() != '[') {
    return absl::StrCat("[", host, "]:", port);
  }
  return absl::StrCat(host, ":", port);
}

absl::StatusOr<int> PickFreePort(const std::string& address) {
  absl::StatusOr<AddrInfoPtr> found = Resolve(address, 0, SOCK_STREAM);
  if (!found.ok()) return found.status();
  std::string last_error = "no address";
  for (addrinfo* ai = found->get(); ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &length) == 0) {
      close(fd);
      return PortOf(bound);
    }
    last_error = ErrnoText(errno);
    close(fd);
  }
  return absl::UnavailableError(
      absl::StrCat("cannot bind a free port on '", address, "': ", last_error));
}

absl::StatusOr<std::string> LocalAddressToward(const std::string& host, int port) {
  absl::StatusOr<AddrInfoPtr> found = Resolve(host, port == 0 ? 9 : port, SOCK_DGRAM);
  if (!found.ok()) return found.status();
  for (addrinfo* ai = found->get(); ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof local;
    const bool ok = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
                    getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0;
    close(fd);
    if (ok) return TextOf(reinterpret_cast<sockaddr*>(&local));
  }
  return absl::UnavailableError(absl::StrCat("no route from this machine to '", host, "'"));
}

bool PortListening(const std::string& host, int port) {
  absl::StatusOr<AddrInfoPtr> found = Resolve(host, port, SOCK_STREAM);
  if (!found.ok()) return false;
  for (addrinfo* ai = found->get(); ai != nullptr; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const bool listening = connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    close(fd);
    if (listening) return true;
  }
  return false;
}

bool IsLocalHost(const std::string& host) {
  absl::StatusOr<AddrInfoPtr> found = Resolve(host, 0, SOCK_STREAM);
  if (!found.ok()) return false;
  ifaddrs* interfaces = nullptr;
  if (getifaddrs(&interfaces) != 0) return false;
  bool local = false;
  for (addrinfo* ai = found->get(); ai != nullptr && !local; ai = ai->ai_next) {
    const std::string wanted = TextOf(ai->ai_addr);
    for (ifaddrs* i = interfaces; i != nullptr && !local; i = i->ifa_next) {
      if (i->ifa_addr == nullptr ||
          (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6)) {
        continue;
      }
      local = TextOf(i->ifa_addr) == wanted;
    }
  }
  freeifaddrs(interfaces);
  return local;
}

}  // namespace mxrun

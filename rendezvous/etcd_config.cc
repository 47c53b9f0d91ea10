#include "rendezvous/etcd_config.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "rendezvous/net.h"
#include "rendezvous/wire/validation.h"

namespace mxrun {
absl::StatusOr<EtcdConfig> ParseEtcdConfig(const std::string& endpoints,
                                           const std::string& protocol, const std::string& cacert,
                                           const std::string& cert, const std::string& key) {
  EtcdConfig config;
  for (absl::string_view part : absl::StrSplit(endpoints, ',', absl::SkipWhitespace())) {
    const std::string endpoint(absl::StripAsciiWhitespace(part));
    absl::StatusOr<HostPort> hp = ParseHostPort(endpoint, kDefaultEtcdPort);
    if (!hp.ok()) return hp.status();
    config.endpoints.push_back(JoinHostPort(hp->host, hp->port));
  }
  if (config.endpoints.empty()) {
    return absl::InvalidArgumentError(
        "--rdzv_endpoint names no etcd member; accepted: HOST:PORT[,HOST:PORT...] (port 2379 when "
        "omitted)");
  }
  if (protocol != "" && protocol != "http" && protocol != "https") {
    return absl::InvalidArgumentError(absl::StrCat("--rdzv_conf protocol='", protocol,
                                                   "' is not valid; accepted: http or https"));
  }
  config.tls = protocol == "https";
  if (!config.tls && (!cacert.empty() || !cert.empty() || !key.empty())) {
    return absl::InvalidArgumentError("--rdzv_conf cacert, cert and key need protocol=https");
  }
  if (cert.empty() != key.empty()) {
    return absl::InvalidArgumentError("--rdzv_conf cert and key go together (client certificate)");
  }
  config.cacert = cacert;
  config.cert = cert;
  config.key = key;
  return config;
}

EtcdMasterKeys EtcdKeysForRun(const std::string& etcd_prefix, const std::string& run_id) {
  return EtcdMasterKeys{absl::StrCat(etcd_prefix, "/run/", run_id)};
}

EtcdMasterKeys EtcdKeysForService(const std::string& etcd_prefix, const std::string& service) {
  return EtcdMasterKeys{absl::StrCat(etcd_prefix, "/service/", service)};
}

absl::Status ValidateEtcdPrefix(const std::string& prefix) {
  const bool printable = std::all_of(prefix.begin(), prefix.end(), [](char c) {
    return absl::ascii_isgraph(static_cast<unsigned char>(c));
  });
  if (prefix.size() < 2 || prefix.size() > 256 || prefix[0] != '/' || prefix.back() == '/' ||
      !printable) {
    return absl::InvalidArgumentError(absl::StrCat(
        "etcd_prefix='", prefix,
        "' is not valid; accepted: a key path of 2 to 256 printable characters starting with / "
        "and not ending with one (default ",
        kDefaultEtcdPrefix, ")"));
  }
  return absl::OkStatus();
}

absl::Status ValidateServiceName(const std::string& name) {
  if (absl::Status valid = ValidateRunId(name); !valid.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("master_service='", name, "' is not valid: ", valid.message()));
  }
  return absl::OkStatus();
}

std::string EncodeLeaderValue(const std::string& identity, const std::string& address) {
  return absl::StrCat(identity, " ", address);
}

LeaderValue DecodeLeaderValue(const std::string& value) {
  std::pair<std::string, std::string> parts = absl::StrSplit(value, absl::MaxSplits(' ', 1));
  return LeaderValue{parts.first, parts.second};
}

}  // namespace mxrun

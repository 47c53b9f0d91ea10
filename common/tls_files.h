#pragma once
// Mutual TLS for mxrun's own gRPC (agent <-> master, mxrun status, the store service): the three
// PEM files every party has, named as torchrun's etcd backend names them (--rdzv_conf
// cert=,key=,cacert=; mxrun-master --cert --key --cacert). A node certificate serves both ways:
// the agent that hosts the master presents it as a server, every agent as a client, so node
// certificates carry both extended key usages and the node's address (IP or DNS name) as a subject
// alternative name. No gRPC here: the `mxrun` binary checks the files itself.

#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace mxrun {

struct TlsFiles {
  std::string cert;    // this party's certificate chain
  std::string key;     // its private key
  std::string cacert;  // the CA every peer's certificate must come from
  bool enabled() const { return !cert.empty() || !key.empty() || !cacert.empty(); }
};

// All three or none; each a readable PEM file of the right kind. `where` names the flags in the
// message ("--rdzv_conf", "mxrun-master"). Errors: InvalidArgument.
absl::Status CheckTlsFiles(const TlsFiles& files, absl::string_view where);

}  // namespace mxrun

#include "rendezvous/etcd/etcd_client.h"

#include <netdb.h>
#include <sys/socket.h>

#include <grpcpp/grpcpp.h>

#include <mutex>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/files.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "rendezvous/grpc/grpc_status.h"
#include "rendezvous/net.h"

namespace mxrun {
namespace {

namespace pb = etcdserverpb;

// The key range of every key starting with `prefix`, as etcd's clients compute it.
std::string PrefixEnd(std::string prefix) {
  while (!prefix.empty()) {
    unsigned char last = static_cast<unsigned char>(prefix.back());
    if (last < 0xff) {
      prefix.back() = static_cast<char>(last + 1);
      return prefix;
    }
    prefix.pop_back();
  }
  return std::string(1, '\0');  // every key
}

EtcdKeyValue FromProto(const mvccpb::KeyValue& kv) {
  return EtcdKeyValue{kv.key(), kv.value(), kv.create_revision(), kv.mod_revision()};
}

absl::Status Failed(const char* what, const grpc::Status& status) {
  absl::Status s = FromGrpcStatus(status);
  return absl::Status(s.code(), absl::StrCat("etcd ", what, ": ", s.message()));
}

// "ipv4:1.2.3.4:2379,5.6.7.8:2379": every member's addresses, resolved now, for one channel.
absl::StatusOr<std::string> ChannelTarget(const std::vector<std::string>& endpoints) {
  std::vector<std::string> v4, v6;
  for (const std::string& endpoint : endpoints) {
    absl::StatusOr<HostPort> hp = ParseHostPort(endpoint, kDefaultEtcdPort);
    if (!hp.ok()) return hp.status();
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (int err = getaddrinfo(hp->host.c_str(), nullptr, &hints, &found); err != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd member '", endpoint, "' does not resolve: ", gai_strerror(err)));
    }
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
      char host[NI_MAXHOST];
      if (getnameinfo(a->ai_addr, a->ai_addrlen, host, sizeof host, nullptr, 0, NI_NUMERICHOST) !=
          0) {
        continue;
      }
      (a->ai_family == AF_INET6 ? v6 : v4).push_back(JoinHostPort(host, hp->port));
      break;  // one address per member
    }
    freeaddrinfo(found);
  }
  if (!v4.empty() && v6.empty()) return absl::StrCat("ipv4:", absl::StrJoin(v4, ","));
  if (v4.empty() && !v6.empty()) return absl::StrCat("ipv6:", absl::StrJoin(v6, ","));
  return absl::InvalidArgumentError(
      "etcd members must be all IPv4 or all IPv6 (mixed address families in --rdzv_endpoint)");
}

}  // namespace

struct EtcdClient::Stubs {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<pb::KV::Stub> kv;
  std::unique_ptr<pb::Lease::Stub> lease;
  std::unique_ptr<pb::Watch::Stub> watch;
  // The calls in flight, so that Cancel() can end them.
  std::mutex mutex;
  std::set<grpc::ClientContext*> in_flight;
  bool cancelled = false;
};

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const EtcdConfig& config) {
  absl::StatusOr<std::string> target = ChannelTarget(config.endpoints);
  if (!target.ok()) return target.status();
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (config.tls) {
    grpc::SslCredentialsOptions ssl;
    for (const auto& [path, field] : {std::pair{config.cacert, &ssl.pem_root_certs},
                                      std::pair{config.cert, &ssl.pem_cert_chain},
                                      std::pair{config.key, &ssl.pem_private_key}}) {
      if (path.empty()) continue;
      std::optional<std::string> pem = ReadWholeFile(path);
      if (!pem) return absl::InvalidArgumentError(absl::StrCat("cannot read ", path));
      *field = *pem;
    }
    credentials = grpc::SslCredentials(ssl);
  }
  grpc::ChannelArguments args;
  args.SetLoadBalancingPolicyName("round_robin");  // a call goes on to the members still up
  // A whole state read (GetPrefix) of a 16,384-node job is several MiB: above gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(256 << 20);
  // A member that comes back (or starts late) is found within a second, not after gRPC's default
  // 20 s minimum reconnect time.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 1000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto stubs = std::make_unique<Stubs>();
  stubs->channel = grpc::CreateCustomChannel(*target, credentials, args);
  stubs->kv = pb::KV::NewStub(stubs->channel);
  stubs->lease = pb::Lease::NewStub(stubs->channel);
  stubs->watch = pb::Watch::NewStub(stubs->channel);
  return std::unique_ptr<EtcdClient>(new EtcdClient(config, std::move(stubs)));
}

EtcdClient::EtcdClient(const EtcdConfig& config, std::unique_ptr<Stubs> stubs)
    : config_(config), stubs_(std::move(stubs)) {}

EtcdClient::~EtcdClient() = default;

void EtcdClient::Cancel() {
  std::lock_guard<std::mutex> lock(stubs_->mutex);
  stubs_->cancelled = true;
  for (grpc::ClientContext* context : stubs_->in_flight) context->TryCancel();
}

bool EtcdClient::cancelled_by_owner() const {
  std::lock_guard<std::mutex> lock(stubs_->mutex);
  return stubs_->cancelled;
}

using EtcdClientStubs = EtcdClient::Stubs;

namespace {

// A call's context, registered for Cancel() while the call runs. Every call waits, up to its
// deadline, for a member to be reachable rather than failing at once while the channel reconnects.
// (That also makes the waiting call drive the connection attempts: without a call polling, gRPC
// notices a finished connect only by its 5 s backup poller.)
class Call {
 public:
  Call(EtcdClientStubs& stubs, std::chrono::milliseconds timeout) : stubs_(stubs) {
    context_.set_deadline(std::chrono::system_clock::now() + timeout);
    context_.set_wait_for_ready(true);
    std::lock_guard<std::mutex> lock(stubs_.mutex);
    if (stubs_.cancelled) context_.TryCancel();
    stubs_.in_flight.insert(&context_);
  }
  ~Call() {
    std::lock_guard<std::mutex> lock(stubs_.mutex);
    stubs_.in_flight.erase(&context_);
  }
  grpc::ClientContext* context() { return &context_; }

 private:
  EtcdClientStubs& stubs_;
  grpc::ClientContext context_;
};

// One unary call with a deadline: `method` is a stub's method, such as &KV::Stub::Put.
template <typename Stub, typename Request, typename Response>
absl::StatusOr<Response> Unary(EtcdClientStubs& stubs, Stub& stub,
                               grpc::Status (Stub::*method)(grpc::ClientContext*, const Request&,
                                                            Response*),
                               const Request& request, std::chrono::milliseconds timeout,
                               const char* what) {
  Call call(stubs, timeout);
  Response response;
  grpc::Status status = (stub.*method)(call.context(), request, &response);
  if (!status.ok()) return Failed(what, status);
  return response;
}

}  // namespace

absl::StatusOr<int64_t> EtcdClient::Put(const std::string& key, const std::string& value,
                                        int64_t lease) {
  pb::PutRequest request;
  request.set_key(key);
  request.set_value(value);
  request.set_lease(lease);
  absl::StatusOr<pb::PutResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Put, request, config_.rpc_timeout, "put");
  if (!response.ok()) return response.status();
  return response->header().revision();
}

absl::StatusOr<std::optional<EtcdKeyValue>> EtcdClient::Get(const std::string& key) {
  pb::RangeRequest request;
  request.set_key(key);
  absl::StatusOr<pb::RangeResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Range, request, config_.rpc_timeout, "get");
  if (!response.ok()) return response.status();
  if (response->kvs_size() == 0) return std::optional<EtcdKeyValue>();
  return std::optional<EtcdKeyValue>(FromProto(response->kvs(0)));
}

absl::StatusOr<EtcdRead> EtcdClient::Read(const std::string& key) {
  pb::RangeRequest request;
  request.set_key(key);
  absl::StatusOr<pb::RangeResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Range, request, config_.rpc_timeout, "get");
  if (!response.ok()) return response.status();
  EtcdRead read;
  read.revision = response->header().revision();
  if (response->kvs_size() > 0) read.kv = FromProto(response->kvs(0));
  return read;
}

absl::StatusOr<std::vector<EtcdKeyValue>> EtcdClient::GetPrefix(const std::string& prefix) {
  pb::RangeRequest request;
  request.set_key(prefix);
  request.set_range_end(PrefixEnd(prefix));
  absl::StatusOr<pb::RangeResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Range, request, config_.rpc_timeout, "get prefix");
  if (!response.ok()) return response.status();
  std::vector<EtcdKeyValue> out;
  for (const mvccpb::KeyValue& kv : response->kvs()) out.push_back(FromProto(kv));
  return out;
}

absl::StatusOr<bool> EtcdClient::TxnIfCreated(const std::string& guard_key, int64_t guard_rev,
                                              const std::vector<EtcdOp>& ops) {
  pb::TxnRequest request;
  pb::Compare* compare = request.add_compare();
  compare->set_key(guard_key);
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_create_revision(guard_rev);
  for (const EtcdOp& op : ops) {
    pb::RequestOp* r = request.add_success();
    switch (op.kind) {
      case EtcdOp::Kind::kPut: {
        pb::PutRequest* put = r->mutable_request_put();
        put->set_key(op.key);
        put->set_value(op.value);
        put->set_lease(op.lease);
        break;
      }
      case EtcdOp::Kind::kDelete:
        r->mutable_request_delete_range()->set_key(op.key);
        break;
      case EtcdOp::Kind::kDeletePrefix:
        r->mutable_request_delete_range()->set_key(op.key);
        r->mutable_request_delete_range()->set_range_end(PrefixEnd(op.key));
        break;
    }
  }
  absl::StatusOr<pb::TxnResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Txn, request, config_.rpc_timeout, "transaction");
  if (!response.ok()) return response.status();
  return response->succeeded();
}

absl::StatusOr<std::optional<int64_t>> EtcdClient::CreateIfAbsent(const std::string& key,
                                                                  const std::string& value,
                                                                  int64_t lease) {
  pb::TxnRequest request;
  pb::Compare* compare = request.add_compare();
  compare->set_key(key);
  compare->set_target(pb::Compare::CREATE);
  compare->set_result(pb::Compare::EQUAL);
  compare->set_create_revision(0);  // the key does not exist
  pb::PutRequest* put = request.add_success()->mutable_request_put();
  put->set_key(key);
  put->set_value(value);
  put->set_lease(lease);
  absl::StatusOr<pb::TxnResponse> response =
      Unary(*stubs_, *stubs_->kv, &pb::KV::Stub::Txn, request, config_.rpc_timeout, "create");
  if (!response.ok()) return response.status();
  if (!response->succeeded()) return std::optional<int64_t>();
  return std::optional<int64_t>(response->header().revision());  // the put's: its creation
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(std::chrono::seconds ttl) {
  pb::LeaseGrantRequest request;
  request.set_ttl(ttl.count());
  absl::StatusOr<pb::LeaseGrantResponse> response =
      Unary(*stubs_, *stubs_->lease, &pb::Lease::Stub::LeaseGrant, request, config_.rpc_timeout,
            "lease grant");
  if (!response.ok()) return response.status();
  if (!response->error().empty()) {
    return absl::FailedPreconditionError(absl::StrCat("etcd lease grant: ", response->error()));
  }
  return response->id();
}

absl::StatusOr<int64_t> EtcdClient::KeepAlive(int64_t lease) {
  Call call(*stubs_, config_.rpc_timeout);
  std::unique_ptr<grpc::ClientReaderWriter<pb::LeaseKeepAliveRequest, pb::LeaseKeepAliveResponse>>
      stream = stubs_->lease->LeaseKeepAlive(call.context());
  pb::LeaseKeepAliveRequest request;
  request.set_id(lease);
  pb::LeaseKeepAliveResponse response;
  const bool exchanged = stream->Write(request) && stream->Read(&response);
  stream->WritesDone();
  grpc::Status status = stream->Finish();
  if (!exchanged) {
    return Failed("lease keep-alive", status.ok() ? grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                                                 "stream closed without an answer")
                                                  : status);
  }
  return response.ttl();
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  pb::LeaseRevokeRequest request;
  request.set_id(lease);
  return Unary(*stubs_, *stubs_->lease, &pb::Lease::Stub::LeaseRevoke, request, config_.rpc_timeout,
               "lease revoke")
      .status();
}

absl::StatusOr<std::optional<int64_t>> EtcdClient::WaitForChange(const std::string& key,
                                                                 int64_t after_rev,
                                                                 std::chrono::milliseconds wait) {
  Call call(*stubs_, wait);
  std::unique_ptr<grpc::ClientReaderWriter<pb::WatchRequest, pb::WatchResponse>> stream =
      stubs_->watch->Watch(call.context());
  pb::WatchRequest request;
  pb::WatchCreateRequest* create = request.mutable_create_request();
  create->set_key(key);
  create->set_start_revision(after_rev + 1);
  std::optional<int64_t> changed;
  std::string cancelled;  // why etcd ended the watch (compacted past after_rev, or refused)
  if (stream->Write(request)) {
    pb::WatchResponse response;
    while (!changed && cancelled.empty() && stream->Read(&response)) {
      if (response.canceled()) {
        cancelled = response.cancel_reason().empty() ? "cancelled" : response.cancel_reason();
      } else if (response.events_size() > 0) {
        changed = response.events(0).kv().mod_revision();
      }
    }
  }
  call.context()->TryCancel();  // ends the stream whether or not the server is done
  grpc::Status status = stream->Finish();
  if (changed) return changed;
  if (!cancelled.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("etcd watch of ", key, " cancelled: ", cancelled));
  }
  if (cancelled_by_owner()) return absl::CancelledError("etcd watch: the client was cancelled");
  if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      status.error_code() == grpc::StatusCode::CANCELLED || status.ok()) {
    return std::optional<int64_t>();
  }
  return Failed("watch", status);
}

}  // namespace mxrun

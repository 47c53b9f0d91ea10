// StoreService over real gRPC on 127.0.0.1 (port chosen by the kernel). Every call carries a
// client deadline, so a broken server fails a test instead of hanging it.

#include <catch2/catch.hpp>

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "mxrun.grpc.pb.h"
#include "rendezvous/master_server/memory_store.h"
#include "rendezvous/master_server/store_service.h"
#include "rendezvous/wire/validation.h"

namespace {

using namespace std::chrono_literals;
namespace v1 = mxrun::v1;

constexpr auto kCallDeadline = 10s;

class StoreServer {
 public:
  explicit StoreServer(std::string token = "", mxrun::MemoryStoreOptions options = {})
      : store_(options), service_(store_, std::move(token)) {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port_);
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    REQUIRE(server_ != nullptr);
    REQUIRE(port_ > 0);
  }
  ~StoreServer() { Shutdown(); }

  // Pending calls are cancelled at once.
  void Shutdown() {
    if (server_ != nullptr) server_->Shutdown(std::chrono::system_clock::now());
  }

  std::unique_ptr<v1::Store::Stub> NewStub() const {
    return v1::Store::NewStub(
        grpc::CreateChannel(absl::StrCat("127.0.0.1:", port_), grpc::InsecureChannelCredentials()));
  }

  mxrun::MemoryStore& store() { return store_; }

 private:
  mxrun::MemoryStore store_;
  mxrun::StoreService service_;
  int port_ = 0;
  std::unique_ptr<grpc::Server> server_;
};

void Prepare(grpc::ClientContext& context, const std::string& token = "") {
  context.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  if (!token.empty()) context.AddMetadata(mxrun::kTokenMetadataKey, token);
}

// Polls `condition` (a cheap in-process read) until it holds or `limit` passes.
bool Eventually(const std::function<bool()>& condition, std::chrono::milliseconds limit = 5000ms) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(1ms);
  }
  return true;
}

grpc::Status Set(v1::Store::Stub& stub, const std::string& run_id, const std::string& key,
                 const std::string& value, const std::string& token = "") {
  grpc::ClientContext context;
  Prepare(context, token);
  v1::SetRequest request;
  request.set_run_id(run_id);
  request.set_key(key);
  request.set_value(value);
  v1::SetReply reply;
  return stub.Set(&context, request, &reply);
}

grpc::Status Wait(v1::Store::Stub& stub, const std::string& run_id,
                  const std::vector<std::string>& keys, double timeout_s,
                  const std::string& token = "") {
  grpc::ClientContext context;
  Prepare(context, token);
  v1::WaitRequest request;
  request.set_run_id(run_id);
  for (const std::string& key : keys) request.add_keys(key);
  request.set_timeout_s(timeout_s);
  v1::WaitReply reply;
  return stub.Wait(&context, request, &reply);
}

}  // namespace

TEST_CASE("Store service round trip: set, get, add, compare-set, multiget, delete",
          "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();

  REQUIRE(Set(*stub, "run", "k", "v").ok());
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::GetRequest request;
    request.set_run_id("run");
    request.set_key("k");
    v1::GetReply reply;
    REQUIRE(stub->Get(&context, request, &reply).ok());
    CHECK(reply.found());
    CHECK(reply.value() == "v");
  }
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::GetRequest request;
    request.set_run_id("run");
    request.set_key("absent");
    v1::GetReply reply;
    REQUIRE(stub->Get(&context, request, &reply).ok());
    CHECK_FALSE(reply.found());
  }
  for (int64_t expected : {3, 10}) {
    grpc::ClientContext context;
    Prepare(context);
    v1::AddRequest request;
    request.set_run_id("run");
    request.set_key("counter");
    request.set_delta(expected == 3 ? 3 : 7);
    v1::AddReply reply;
    REQUIRE(stub->Add(&context, request, &reply).ok());
    CHECK(reply.value() == expected);
  }
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::AddRequest request;
    request.set_run_id("run");
    request.set_key("k");  // holds "v"
    request.set_delta(1);
    v1::AddReply reply;
    grpc::Status status = stub->Add(&context, request, &reply);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("not a decimal"));
  }
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::CompareSetRequest request;
    request.set_run_id("run");
    request.set_key("leader");
    request.set_expect_absent(true);
    request.set_desired("node-a");
    v1::CompareSetReply reply;
    REQUIRE(stub->CompareSet(&context, request, &reply).ok());
    CHECK(reply.swapped());
    CHECK(reply.value() == "node-a");
  }
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::CompareSetRequest request;
    request.set_run_id("run");
    request.set_key("leader");
    request.set_expected("node-x");
    request.set_desired("node-b");
    v1::CompareSetReply reply;
    REQUIRE(stub->CompareSet(&context, request, &reply).ok());
    CHECK_FALSE(reply.swapped());
    CHECK(reply.value() == "node-a");
  }
  {
    grpc::ClientContext context;
    Prepare(context);
    v1::MultiGetRequest request;
    request.set_run_id("run");
    for (const char* key : {"k", "missing", "counter"}) request.add_keys(key);
    v1::MultiGetReply reply;
    REQUIRE(stub->MultiGet(&context, request, &reply).ok());
    REQUIRE(reply.found_size() == 3);
    REQUIRE(reply.values_size() == 3);
    CHECK(reply.found(0));
    CHECK(reply.values(0) == "v");
    CHECK_FALSE(reply.found(1));
    CHECK(reply.found(2));
    CHECK(reply.values(2) == "10");
  }
  for (bool expected : {true, false}) {
    grpc::ClientContext context;
    Prepare(context);
    v1::DeleteRequest request;
    request.set_run_id("run");
    request.set_key("k");
    v1::DeleteReply reply;
    REQUIRE(stub->Delete(&context, request, &reply).ok());
    CHECK(reply.deleted() == expected);
  }
  CHECK_FALSE(server.store().Get("run", "k").has_value());
}

TEST_CASE("Store service wait completes when another client sets the key", "[store_service]") {
  StoreServer server;
  auto waiter_stub = server.NewStub();
  auto setter_stub = server.NewStub();

  grpc::Status wait_status(grpc::StatusCode::UNKNOWN, "not finished");
  std::thread waiter([&] { wait_status = Wait(*waiter_stub, "run", {"a", "b"}, 30); });
  REQUIRE(Set(*setter_stub, "run", "a", "1").ok());
  // Set the last key only once the server holds the waiter, so the "later" path is the one tested.
  REQUIRE(Eventually([&] { return server.store().WaiterCount() == 1; }));
  REQUIRE(Set(*setter_stub, "run", "b", "2").ok());
  waiter.join();
  CHECK(wait_status.ok());
  CHECK(server.store().WaiterCount() == 0);
}

TEST_CASE("Store service wait on existing keys returns at once", "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();
  REQUIRE(Set(*stub, "run", "a", "1").ok());
  CHECK(Wait(*stub, "run", {"a"}, 30).ok());
  CHECK(Wait(*stub, "run", {}, 30).ok());
  CHECK(server.store().WaiterCount() == 0);
}

TEST_CASE("Store service wait times out naming the missing keys", "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();
  REQUIRE(Set(*stub, "run", "present", "1").ok());
  const auto start = std::chrono::steady_clock::now();
  grpc::Status status = Wait(*stub, "run", {"present", "absent"}, 0.2);
  const auto elapsed = std::chrono::steady_clock::now() - start;
  CHECK(status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED);
  CHECK_THAT(status.error_message(), Catch::Contains("'absent'"));
  CHECK_THAT(status.error_message(), !Catch::Contains("'present'"));
  CHECK(elapsed >= 150ms);
  CHECK(elapsed < 5s);
  CHECK(server.store().WaiterCount() == 0);
  // The run still works, and the key's later arrival touches no finished call.
  CHECK(Set(*stub, "run", "absent", "1").ok());
}

TEST_CASE("Store service wait cancelled by the client withdraws its waiter", "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();
  grpc::ClientContext context;
  Prepare(context);
  v1::WaitRequest request;
  request.set_run_id("run");
  request.add_keys("never");
  request.set_timeout_s(600);
  v1::WaitReply reply;
  grpc::Status status;
  std::thread waiter([&] { status = stub->Wait(&context, request, &reply); });
  REQUIRE(Eventually([&] { return server.store().WaiterCount() == 1; }));
  context.TryCancel();
  waiter.join();
  CHECK(status.error_code() == grpc::StatusCode::CANCELLED);
  CHECK(Eventually([&] { return server.store().WaiterCount() == 0; }));
}

TEST_CASE("Store service shutdown ends pending waits", "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();
  grpc::Status status;
  std::thread waiter([&] { status = Wait(*stub, "run", {"never"}, 600); });
  REQUIRE(Eventually([&] { return server.store().WaiterCount() == 1; }));
  server.Shutdown();  // returns once every call is done
  CHECK(server.store().WaiterCount() == 0);
  waiter.join();
  CHECK_FALSE(status.ok());
  CHECK(status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED);
}

TEST_CASE("Store service rejects bad requests with INVALID_ARGUMENT", "[store_service]") {
  StoreServer server;
  auto stub = server.NewStub();
  CHECK(Set(*stub, "bad run id!", "k", "v").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Set(*stub, "", "k", "v").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Set(*stub, "run", "", "v").error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Wait(*stub, "bad/run", {"k"}, 1).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK(Wait(*stub, "run", {""}, 1).error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  for (double timeout_s : {0.0, -1.0, 3601.0, std::nan("")}) {
    grpc::Status status = Wait(*stub, "run", {"k"}, timeout_s);
    CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
    CHECK_THAT(status.error_message(), Catch::Contains("timeout_s"));
  }
  grpc::ClientContext context;
  Prepare(context);
  v1::GetRequest request;
  request.set_run_id(std::string(200, 'r'));
  request.set_key("k");
  v1::GetReply reply;
  grpc::Status status = stub->Get(&context, request, &reply);
  CHECK(status.error_code() == grpc::StatusCode::INVALID_ARGUMENT);
  CHECK_THAT(status.error_message(), Catch::Contains("run id"));
  CHECK(server.store().WaiterCount() == 0);
}

TEST_CASE("Store service passes the store's key limit through as RESOURCE_EXHAUSTED",
          "[store_service]") {
  StoreServer server("", mxrun::MemoryStoreOptions{.max_keys_per_run = 1});
  auto stub = server.NewStub();
  REQUIRE(Set(*stub, "run", "a", "1").ok());
  grpc::Status status = Set(*stub, "run", "b", "2");
  CHECK(status.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED);
  CHECK_THAT(status.error_message(), Catch::Contains("keys"));
}

TEST_CASE("Store service with a token refuses calls without the right one", "[store_service]") {
  StoreServer server("s3cret");
  auto stub = server.NewStub();
  grpc::Status none = Set(*stub, "run", "k", "v");
  CHECK(none.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(none.error_message(), Catch::Contains("requires a token"));
  grpc::Status wrong = Set(*stub, "run", "k", "v", "guess");
  CHECK(wrong.error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_THAT(wrong.error_message(), Catch::Contains("wrong token"));
  CHECK(Wait(*stub, "run", {"k"}, 1, "guess").error_code() == grpc::StatusCode::UNAUTHENTICATED);
  CHECK_FALSE(server.store().Get("run", "k").has_value());

  CHECK(Set(*stub, "run", "k", "v", "s3cret").ok());
  CHECK(Wait(*stub, "run", {"k"}, 1, "s3cret").ok());
  CHECK(server.store().Get("run", "k") == std::optional<std::string>("v"));
}

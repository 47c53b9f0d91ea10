#pragma once
// Real etcd members (Debian's /usr/bin/etcd) for integration tests: N members on 127.0.0.1, ports
// picked by the kernel, data in a private folder, short heartbeat and election timeouts so that a
// lost leader is replaced in well under a second. Each member is stopped by its pid (SIGKILL, by
// Subprocess) when the cluster goes out of scope, and dies with the test process if that is killed.

#include <signal.h>

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/net.h"
#include "tests/free_port.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

namespace mxrun::testing {

class EtcdCluster {
 public:
  explicit EtcdCluster(int members = 1) {
    for (int i = 0; i < members; ++i) {
      Member m;
      m.name = "m" + std::to_string(i);
      m.client_port = DistinctFreePort(taken_);
      m.peer_port = DistinctFreePort(taken_);
      members_.push_back(std::move(m));
    }
    std::vector<std::string> initial;
    for (const Member& m : members_) {
      initial.push_back(absl::StrCat(m.name, "=http://127.0.0.1:", m.peer_port));
    }
    initial_cluster_ = absl::StrJoin(initial, ",");
    for (size_t i = 0; i < members_.size(); ++i) Start(i);
    WaitHealthy();
  }

  EtcdConfig Config() const {
    EtcdConfig config;
    for (const Member& m : members_) config.endpoints.push_back(Endpoint(m));
    return config;
  }
  std::unique_ptr<EtcdClient> Client() const {
    absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(Config());
    REQUIRE(client.ok());
    return std::move(*client);
  }

  // "host:port,host:port" of every member (--rdzv_endpoint).
  std::string Endpoints() const { return absl::StrJoin(Config().endpoints, ","); }
  size_t size() const { return members_.size(); }

  // Starts member `i` again on its data (after Kill) and waits until it serves.
  void Restart(size_t i) {
    Start(i);
    WaitHealthy();
  }

  // The member that leads the etcd cluster now, as etcdctl (etcd-client) reports it; -1 when none
  // of the live members names a leader.
  int LeaderIndex() const {
    for (size_t i = 0; i < members_.size(); ++i) {
      if (!members_[i].process) continue;
      ProcessResult r = Run({"/usr/bin/etcdctl", "--endpoints=" + Endpoint(members_[i]), "endpoint",
                             "status", "--write-out=fields"},
                            {{"ETCDCTL_API", "3"}}, std::chrono::seconds(10));
      // Fields come as lines `"MemberID" : 123` and `"Leader" : 123`.
      const std::string member = Field(r.out, "\"MemberID\" : ");
      const std::string leader = Field(r.out, "\"Leader\" : ");
      if (!member.empty() && member == leader) return static_cast<int>(i);
    }
    return -1;
  }

  // Kills member `i` (SIGKILL) and waits for it to be gone.
  void Kill(size_t i) {
    ::kill(members_[i].process->pid(), SIGKILL);
    members_[i].process->Wait(std::chrono::seconds(10));
    members_[i].process.reset();
  }

 private:
  struct Member {
    std::string name;
    int client_port = 0;
    int peer_port = 0;
    std::unique_ptr<Subprocess> process;
  };

  static std::string Field(const std::string& text, const std::string& name) {
    size_t at = text.find(name);
    if (at == std::string::npos) return "";
    at += name.size();
    return text.substr(at, text.find('\n', at) - at);
  }

  static std::string Endpoint(const Member& m) { return absl::StrCat("127.0.0.1:", m.client_port); }

  void Start(size_t i) {
    Member& m = members_[i];
    const std::string client = absl::StrCat("http://127.0.0.1:", m.client_port);
    const std::string peer = absl::StrCat("http://127.0.0.1:", m.peer_port);
    // setpriv (util-linux) gives etcd a parent-death signal: a test binary killed by its timeout
    // takes its members with it instead of leaving them running.
    m.process =
        std::make_unique<Subprocess>(std::vector<std::string>{"/usr/bin/setpriv",
                                                              "--pdeathsig",
                                                              "KILL",
                                                              "--",
                                                              "/usr/bin/etcd",
                                                              "--name",
                                                              m.name,
                                                              "--data-dir",
                                                              dir_.path() + "/" + m.name,
                                                              "--listen-client-urls",
                                                              client,
                                                              "--advertise-client-urls",
                                                              client,
                                                              "--listen-peer-urls",
                                                              peer,
                                                              "--initial-advertise-peer-urls",
                                                              peer,
                                                              "--initial-cluster",
                                                              initial_cluster_,
                                                              "--initial-cluster-state",
                                                              "new",
                                                              "--initial-cluster-token",
                                                              "mxrun-test",
                                                              "--heartbeat-interval",
                                                              "50",
                                                              "--election-timeout",
                                                              "300",
                                                              "--logger",
                                                              "zap",
                                                              "--log-level",
                                                              "error"});
  }

  // Bounded: a write through every member until all accept one.
  void WaitHealthy() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    for (const Member& m : members_) {
      if (!m.process) continue;
      EtcdConfig config;
      config.endpoints = {Endpoint(m)};
      config.rpc_timeout = std::chrono::milliseconds(500);
      absl::StatusOr<std::unique_ptr<EtcdClient>> client = EtcdClient::Connect(config);
      REQUIRE(client.ok());
      for (absl::StatusOr<int64_t> put = (*client)->Put("/mxrun-test/health", m.name); !put.ok();
           put = (*client)->Put("/mxrun-test/health", m.name)) {
        INFO("etcd member " << m.name << " not ready: " << put.status().ToString());
        if (!IsAlive(m.process->pid())) {
          ProcessResult exited = m.process->Wait(std::chrono::seconds(5));
          FAIL("etcd member " << m.name << " exited: " << Describe(exited));
        }
        REQUIRE(std::chrono::steady_clock::now() < deadline);
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }

  TempDir dir_;
  std::set<int> taken_;
  std::string initial_cluster_;
  std::vector<Member> members_;
};

}  // namespace mxrun::testing

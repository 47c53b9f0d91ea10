// Mutual TLS between agents, mxrun status and mxrun-master, with certificates the test makes
// with scripts/make-certs.sh (openssl): a job forms, plaintext and foreign-CA peers are refused
// with a plain message on both sides, the token still works on top, and the master takes replaced
// certificates for new connections while an established session goes on. Every wait is bounded.

#include <catch2/catch.hpp>

#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <memory>
#include <thread>

#include "tests/master.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

using namespace std::chrono_literals;
using mxrun::testing::Master;
using mxrun::testing::ProcessResult;
using mxrun::testing::Run;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

const std::string kMxrun = MXRUN_BIN;
const std::string kMakeCerts = std::string(SCRIPTS_DIR) + "/make-certs.sh";

// A CA in `dir` and a node certificate NAME for 127.0.0.1 and localhost.
void MakeCa(const std::string& dir) {
  ProcessResult r = Run({kMakeCerts, dir, "ca"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}
void MakeNode(const std::string& dir, const std::string& name) {
  ProcessResult r = Run({kMakeCerts, dir, "node", name, "127.0.0.1", "localhost"});
  INFO(r.err);
  REQUIRE(r.exit_code == 0);
}

std::string Conf(const std::string& dir, const std::string& name) {
  return "cert=" + dir + "/" + name + ".pem,key=" + dir + "/" + name + ".key,cacert=" + dir +
         "/ca.pem";
}

std::vector<std::string> MasterFlags(const std::string& dir, const std::string& name) {
  return {"--cert=" + dir + "/" + name + ".pem", "--key=" + dir + "/" + name + ".key",
          "--cacert=" + dir + "/ca.pem"};
}

// One node of a one-node c10d job against `endpoint`, running test_child with `child`.
std::vector<std::string> Agent(const std::string& endpoint, const std::string& run_id,
                               const std::string& conf, std::vector<std::string> child) {
  std::vector<std::string> argv = {kMxrun,
                                   "--rdzv_backend=c10d",
                                   "--rdzv_endpoint=" + endpoint,
                                   "--rdzv_id=" + run_id,
                                   "--nnodes=1",
                                   "--rdzv_conf=is_host=0" + (conf.empty() ? "" : "," + conf),
                                   "--no_python",
                                   TEST_CHILD_BIN};
  argv.insert(argv.end(), child.begin(), child.end());
  return argv;
}

// The subject of the certificate the master presents now, through openssl's own client.
std::string ServedSubject(const std::string& endpoint, const std::string& dir) {
  ProcessResult r = Run({"sh", "-c",
                         "openssl s_client -connect " + endpoint + " -cert " + dir +
                             "/node.pem -key " + dir + "/node.key -CAfile " + dir +
                             "/ca.pem -brief </dev/null 2>&1 | grep 'Peer certificate'"});
  return r.out;
}

}  // namespace

TEST_CASE("mutual TLS: a job forms through a TLS master, and mxrun status reads it",
          "[integration][tls]") {
  TempDir pki;
  MakeCa(pki.path());
  MakeNode(pki.path(), "master");
  MakeNode(pki.path(), "node");
  Master master({.extra = MasterFlags(pki.path(), "master")});
  ProcessResult r = Run(Agent(master.endpoint(), "tls1", Conf(pki.path(), "node"), {}), {}, 30s);
  INFO(r.err);
  CHECK(r.exit_code == 0);
  ProcessResult status = Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(),
                              "--rdzv_conf=" + Conf(pki.path(), "node")},
                             {}, 20s);
  INFO(status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Catch::Contains("run tls1: succeeded"));
  // Without the files, mxrun status cannot read it.
  ProcessResult plain =
      Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(), "--timeout=2"}, {}, 20s);
  CHECK(plain.exit_code == 3);
  CHECK_THAT(master.StopAndOutput(), Catch::Contains("(mutual TLS)"));
}

TEST_CASE(
    "mutual TLS: plaintext and foreign-CA peers are refused, with a plain message on both "
    "sides",
    "[integration][tls]") {
  TempDir pki, other;
  MakeCa(pki.path());
  MakeNode(pki.path(), "master");
  MakeNode(pki.path(), "node");
  MakeCa(other.path());
  MakeNode(other.path(), "node");
  {
    Master master({.extra = MasterFlags(pki.path(), "master")});
    ProcessResult plain = Run(Agent(master.endpoint(), "tls2", "join_timeout=2", {}), {}, 30s);
    CHECK(plain.exit_code == 3);
    CHECK_THAT(plain.err, Catch::Contains("If the master requires mutual TLS, give --rdzv_conf "
                                          "cert=,key=,cacert="));
    ProcessResult foreign =
        Run(Agent(master.endpoint(), "tls3", "join_timeout=2," + Conf(other.path(), "node"), {}),
            {}, 30s);
    CHECK(foreign.exit_code == 3);
    CHECK_THAT(foreign.err, Catch::Contains("TLS handshake failed: a certificate is not from the "
                                            "CA the other side trusts"));
    CHECK_THAT(master.StopAndOutput(),
               Catch::Contains("mxrun-master: TLS handshake failed: the other side does not "
                               "speak TLS"));
  }
  // A TLS agent and a plaintext master.
  Master plain_master;
  ProcessResult r =
      Run(Agent(plain_master.endpoint(), "tls4", "join_timeout=2," + Conf(pki.path(), "node"), {}),
          {}, 30s);
  CHECK(r.exit_code == 3);
  CHECK_THAT(r.err, Catch::Contains("This node uses mutual TLS"));
}

TEST_CASE("mutual TLS: the token still works on top", "[integration][tls]") {
  TempDir pki;
  MakeCa(pki.path());
  MakeNode(pki.path(), "master");
  MakeNode(pki.path(), "node");
  std::ofstream(pki.path() + "/token") << "t0k3n\n";
  std::vector<std::string> flags = MasterFlags(pki.path(), "master");
  flags.push_back("--token_file=" + pki.path() + "/token");
  Master master({.extra = flags});
  ProcessResult wrong = Run(Agent(master.endpoint(), "tok1", Conf(pki.path(), "node"), {}),
                            {{"MXRUN_RDZV_TOKEN", "nope"}}, 30s);
  CHECK(wrong.exit_code == 3);
  CHECK_THAT(wrong.err, Catch::Contains("wrong token"));
  ProcessResult right = Run(Agent(master.endpoint(), "tok2", Conf(pki.path(), "node"), {}),
                            {{"MXRUN_RDZV_TOKEN", "t0k3n"}}, 30s);
  INFO(right.err);
  CHECK(right.exit_code == 0);
}

TEST_CASE("mutual TLS: replaced certificates serve new connections, a session goes on",
          "[integration][tls]") {
  TempDir pki;
  MakeCa(pki.path());
  MakeNode(pki.path(), "master");
  MakeNode(pki.path(), "node");
  MakeNode(pki.path(), "rotated");
  Master master({.extra = MasterFlags(pki.path(), "master")});
  REQUIRE_THAT(ServedSubject(master.endpoint(), pki.path()), Catch::Contains("CN = master"));
  // A job whose worker runs until the test ends it.
  Subprocess job(
      Agent(master.endpoint(), "rot", Conf(pki.path(), "node"), {"--ready", "--sleep=60"}));
  REQUIRE(job.WaitForStdout("ready rank=0", 1, 30s));
  // The new certificate goes in as an operator would: written beside, then renamed over.
  for (const char* ext : {".pem", ".key"}) {
    const std::string from = pki.path() + "/rotated" + ext;
    const std::string to = pki.path() + "/master" + ext;
    REQUIRE(std::rename(from.c_str(), to.c_str()) == 0);
  }
  // SIGHUP: the master checks the files and says so; gRPC takes them within a second.
  REQUIRE(kill(master.pid(), SIGHUP) == 0);
  ProcessResult status;
  bool rotated = false;
  for (int attempt = 0; attempt < 50 && !rotated; ++attempt) {
    rotated =
        ServedSubject(master.endpoint(), pki.path()).find("CN = rotated") != std::string::npos;
    if (!rotated) std::this_thread::sleep_for(100ms);  // bounded: 5 s in all
  }
  CHECK(rotated);
  // The job's session was not dropped: still round 0, its member running.
  status = Run({kMxrun, "status", "--rdzv_endpoint=" + master.endpoint(),
                "--rdzv_conf=" + Conf(pki.path(), "node")},
               {}, 20s);
  CHECK_THAT(status.out, Catch::Contains("run rot: running, round 0"));
  CHECK(job.err().find("re-forming") == std::string::npos);
  kill(job.pid(), SIGTERM);
  ProcessResult ended = job.Wait(30s);
  CHECK(ended.exit_code == 128 + SIGTERM);
  CHECK(ended.err.find("lost the rendezvous master") == std::string::npos);
  CHECK_THAT(master.StopAndOutput(),
             Catch::Contains("mxrun-master: SIGHUP: certificate files verified and re-read; new "
                             "connections use them within 1 s, established sessions go on"));
}

TEST_CASE("mutual TLS: incomplete or wrong files are refused before anything starts",
          "[integration][tls]") {
  TempDir pki;
  MakeCa(pki.path());
  MakeNode(pki.path(), "node");
  ProcessResult r = Run({kMxrun, "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:1",
                         "--rdzv_conf=cert=" + pki.path() + "/node.pem", "--no_python", "true"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err,
             Catch::Contains("mutual TLS needs cert, key and cacert together; key is missing"));
  r = Run({kMxrun, "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:1",
           "--rdzv_conf=cert=" + pki.path() + "/node.key,key=" + pki.path() +
               "/node.key,cacert=" + pki.path() + "/ca.pem",
           "--no_python", "true"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("is not a PEM file with a certificate"));
  r = Run({MXRUN_MASTER_BIN, "--port=0", "--cert=" + pki.path() + "/node.pem"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("mxrun-master: mutual TLS needs cert, key and cacert"));
  // What only a handshake would find otherwise: a key of another certificate, a CA that did not
  // sign it.
  MakeNode(pki.path(), "other");
  r = Run({MXRUN_MASTER_BIN, "--port=0", "--cert=" + pki.path() + "/node.pem",
           "--key=" + pki.path() + "/other.key", "--cacert=" + pki.path() + "/ca.pem"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("key=" + pki.path() + "/other.key does not belong to cert=" +
                                    pki.path() + "/node.pem"));
  TempDir foreign;
  MakeCa(foreign.path());
  r = Run({MXRUN_MASTER_BIN, "--port=0", "--cert=" + pki.path() + "/node.pem",
           "--key=" + pki.path() + "/node.key", "--cacert=" + foreign.path() + "/ca.pem"});
  CHECK(r.exit_code == 2);
  CHECK_THAT(r.err, Catch::Contains("does not verify against cacert=" + foreign.path() +
                                    "/ca.pem: unable to get local issuer certificate"));
}

// rdzv_loadgen: opens N agent sessions to one rendezvous master from a single process and measures
// how long the master takes to form a round of N nodes (first Join sent -> last RoundAssignment
// received), then reports success for every node so the run finishes cleanly.
//
//   rdzv_loadgen --endpoint=127.0.0.1:PORT --nodes=4096 [--channels=32] [--run_id=load1] [--reform]
//                [--cert=PEM --key=PEM --cacert=PEM]   (mutual TLS, as agents with --rdzv_conf)
// Prints one line: "nodes=N form_s=... finish_s=... rounds_ok=N".
// With --reform the job is --nnodes=N-1:N and, once the round is formed, one session vanishes
// (its stream cancelled, as when a node dies): every survivor is told to stop, joins again at
// once, and reform_s is the time from the cancel to the last survivor's new round.
// With --heartbeat_s=S every session then heartbeats once a second for S seconds, as agents do
// (spread evenly over the second), and the line adds beats= and alive= (the master's answers,
// which agents watch to notice a silent master) and, with --master_pid, master_cpu= (the master's
// CPU time over that window, in CPU seconds per second).

#include <grpcpp/grpcpp.h>

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "CLI/CLI.hpp"
#include "mxrun.grpc.pb.h"
#include "rendezvous/grpc/tls_credentials.h"

namespace {

using Clock = std::chrono::steady_clock;

// utime + stime of process `pid`, in seconds (/proc/PID/stat fields 14 and 15).
double CpuSeconds(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t close = text.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && fields >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return static_cast<double>(utime + stime) / sysconf(_SC_CLK_TCK);
}

struct Shared {
  std::mutex mutex;
  std::condition_variable done;
  int rounds = 0;
  int reformed = 0;  // new rounds (round >= 1) received
  int finished = 0;
  int failed = 0;
  std::atomic<long> alive{0};  // Alive messages received
  Clock::time_point last_round;
  Clock::time_point last_reformed;
};

class Session final
    : public grpc::ClientBidiReactor<mxrun::v1::AgentMessage, mxrun::v1::MasterMessage> {
 public:
  Session(mxrun::v1::Rendezvous::Stub* stub, Shared* shared, const std::string& run_id, int index,
          int nodes, bool reform, int ranks)
      : shared_(shared), ranks_(ranks), index_(index) {
    auto* join = out_.mutable_join();
    join->set_protocol_version(1);
    join->set_run_id(run_id);
    join->mutable_node()->set_host("load" + std::to_string(index));
    join->mutable_node()->set_address("127.0.0.1");
    join->mutable_node()->set_local_world_size(ranks > 0 ? ranks : 1);
    join->mutable_node()->set_node_rank(-1);
    join->mutable_node()->set_master_port(20000 + index % 10000);
    auto* job = join->mutable_job();
    job->set_min_nodes(reform && nodes > 1 ? nodes - 1 : nodes);
    job->set_max_nodes(nodes);
    job->set_join_timeout_s(120);
    job->set_last_call_timeout_s(30);
    job->set_heartbeat_interval_s(30);  // the generator does not heartbeat; keep leases long
    job->set_missed_heartbeats(10);
    job->set_straggler_factor(1.5);  // the master judges the ranks' progress (--ranks_per_node)
    job->set_straggler_steps(20);
    stub->async()->Session(&context_, this);
    StartWrite(&out_);
    StartRead(&in_);
    StartCall();
  }

  void OnWriteDone(bool) override { writing_ = false; }
  void OnReadDone(bool ok) override {
    if (!ok) return;  // the master finished the stream; OnDone follows
    if (in_.has_alive()) ++shared_->alive;
    if (in_.has_round()) {
      round_ = in_.round().round();
      rank_base_ = in_.round().global_rank_base();
      {
        std::lock_guard<std::mutex> lock(shared_->mutex);
        if (round_ == 0) {
          ++shared_->rounds;
          shared_->last_round = Clock::now();
        } else {
          ++shared_->reformed;
          shared_->last_reformed = Clock::now();
        }
      }
      shared_->done.notify_all();
    }
    if (in_.has_stop()) {  // join again at once, as an agent with no workers
      writing_ = true;
      StartWrite(&out_);
    }
    if (in_.has_finished() || in_.has_refused()) {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      if (in_.has_refused()) {
        ++shared_->failed;
        std::fprintf(stderr, "refused: %s\n", in_.refused().message().c_str());
      }
    }
    StartRead(&in_);
  }
  void OnDone(const grpc::Status&) override {
    {
      std::lock_guard<std::mutex> lock(shared_->mutex);
      ++shared_->finished;
    }
    shared_->done.notify_all();
  }
  void Vanish() { context_.TryCancel(); }
  void ReportSuccess() {
    report_.mutable_succeeded()->set_round(round_);
    writing_ = true;
    StartWrite(&report_);
  }
  // One heartbeat unless a write is still in flight (gRPC allows one at a time); true when sent.
  bool Idle() const { return !writing_; }
  bool Beat() {
    if (writing_.exchange(true)) return false;
    auto* heartbeat = beat_.mutable_heartbeat();
    if (ranks_ > 0) {
      // Every rank one step further each beat, 0.1 s a step (a little noise so that medians
      // and sorting do real work), as an agent passes its workers' reports on.
      heartbeat->Clear();
      heartbeat->set_round(round_);
      ++step_;
      for (int r = 0; r < ranks_; ++r) {
        auto* p = heartbeat->add_ranks();
        p->set_global_rank(rank_base_ + r);
        p->set_local_rank(r);
        p->set_step(step_);
        p->set_step_seconds(0.1 + 0.001 * ((index_ * 7 + r) % 13));
        p->set_report_age_s(0.05);
      }
    }
    StartWrite(&beat_);
    return true;
  }

 private:
  Shared* shared_;
  grpc::ClientContext context_;
  mxrun::v1::AgentMessage out_;
  mxrun::v1::AgentMessage report_;
  mxrun::v1::AgentMessage beat_;
  std::atomic<bool> writing_{true};  // the join is the first write
  mxrun::v1::MasterMessage in_;
  int round_ = 0;
  const int ranks_;  // workers whose progress each heartbeat carries (0: none)
  const int index_;
  int rank_base_ = 0;
  long long step_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"rdzv_loadgen: N sessions from one process against an mxrun master"};
  std::string endpoint;
  std::string run_id = "load1";
  int nodes = 1024;
  int channels = 32;
  double timeout_s = 60;
  app.add_option("--endpoint", endpoint)->required();
  app.add_option("--nodes", nodes)->check(CLI::Range(1, 65536));
  app.add_option("--channels", channels,
                 "connections to spread the sessions over (one per session is what a cluster of "
                 "agents makes; needs two file descriptors per connection on this host)")
      ->check(CLI::Range(1, 65536));
  app.add_option("--run_id", run_id);
  app.add_option("--timeout", timeout_s);
  bool reform = false;
  mxrun::TlsFiles tls;
  app.add_option("--cert", tls.cert, "mutual TLS: the client certificate");
  app.add_option("--key", tls.key, "mutual TLS: its key");
  app.add_option("--cacert", tls.cacert, "mutual TLS: the CA");
  app.add_flag("--reform", reform, "also measure the re-formation after one session vanishes");
  double heartbeat_s = 0;
  int master_pid = 0;
  app.add_option("--heartbeat_s", heartbeat_s,
                 "then heartbeat once a second from every session for this many seconds")
      ->check(CLI::Range(0.0, 600.0));
  app.add_option("--master_pid", master_pid, "with --heartbeat_s: the master's pid (its CPU time)");
  int ranks_per_node = 0;
  app.add_option("--ranks_per_node", ranks_per_node,
                 "each session has this many workers, and its heartbeats carry their progress "
                 "(the master keeps it and judges stragglers over every rank); 0: one worker, "
                 "empty heartbeats")
      ->check(CLI::Range(0, 64));
  CLI11_PARSE(app, argc, argv);

  std::vector<std::unique_ptr<mxrun::v1::Rendezvous::Stub>> stubs;
  const std::shared_ptr<grpc::ChannelCredentials> credentials = mxrun::ClientCredentials(tls);
  for (int c = 0; c < channels; ++c) {
    grpc::ChannelArguments args;
    args.SetInt("grpc.channel_id", c);  // distinct channels, distinct connections
    stubs.push_back(
        mxrun::v1::Rendezvous::NewStub(grpc::CreateCustomChannel(endpoint, credentials, args)));
  }
  Shared shared;
  std::vector<std::unique_ptr<Session>> sessions;
  const auto start = Clock::now();
  for (int i = 0; i < nodes; ++i) {
    sessions.push_back(std::make_unique<Session>(stubs[i % channels].get(), &shared, run_id, i,
                                                 nodes, reform, ranks_per_node));
  }
  const auto deadline = start + std::chrono::milliseconds(static_cast<long>(timeout_s * 1000));
  std::unique_lock<std::mutex> lock(shared.mutex);
  if (!shared.done.wait_until(lock, deadline,
                              [&] { return shared.rounds == nodes || shared.failed > 0; })) {
    std::fprintf(stderr, "timed out or refused: %d of %d rounds\n", shared.rounds, nodes);
    std::fflush(nullptr);
    _exit(1);  // reactors are still live: do not run their destructors
  }
  const double form_s = std::chrono::duration<double>(shared.last_round - start).count();
  double reform_s = 0;
  size_t first_reporter = 0;
  if (reform && nodes > 1) {
    lock.unlock();
    const auto vanished_at = Clock::now();
    sessions[0]->Vanish();
    first_reporter = 1;
    lock.lock();
    if (!shared.done.wait_until(
            lock, deadline, [&] { return shared.reformed == nodes - 1 || shared.failed > 0; })) {
      std::fprintf(stderr, "re-formation timed out or refused: %d of %d new rounds\n",
                   shared.reformed, nodes - 1);
      std::fflush(nullptr);
      _exit(1);
    }
    reform_s = std::chrono::duration<double>(shared.last_reformed - vanished_at).count();
  }
  lock.unlock();
  long beats = 0;
  double master_cpu = -1;
  if (heartbeat_s > 0) {
    // Every session once a second, in 100 slices of 10 ms so the load is even.
    const double cpu_before = master_pid > 0 ? CpuSeconds(master_pid) : 0;
    const auto window_start = Clock::now();
    const auto window_end =
        window_start + std::chrono::milliseconds(static_cast<long>(heartbeat_s * 1000));
    for (long slice = 0;; ++slice) {
      const auto at = window_start + std::chrono::milliseconds(10 * slice);
      if (at >= window_end) break;
      std::this_thread::sleep_until(at);
      const size_t n = sessions.size();
      for (size_t i = first_reporter + slice % 100; i < n; i += 100) beats += sessions[i]->Beat();
    }
    const double window = std::chrono::duration<double>(Clock::now() - window_start).count();
    if (master_pid > 0) master_cpu = (CpuSeconds(master_pid) - cpu_before) / window;
  }
  for (size_t i = first_reporter; i < sessions.size(); ++i) {
    while (!sessions[i]->Idle()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    sessions[i]->ReportSuccess();
  }
  lock.lock();
  const bool finished =
      shared.done.wait_until(lock, deadline, [&] { return shared.finished == nodes; });
  const double finish_s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("nodes=%d form_s=%.3f finish_s=%.3f rounds_ok=%d finished=%d", nodes, form_s,
              finish_s, shared.rounds, finished ? shared.finished : -1);
  if (reform) std::printf(" reform_s=%.3f reformed=%d", reform_s, shared.reformed);
  if (heartbeat_s > 0) {
    std::printf(" beats=%ld alive=%ld", beats, shared.alive.load());
    if (master_cpu >= 0) std::printf(" master_cpu=%.3f", master_cpu);
  }
  std::printf("\n");
  std::fflush(nullptr);
  if (!finished) _exit(1);
  lock.unlock();
  return shared.failed == 0 ? 0 : 1;
}

#include "trainer/collectives.h"

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <future>
#include <stdexcept>
#include <thread>

#include <ATen/ATen.h>
#include <torch/version.h>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(MXRUN_WITH_CUDA)
#include <cuda_runtime_api.h>  // CUDART_VERSION, for --version
#endif
#if defined(MXRUN_WITH_NCCL)
#include <nccl.h>  // NCCL_MAJOR, for --version
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

namespace mxrun::trainer {
namespace {

// PyTorch 2.x split ProcessGroup into a dispatching front and per-device Backends; the Gloo and
// NCCL classes derive from Backend there and from ProcessGroup in 1.13. Both have the same
// collective methods.
#if TORCH_VERSION_MAJOR >= 2
using GroupBase = c10d::Backend;
#else
using GroupBase = c10d::ProcessGroup;
#endif

using Interrupt = std::shared_ptr<const std::function<bool()>>;

// Waits for `work`; with an interrupt, polls it and the interrupt instead of blocking.
void WaitFor(c10d::Work& work, const Interrupt& interrupt) {
  if (interrupt) {
    while (!work.isCompleted()) {
      if ((*interrupt)()) throw CollectiveInterrupted();
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  try {
    work.wait();  // rethrows the collective's error
  } catch (const c10::Error& e) {
    throw CollectiveFailed(e.what_without_backtrace());
  } catch (const std::exception& e) {  // Gloo's own (gloo::IoException: a peer is gone)
    throw CollectiveFailed(e.what());
  }
}

class WorkHandle : public PendingCollective {
 public:
  WorkHandle(c10::intrusive_ptr<c10d::Work> work, Interrupt interrupt)
      : work_(std::move(work)), interrupt_(std::move(interrupt)) {}
  void Wait() override { WaitFor(*work_, interrupt_); }

 private:
  c10::intrusive_ptr<c10d::Work> work_;
  Interrupt interrupt_;
};

class C10dCollectives : public Collectives {
 public:
  C10dCollectives(c10::intrusive_ptr<c10d::Store> store, c10::intrusive_ptr<GroupBase> group,
                  int rank, int size, at::Device device)
      : store_(std::move(store)),
        group_(std::move(group)),
        rank_(rank),
        size_(size),
        device_(device) {}

  int size() const override { return size_; }
  at::Device device() const override { return device_; }

  std::unique_ptr<PendingCollective> AllReduceSum(at::Tensor& tensor) override {
    std::vector<at::Tensor> tensors{tensor};
    return std::make_unique<WorkHandle>(group_->allreduce(tensors, c10d::AllreduceOptions{}),
                                        interrupt_);
  }

  void Broadcast(const std::vector<at::Tensor>& tensors, int root) override {
    // One flat buffer per dtype and device, in first-seen order.
    std::vector<std::vector<at::Tensor>> groups;
    for (const at::Tensor& t : tensors) {
      auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) {
        return g.front().scalar_type() == t.scalar_type() && g.front().device() == t.device();
      });
      if (it == groups.end()) {
        groups.push_back({t});
      } else {
        it->push_back(t);
      }
    }
    for (std::vector<at::Tensor>& group : groups) {
      std::vector<at::Tensor> flat_parts;
      for (const at::Tensor& t : group) flat_parts.push_back(t.detach().reshape({-1}));
      std::vector<at::Tensor> flat{at::cat(flat_parts)};
      c10d::BroadcastOptions options;
      options.rootRank = root;
      WaitFor(*group_->broadcast(flat, options), interrupt_);
      if (rank_ == root) continue;
      at::NoGradGuard no_grad;
      int64_t offset = 0;
      for (at::Tensor t : group) {
        t.copy_(flat[0].narrow(0, offset, t.numel()).view(t.sizes()));
        offset += t.numel();
      }
    }
  }

  void Barrier() override { WaitFor(*group_->barrier(c10d::BarrierOptions{}), interrupt_); }

  void Shutdown() override {
#if TORCH_VERSION_MAJOR >= 2
    group_->shutdown();
#endif
  }

  void SetInterrupt(std::function<bool()> interrupted) override {
    interrupt_ = interrupted ? std::make_shared<const std::function<bool()>>(std::move(interrupted))
                             : nullptr;
  }

 private:
  Interrupt interrupt_;
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<GroupBase> group_;
  int rank_;
  int size_;
  at::Device device_;
};

// Waits until something listens on host:port (a connect succeeds), trying every 2 ms, up to
// `timeout`. LibTorch's TCPStore client retries a refused connection only after a 1 s pause, so a
// rank that starts before rank 0's store listens (every restart, and most starts) would wait
// ~0.7 s more than it needs to (measured with two processes).
void WaitForListener(const std::string& host, int port, std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < deadline) {
    for (addrinfo* a = found; a != nullptr && !up; a = a->ai_next) {
      const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      up = connect(fd, a->ai_addr, a->ai_addrlen) == 0;
      close(fd);
    }
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  freeaddrinfo(found);
}

// A worker trusts no peer before it knows the store is its run's: two jobs on one host could be
// handed the same port (another job's rank 0 took it first), and their ranks would then train
// together. Rank 0, which hosts the store, writes its run id first; every other rank reads it
// (waiting up to `timeout`) and refuses a store that holds another run's id, or none.
constexpr const char* kRunKey = "mxrun_run_id";

void CheckStoreBelongsToRun(c10d::Store& store, const WorkerIdentity& id,
                            std::chrono::milliseconds timeout) {
  const std::string where = id.master_addr + ":" + std::to_string(id.master_port);
  if (id.rank == 0) {
    store.set(kRunKey, std::vector<uint8_t>(id.run_id.begin(), id.run_id.end()));
    return;
  }
  try {
    store.wait({kRunKey}, timeout);
  } catch (const c10::Error&) {
    throw CollectiveFailed("the store at " + where + " never said which run it serves (within " +
                           std::to_string(timeout.count() / 1000) +
                           " s): it is not this run's rank 0, so this worker does not join it");
  }
  const std::vector<uint8_t> value = store.get(kRunKey);
  const std::string served(value.begin(), value.end());
  if (served != id.run_id) {
    throw CollectiveFailed("the store at " + where + " belongs to run '" + served +
                           "', not this worker's run '" + id.run_id +
                           "' (another job took the port): refusing to join it");
  }
}

bool IsLoopback(const std::string& addr) {
  return addr == "localhost" || addr == "::1" || addr.rfind("127.", 0) == 0;
}

c10::intrusive_ptr<GroupBase> MakeGloo(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                       int size, const std::string& master_addr,
                                       std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  } else if (IsLoopback(master_addr)) {
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  } else {
    options->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
  }
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace

std::string BuildDescription() {
  std::string text = "LibTorch " TORCH_VERSION;
#if defined(MXRUN_WITH_CUDA) && defined(CUDART_VERSION)
  text += ", CUDA: yes (" + std::to_string(CUDART_VERSION / 1000) + "." +
          std::to_string(CUDART_VERSION % 1000 / 10) + ")";
#elif defined(MXRUN_WITH_CUDA)
  text += ", CUDA: yes";
#else
  text += ", CUDA: no";
#endif
#if defined(MXRUN_WITH_NCCL) && defined(NCCL_MAJOR)
  text += ", NCCL: yes (" + std::to_string(NCCL_MAJOR) + "." + std::to_string(NCCL_MINOR) + "." +
          std::to_string(NCCL_PATCH) + ")";
#elif defined(MXRUN_WITH_NCCL)
  text += ", NCCL: yes";
#else
  text += ", NCCL: no";
#endif
  return text;
}

bool NcclAvailable() {
#if defined(MXRUN_WITH_NCCL)
  return true;
#else
  return false;
#endif
}

namespace {

std::unique_ptr<Collectives> Join(const WorkerIdentity& id, CommBackend backend, at::Device device,
                                  std::chrono::milliseconds timeout);

}  // namespace

namespace {

std::unique_ptr<Collectives> JoinOrThrow(const WorkerIdentity& id, CommBackend backend,
                                         at::Device device, std::chrono::milliseconds timeout) {
  try {
    return Join(id, backend, device, timeout);
  } catch (const c10::Error& e) {
    throw CollectiveFailed(std::string("cannot join the process group: ") +
                           e.what_without_backtrace());
  } catch (const CollectiveError&) {
    throw;
  } catch (const std::exception& e) {  // Gloo's own, connecting to a peer that is gone
    throw CollectiveFailed(std::string("cannot join the process group: ") + e.what());
  }
}

}  // namespace

std::unique_ptr<Collectives> JoinProcessGroup(const WorkerIdentity& id, CommBackend backend,
                                              at::Device device, std::chrono::milliseconds timeout,
                                              const std::function<bool()>& interrupted) {
  if (!interrupted) return JoinOrThrow(id, backend, device, timeout);
  // Joining blocks in the store or in Gloo's rendezvous, which nothing interrupts, until
  // `timeout` (30 minutes by default): when a peer of this round dies while the others join, the
  // group is re-formed and this round will never complete. So the join runs on a thread of its
  // own, and a newer round ends the wait (found by the soak: a rank lost while the group re-formed
  // held the kept ranks for the whole timeout). The abandoned join runs on until its timeout
  // and is dropped there.
  auto task = std::make_shared<std::packaged_task<std::unique_ptr<Collectives>()>>(
      [id, backend, device, timeout] { return JoinOrThrow(id, backend, device, timeout); });
  std::future<std::unique_ptr<Collectives>> joined = task->get_future();
  std::thread([task] { (*task)(); }).detach();
  while (joined.wait_for(std::chrono::milliseconds(2)) != std::future_status::ready) {
    if (interrupted()) throw CollectiveInterrupted();
  }
  return joined.get();
}

namespace {

std::unique_ptr<Collectives> Join(const WorkerIdentity& id, CommBackend backend, at::Device device,
                                  std::chrono::milliseconds timeout) {
  c10d::TCPStoreOptions store_options;
  store_options.port = static_cast<std::uint16_t>(id.master_port);
  store_options.timeout = timeout;
  store_options.numWorkers = id.world_size;
  store_options.waitWorkers = false;
  c10::intrusive_ptr<c10d::Store> store;
  std::string gloo_addr = id.master_addr;
  if (id.world_size == 1) {
    store = c10::make_intrusive<c10d::HashStore>();
    gloo_addr = "127.0.0.1";
  } else if (id.use_agent_store) {
    // torchrun's static rendezvous: the agent hosts the store; each attempt gets its own keys.
    // Under mxrun with several nodes node rank 0's agent opens it when the round reaches it, as
    // this node's agent tells a kept worker the round: a client refused first backs off for up
    // to a second, so the store is awaited here instead.
    store_options.isServer = false;
    WaitForListener(id.master_addr, id.master_port, timeout);
    store = c10::make_intrusive<c10d::PrefixStore>(
        "/worker/attempt_" + std::to_string(id.restart_count),
        c10::make_intrusive<c10d::TCPStore>(id.master_addr, store_options));
  } else {
    store_options.isServer = id.rank == 0;
    if (!store_options.isServer) WaitForListener(id.master_addr, id.master_port, timeout);
    store = c10::make_intrusive<c10d::TCPStore>(id.master_addr, store_options);
  }
  if (id.world_size > 1) CheckStoreBelongsToRun(*store, id, timeout);
  auto scoped = c10::make_intrusive<c10d::PrefixStore>("mxrun_train", store);
  c10::intrusive_ptr<GroupBase> group;
  if (backend == CommBackend::kNccl) {
#if defined(MXRUN_WITH_NCCL)
    auto options = c10d::ProcessGroupNCCL::Options::create();
    options->timeout = timeout;
    group = c10::make_intrusive<c10d::ProcessGroupNCCL>(scoped, id.rank, id.world_size, options);
#else
    throw std::runtime_error(
        "this trainer was built without NCCL (a CPU LibTorch); use --backend gloo");
#endif
  } else {
    group = MakeGloo(scoped, id.rank, id.world_size, gloo_addr, timeout);
  }
  return std::make_unique<C10dCollectives>(
      store, group, id.rank, id.world_size,
      backend == CommBackend::kNccl ? device : at::Device(at::kCPU));
}

}  // namespace

std::vector<std::unique_ptr<Collectives>> MakeLocalGlooGroups(int size,
                                                              std::chrono::milliseconds timeout) {
  auto store = c10::make_intrusive<c10d::HashStore>();
  std::vector<std::unique_ptr<Collectives>> groups(size);
  std::vector<std::thread> threads;
  // Each Gloo group connects to the others in its constructor, so they are built concurrently.
  for (int rank = 0; rank < size; ++rank) {
    threads.emplace_back([&, rank] {
      groups[rank] = std::make_unique<C10dCollectives>(
          store, MakeGloo(store, rank, size, "127.0.0.1", timeout), rank, size, at::kCPU);
    });
  }
  for (std::thread& t : threads) t.join();
  return groups;
}

}  // namespace mxrun::trainer

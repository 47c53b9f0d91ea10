#pragma once
// The trainer's view of a process group: the few collectives data parallelism needs, over
// LibTorch's c10d (ProcessGroupGloo on CPU, ProcessGroupNCCL on CUDA). All c10d types stay in
// collectives.cc, because their API moves between PyTorch releases (1.13's ProcessGroup became
// 2.x's Backend) and their headers are slow to compile.

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <ATen/core/Tensor.h>

#include "common/worker_env.h"

namespace mxrun::trainer {

enum class CommBackend { kGloo, kNccl };

// A collective, or joining the group, did not complete: a peer is gone (CollectiveFailed, with
// c10d's message), or the group is being re-formed (CollectiveInterrupted, see SetInterrupt).
// Under mxrun's in-process restart the trainer then waits for the new round (trainer.cc).
class CollectiveError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
class CollectiveFailed : public CollectiveError {
 public:
  using CollectiveError::CollectiveError;
};
class CollectiveInterrupted : public CollectiveError {
 public:
  CollectiveInterrupted() : CollectiveError("collective abandoned: the group is re-formed") {}
};

// An all-reduce in flight.
class PendingCollective {
 public:
  virtual ~PendingCollective() = default;
  virtual void Wait() = 0;  // throws when the collective failed or timed out
};

class Collectives {
 public:
  virtual ~Collectives() = default;
  virtual int size() const = 0;
  // Where tensors handed to the collectives must live (CPU for Gloo, the rank's GPU for NCCL).
  virtual at::Device device() const = 0;
  // Starts summing `tensor` in place across ranks.
  virtual std::unique_ptr<PendingCollective> AllReduceSum(at::Tensor& tensor) = 0;
  // Copies rank `root`'s tensors into every rank's tensors (same shapes), and waits. Tensors of one
  // dtype travel together as one flat buffer.
  virtual void Broadcast(const std::vector<at::Tensor>& tensors, int root) = 0;
  virtual void Barrier() = 0;
  // While `interrupted` is set, every wait checks it (about every 100 microseconds) and throws
  // CollectiveInterrupted when it returns true: a collective whose peer is gone may otherwise
  // block until the timeout. The group cannot be used afterwards.
  virtual void SetInterrupt(std::function<bool()> interrupted) = 0;
  // Ends a healthy group at the end of training, as torch.distributed.destroy_process_group does
  // (NCCL's communicators finalized; without it PyTorch 2.x warns at exit that it was not called).
  virtual void Shutdown() {}
};

// Joins the job's process group the way torch.distributed's env:// does: rank 0 hosts a
// c10d::TCPStore on MASTER_ADDR:MASTER_PORT and the others connect, or, when the launcher hosts
// the store (TORCHELASTIC_USE_AGENT_STORE=True), every rank connects to it under the prefix
// /worker/attempt_<restart count>. Gloo binds to 127.0.0.1 when MASTER_ADDR is a loopback
// address, to GLOO_SOCKET_IFNAME when set, and to the host name's address otherwise.
// A one-rank group (WORLD_SIZE 1, e.g. the trainer run alone with an explicit --backend) meets no
// one: its store is in-process and Gloo binds to 127.0.0.1, so it needs no port or network.
// `device` is this rank's training device (NCCL works on it; Gloo always on the CPU).
// Throws CollectiveFailed when the store or a peer cannot be reached within `timeout`, and
// CollectiveInterrupted as soon as `interrupted` (when given) returns true: the group is being
// re-formed, and this round's join may never complete.
std::unique_ptr<Collectives> JoinProcessGroup(const WorkerIdentity& id, CommBackend backend,
                                              at::Device device, std::chrono::milliseconds timeout,
                                              const std::function<bool()>& interrupted = {});

// `size` Gloo groups inside this process over an in-memory store and 127.0.0.1, one per rank,
// each to be driven from its own thread (tests of data parallelism without processes).
std::vector<std::unique_ptr<Collectives>> MakeLocalGlooGroups(int size,
                                                              std::chrono::milliseconds timeout);

// Whether this LibTorch was built with NCCL (a CUDA build).
bool NcclAvailable();

// What this train was built against, for --version: "LibTorch 2.14.1, CUDA: yes (13.0), NCCL: yes
// (2.28.9)", or "CUDA: no, NCCL: no" for a CPU build.
std::string BuildDescription();

}  // namespace mxrun::trainer

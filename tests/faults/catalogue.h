#pragma once
// The fault catalogue: every way a job is known to break, how the tests break it, and the ground
// truth of what mxrun must then say and do. One table, one row per failure type; each row is a
// ctest case labelled `faults` (named "fault NN <id>: ..."), which injects the fault into a real
// job and compares what it observed (tests/faults/outcome.h) with the row. A mismatch fails with
// the row's number, id and every difference.
//
// Where rows run: single-node rows in mxrun_fault_catalogue_tests (tests/faults/*_faults_test.cc);
// a row whose fixture lives elsewhere (network namespaces, etcd, Slurm) runs in that fixture's
// binary under the same name and label. tests/faults/catalogue_coverage_test.cc checks that every
// row has exactly one ctest case.
//
// Ground truth is written from what a person running the job needs to read and keep, not copied
// from what mxrun happened to print: where they differed, mxrun was changed (an OOM kill is named
// as one; a full log disk is warned about once and the job goes on).

#include <string_view>

namespace mxrun::faults {

inline constexpr int kNotCounted = -1;  // the workload reports no steps, or the job ends anyway

enum class Recovery {
  kNone,          // nothing restarts: the fault is told and the job goes on undisturbed
  kInProcess,     // the survivors keep their processes and state; the lost rank is replaced
  kGroupRestart,  // the worker group (on every node) is stopped and started again
  kJobEnds,       // the job ends with the fault as its root cause
  kRequeued,      // the scheduler stops the job and starts it again; it resumes from its checkpoint
};

enum class FinalState {
  kNotCompared,  // the job fails, or its workload keeps no state to compare
  kBitwise,      // same world size: parameters, buffers and momentum equal the fault-free run's
  kReported,     // another world size: the job must still learn, and the difference is printed
};

struct GroundTruth {
  // What the summary's cause line must contain: the root cause of a failed job ("exit : ...",
  // with its message), or the cause of a recovery ("restart N (round R; CAUSE)"). "": no cause
  // line at all (the job is not disturbed).
  std::string_view cause;
  // A line mxrun must also print (a warning, a note), "" for none.
  std::string_view notice;
  int exit_code;  // mxrun's exit code; 0: the job goes on to its end
  int restarts;   // recoveries: restarts (group or in-process) and re-formations after a node left
  Recovery recovery;
  std::string_view left_out;  // what the "left out of the job's rounds" line says; "" none
  int max_steps_lost;         // completed steps that may be trained again; kNotCounted
  FinalState state;
};

struct Fault {
  int row;
  std::string_view id;
  std::string_view name;       // the failure type
  std::string_view injection;  // how the test causes it
  std::string_view workload;   // what the job runs
  GroundTruth truth;
};

// The bundled trainer, 2 workers, CPU and Gloo, 96 steps (tests/faults/catalogue_job.h).
inline constexpr std::string_view kTrainer = "train, 2 workers (Gloo, CPU), 96 steps";

// A table, one fault a row as tests/faults/check_catalogue.sh reads them: kept as written.
// clang-format off
inline constexpr Fault kCatalogue[] = {
    {1, "worker-sigkill", "a worker killed (SIGKILL)", "kill -9 of rank 1 at step 10", kTrainer,
     {"rank 1 failed: Signal 9 (SIGKILL)", "", 0, 1, Recovery::kInProcess, "", 0,
      FinalState::kBitwise}},
    {2, "worker-sigsegv", "a worker crashes (SIGSEGV)", "kill -SEGV of rank 1 at step 10",
     kTrainer,
     {"rank 1 failed: Signal 11 (SIGSEGV)", "", 0, 1, Recovery::kInProcess, "", 0,
      FinalState::kBitwise}},
    {3, "worker-exit-code", "a worker exits with an error code",
     "rank 1 exits 3 in the first attempt", "test_child, 2 workers",
     {"rank 1 failed: exit code 3", "", 0, 1, Recovery::kGroupRestart, "", kNotCounted,
      FinalState::kNotCompared}},
    {4, "worker-oom", "a worker killed by the kernel's OOM killer",
     "rank 1 moved into a memory cgroup with a 64 MiB limit, then it allocates",
     "test_child, 2 workers",
     {"Signal 9 (SIGKILL), killed by the kernel's OOM killer", "", 1, 0, Recovery::kJobEnds, "",
      kNotCounted, FinalState::kNotCompared}},
    {5, "python-exception", "a Python exception under torch's @record",
     "rank 1 raises RuntimeError in main()", "a Python script with @record, 2 workers",
     {"exit code 1 | RuntimeError: catalogue boom from rank 1", "", 1, 0, Recovery::kJobEnds, "",
      kNotCounted, FinalState::kNotCompared}},
    {6, "collective-hang", "a hang in a collective",
     "rank 1 sleeps instead of entering its 4th all_reduce; --hang_timeout=3",
     "a Python Gloo script reporting steps, 3 workers",
     {"hung (heartbeat)", "flight recorder: group 0 (default_pg): rank 1 behind", 1, 0,
      Recovery::kJobEnds, "", kNotCounted, FinalState::kNotCompared}},
    {7, "dataloader-hang", "a hang in a data loader",
     "a DataLoader worker process of rank 1 blocks forever in the first attempt; --hang_timeout=3",
     "a Python script with a DataLoader (num_workers=1) and mxrun.step_done, 2 workers",
     {"rank 1 failed: hung (heartbeat)", "", 0, 1, Recovery::kGroupRestart, "", kNotCounted,
      FinalState::kNotCompared}},
    {8, "worker-sigstop", "a stopped worker (SIGSTOP)",
     "kill -STOP of rank 1 at step 10; --hang_timeout=5", kTrainer,
     {"rank 1 failed: hung (heartbeat)", "", 0, 1, Recovery::kInProcess, "", 0,
      FinalState::kBitwise}},
    {9, "uninterruptible-sleep", "a worker in uninterruptible sleep (D state)",
     "rank 0 waits in vfork() for 6 s in the first attempt; "
     "TORCHELASTIC_UNINTERRUPTIBLE_STATE_TIMEOUT=1",
     "test_child, 1 worker",
     {"rank 0 failed: hung (uninterruptible sleep)", "", 0, 1, Recovery::kGroupRestart, "",
      kNotCounted, FinalState::kNotCompared}},
    {10, "no-progress-reports", "a worker that never reports progress",
     "workers that never beat nor report a step, under --hang_timeout=1", "test_child, 2 workers",
     {"", "no progress reports: steps unknown", 0, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {11, "straggler", "a straggler", "rank 1 reports steps 4x slower than rank 0",
     "test_child reporting steps, 2 workers",
     {"", "rank 1 is a straggler", 0, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {12, "agent-sigkill", "an agent killed (SIGKILL)",
     "kill -9 of node 2's mxrun in a 2:3 job", "test_child on 3 nodes (loopback, one master)",
     {"left (stream closed)", "", 0, 1, Recovery::kGroupRestart, "", kNotCounted,
      FinalState::kNotCompared}},
    {13, "node-lost", "a node lost for good (its network cut)",
     "node 3's switch port taken down for good (network namespaces), in a 2:3 job",
     "test_child on 3 nodes (one namespace each, a master in a fourth)",
     {"no heartbeat for 5 s", "", 0, 1, Recovery::kGroupRestart, "", kNotCounted,
      FinalState::kNotCompared}},
    {14, "partition", "a partition between a node and the master, healed",
     "node b's connection to the master held (a TCP proxy: no FIN, no RST), then released",
     "test_child on 2 nodes (loopback, one master)",
     {"no heartbeat for 5 s", "", 0, 2, Recovery::kGroupRestart, "", kNotCounted,
      FinalState::kNotCompared}},
    {15, "master-host-lost", "the node hosting the elected master lost (etcd)",
     "kill -9 of the agent serving as master and of its worker, in a 2:3 etcd job",
     "test_child on 3 nodes (loopback, a 1-member etcd)",
     {"left (its agent held the expired master lease)", "", 0, 1, Recovery::kGroupRestart, "",
      kNotCounted, FinalState::kNotCompared}},
    {16, "etcd-member-lost", "an etcd member (not the leader) lost",
     "kill -9 of a follower of a 3-member etcd cluster mid-job", "test_child on 2 nodes (etcd)",
     {"", "", 0, 0, Recovery::kNone, "", kNotCounted, FinalState::kNotCompared}},
    {17, "etcd-leader-lost", "the etcd leader lost",
     "kill -9 of the leader of a 3-member etcd cluster mid-job", "test_child on 2 nodes (etcd)",
     {"", "", 0, 0, Recovery::kNone, "", kNotCounted, FinalState::kNotCompared}},
    {18, "master-restart", "a durable master killed and restarted",
     "kill -9 of mxrun-master --state_dir, then a new one on the same folder and port",
     "test_child on 2 nodes (loopback)",
     {"", "", 0, 0, Recovery::kNone, "", kNotCounted, FinalState::kNotCompared}},
    {19, "log-disk-full", "the log disk fills up",
     "--log_dir on a 256 KiB tmpfs (a mount namespace of its own); a worker prints 1 MiB",
     "test_child, 2 workers",
     {"", "misses output from here on: No space left on device", 0, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {20, "corrupt-checkpoint", "a corrupt checkpoint",
     "the job's checkpoint overwritten with garbage, then the job resumes (--resume)", kTrainer,
     {"exit code 1 | std::runtime_error: cannot read checkpoint", "", 93, 1, Recovery::kJobEnds, "", kNotCounted,
      FinalState::kNotCompared}},
    {21, "port-taken", "the rendezvous port taken by another program",
     "a foreign program listens on --rdzv_endpoint's port before the job starts",
     "test_child, 2 workers",
     {"", "is taken by a program that is not an mxrun rendezvous master", 3, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {22, "bad-certificate-rotation", "a master's certificate rotated to a bad one",
     "mxrun-master's cert and key renamed over by another CA's, then SIGHUP, mid-job",
     "test_child on 1 node, mutual TLS with a standalone mxrun-master",
     {"", "refused the new certificate files: cert=", 0, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {23, "standby-dies", "a warm standby dies before it is promoted",
     "kill -9 of the standby, then kill -9 of rank 1 at step 10", kTrainer,
     {"rank 1 failed: Signal 9 (SIGKILL)", "starting another in its place", 0, 1,
      Recovery::kInProcess, "",
      0, FinalState::kBitwise}},
    {24, "repeated-failures", "a node failing again and again (left out)",
     "node 2's worker exits 3 on every attempt; --exclude_after=2 (default), 2:3 nodes",
     "test_child on 3 nodes (loopback, one master)",
     {"failed (exit code 3)", "", 0, 2, Recovery::kGroupRestart, "2 worker failures within 3600 s",
      kNotCounted, FinalState::kNotCompared}},
    {25, "slurm-scancel", "the job cancelled by Slurm (scancel)",
     "scancel of a running 2-node batch job (KillWait 5 s)", "test_child, 2 nodes x 2 workers (Slurm)",
     {"", "cancelled by SIGTERM: ranks", 143, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {26, "slurm-requeue", "the job requeued by Slurm mid-run (preemption with requeue)",
     "scontrol requeue once the first checkpoint is written (--requeue, --ckpt_every 4)",
     "train, 2 nodes (Slurm), --resume",
     {"", "cancelled by SIGTERM: rank", 0, 1, Recovery::kRequeued, "", 4, FinalState::kBitwise}},
    {27, "preemption-warning", "a preemption warning (SIGUSR1)",
     "SIGUSR1 to mxrun with --signals_to_handle=SIGTERM,SIGUSR1", "test_child, 2 workers",
     {"", "received SIGUSR1: passed it on to 2 running worker(s)", 0, 0, Recovery::kNone, "",
      kNotCounted, FinalState::kNotCompared}},
    {28, "gpu-xid", "a GPU fault (XID 79, fallen off the bus) while training",
     "the fake NVML reports XID 79 on GPU 0; --health_check_interval=0.3",
     "test_child, 2 workers, fake NVML with 2 GPUs",
     {"", "this node is unhealthy: GPU 0: XID 79", 93, 0, Recovery::kNone, "", kNotCounted,
      FinalState::kNotCompared}},
    {29, "worker-sigkill-checkpoint", "a worker killed, the job restarted from its checkpoint",
     "kill -9 of rank 1 at step 10, workers that do not take rounds in-process "
     "(--no_in_process_restart: any script without the mxrun module)",
     kTrainer,
     {"rank 1 failed: Signal 9 (SIGKILL)", "", 0, 1, Recovery::kGroupRestart, "", 4,
      FinalState::kBitwise}},
    {30, "node-lost-trainer", "a node of a training job lost: the job goes on at a smaller world",
     "kill -9 of node 2's agent and worker at step 10 of a 2:3 trainer job",
     "train on 3 nodes x 1 worker (loopback, one master)",
     {"left (stream closed)", "", 0, 1, Recovery::kInProcess, "", 0, FinalState::kReported}},
};
// clang-format on

// The row of `id`; nullptr when the catalogue has none.
inline const Fault* FindFault(std::string_view id) {
  for (const Fault& fault : kCatalogue) {
    if (fault.id == id) return &fault;
  }
  return nullptr;
}

}  // namespace mxrun::faults

#include <catch2/catch.hpp>

#include "common/env_contract.h"
#include "common/visible_devices.h"

using mxrun::BuildWorkerEnv;
using mxrun::EnvMap;
using mxrun::GroupContract;

namespace {

GroupContract TwoNodesOfFour() {
  GroupContract g;
  g.node_rank = 1;
  g.num_nodes = 2;
  g.local_world_size = 4;
  g.global_rank_base = 4;
  g.world_size = 8;
  g.role_rank_base = 4;
  g.role_world_size = 8;
  g.master_addr = "10.0.0.1";
  g.master_port = 29555;
  g.restart_count = 2;
  g.max_restarts = 3;
  g.run_id = "job7";
  return g;
}

}  // namespace

TEST_CASE("every torchrun variable is set with torchrun's values", "[env]") {
  EnvMap env = BuildWorkerEnv({{"PATH", "/bin"}}, TwoNodesOfFour(), 3, {"/tmp/e.json", "h", ""});
  CHECK(env["LOCAL_RANK"] == "3");
  CHECK(env["RANK"] == "7");
  CHECK(env["GROUP_RANK"] == "1");
  CHECK(env["ROLE_RANK"] == "7");
  CHECK(env["ROLE_NAME"] == "default");
  CHECK(env["LOCAL_WORLD_SIZE"] == "4");
  CHECK(env["WORLD_SIZE"] == "8");
  CHECK(env["GROUP_WORLD_SIZE"] == "2");
  CHECK(env["ROLE_WORLD_SIZE"] == "8");
  CHECK(env["MASTER_ADDR"] == "10.0.0.1");
  CHECK(env["MASTER_PORT"] == "29555");
  CHECK(env["TORCHELASTIC_RESTART_COUNT"] == "2");
  CHECK(env["TORCHELASTIC_MAX_RESTARTS"] == "3");
  CHECK(env["TORCHELASTIC_RUN_ID"] == "job7");
  CHECK(env["TORCHELASTIC_USE_AGENT_STORE"] == "False");
  CHECK(env["TORCHELASTIC_ERROR_FILE"] == "/tmp/e.json");
  CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1");
  CHECK(env.count("NCCL_ASYNC_ERROR_HANDLING") == 0);  // 1.x's name: 2.x warns on every rank
  CHECK(env["OMP_NUM_THREADS"] == "1");
  CHECK(env["PATH"] == "/bin");  // the agent's environment is passed on
  CHECK(env["MXRUN_HOST"] == "h");
}

TEST_CASE("systemd's notification variables are not passed to workers", "[env]") {
  EnvMap env = BuildWorkerEnv({{"NOTIFY_SOCKET", "/run/x"},
                               {"WATCHDOG_USEC", "1"},
                               {"WATCHDOG_PID", "7"},
                               {"PATH", "/bin"}},
                              TwoNodesOfFour(), 0, {});
  CHECK(env.count("NOTIFY_SOCKET") == 0);
  CHECK(env.count("WATCHDOG_USEC") == 0);
  CHECK(env.count("WATCHDOG_PID") == 0);
  CHECK(env["PATH"] == "/bin");
}

TEST_CASE("a user's own choices are kept", "[env]") {
  EnvMap agent{{"OMP_NUM_THREADS", "8"},
               {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"},
               {"RANK", "99"},
               {"TORCHELASTIC_ERROR_FILE", "/agent/own.json"}};
  EnvMap env = BuildWorkerEnv(agent, TwoNodesOfFour(), 0, {});
  CHECK(env["OMP_NUM_THREADS"] == "8");
  CHECK(env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "0");
  CHECK(env["RANK"] == "4");                         // contract variables always win
  CHECK(env.count("TORCHELASTIC_ERROR_FILE") == 0);  // the agent's file is not the worker's
}

TEST_CASE("OMP_NUM_THREADS defaults only with more than one worker", "[env]") {
  GroupContract one;
  one.local_world_size = 1;
  CHECK(BuildWorkerEnv({}, one, 0, {}).count("OMP_NUM_THREADS") == 0);
  CHECK_FALSE(mxrun::ShouldDefaultOmpThreads({}, 1));
  CHECK(mxrun::ShouldDefaultOmpThreads({}, 2));
  CHECK_FALSE(mxrun::ShouldDefaultOmpThreads({{"OMP_NUM_THREADS", "4"}}, 2));
}

TEST_CASE("environ strings round-trip", "[env]") {
  const char* envp[] = {"A=1", "B=x=y", "NOEQUALS", nullptr};
  EnvMap env = mxrun::EnvFromStrings(envp);
  CHECK(env.size() == 2);
  CHECK(env["B"] == "x=y");
  CHECK(mxrun::EnvToStrings(env) == std::vector<std::string>{"A=1", "B=x=y"});
}

TEST_CASE("hang detection's variables: the heartbeat file, the timer pipe, NCCL's dump file",
          "[env][hang]") {
  mxrun::WorkerExtras extras;
  extras.heartbeat_file = "/scratch/attempt_0/1/heartbeat";
  extras.timer_file = "/scratch/watchdog_timer";
  extras.nccl_trace_prefix = "/logs/attempt_0/1/nccl_trace_rank_";
  EnvMap env =
      BuildWorkerEnv({{"MXRUN_HEARTBEAT_FILE", "/outer/launcher"}}, TwoNodesOfFour(), 1, extras);
  CHECK(env["MXRUN_HEARTBEAT_FILE"] == "/scratch/attempt_0/1/heartbeat");
  CHECK(env["TORCHELASTIC_TIMER_FILE"] == "/scratch/watchdog_timer");
  CHECK(env["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/logs/attempt_0/1/nccl_trace_rank_");
  // Off: an outer launcher's heartbeat file is not passed on; a user's NCCL dump path is kept.
  EnvMap off = BuildWorkerEnv({{"MXRUN_HEARTBEAT_FILE", "/outer/launcher"},
                               {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", "/mine/trace_"}},
                              TwoNodesOfFour(), 1, {"", "", "", "", "", "/logs/x_"});
  CHECK(off.count("MXRUN_HEARTBEAT_FILE") == 0);
  CHECK(off.count("TORCHELASTIC_TIMER_FILE") == 0);
  CHECK(off["TORCH_NCCL_DEBUG_INFO_TEMP_FILE"] == "/mine/trace_");
}

TEST_CASE("virtual local rank: LOCAL_RANK=0 and only the worker's own device", "[env][torchrun2]") {
  mxrun::WorkerExtras extras;
  extras.virtual_device = "GPU-bbb";
  EnvMap env =
      BuildWorkerEnv({{"CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb"}}, TwoNodesOfFour(), 1, extras);
  CHECK(env["LOCAL_RANK"] == "0");
  CHECK(env["RANK"] == "5");  // the global rank is still the worker's own
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "GPU-bbb");
  // Without it the parent's list is passed on untouched.
  env = BuildWorkerEnv({{"CUDA_VISIBLE_DEVICES", "GPU-aaa,GPU-bbb"}}, TwoNodesOfFour(), 1, {});
  CHECK(env["LOCAL_RANK"] == "1");
  CHECK(env["CUDA_VISIBLE_DEVICES"] == "GPU-aaa,GPU-bbb");
}

TEST_CASE("a local rank's device: its CUDA_VISIBLE_DEVICES entry, else its index",
          "[env][torchrun2]") {
  using mxrun::DeviceOfLocalRank;
  CHECK(DeviceOfLocalRank({}, 3) == "3");
  CHECK(DeviceOfLocalRank({{"CUDA_VISIBLE_DEVICES", "4,5, 6"}}, 2) == "6");
  CHECK(DeviceOfLocalRank({{"CUDA_VISIBLE_DEVICES", "GPU-1a2b,GPU-3c4d"}}, 1) == "GPU-3c4d");
  CHECK(DeviceOfLocalRank({{"CUDA_VISIBLE_DEVICES", "MIG-0f3a5e1e-1b2c-5d6e-8f90-a1b2c3d4e5f6"}},
                          0) == "MIG-0f3a5e1e-1b2c-5d6e-8f90-a1b2c3d4e5f6");
  CHECK_FALSE(DeviceOfLocalRank({{"CUDA_VISIBLE_DEVICES", "0,1"}}, 2).has_value());
  CHECK(mxrun::SplitVisibleDevices(" 0 ,1") == std::vector<std::string>{"0", "1"});
}

TEST_CASE("the rendezvous token never reaches a worker", "[env][secrets]") {
  EnvMap env =
      BuildWorkerEnv({{"MXRUN_RDZV_TOKEN", "s3cret"}, {"HOME", "/root"}}, TwoNodesOfFour(), 0, {});
  CHECK(env.count("MXRUN_RDZV_TOKEN") == 0);
  CHECK(env["HOME"] == "/root");
}

#include <catch2/catch.hpp>

#include "launcher/nproc.h"

using mxrun::CountVisibleDevices;
using mxrun::ResolveNprocPerNode;

TEST_CASE("CUDA_VISIBLE_DEVICES is counted as CUDA does", "[nproc]") {
  CHECK(CountVisibleDevices("0,1,2") == 3);
  CHECK(CountVisibleDevices("") == 0);
  CHECK(CountVisibleDevices("-1") == 0);
  CHECK(CountVisibleDevices("0,1,-1,3") == 2);
  CHECK(CountVisibleDevices("GPU-8932f937-d72c-4106-c12f-20bd9faed9f6,1") == 2);
}

TEST_CASE("nproc_per_node keywords resolve like torchrun", "[nproc]") {
  mxrun::DeviceCounter no_gpu{[] { return 0; }, [] { return 6; }};
  mxrun::DeviceCounter two_gpus{[] { return 2; }, [] { return 6; }};
  CHECK(*ResolveNprocPerNode("3", {}, no_gpu) == 3);
  CHECK(*ResolveNprocPerNode("cpu", {}, two_gpus) == 6);
  CHECK(*ResolveNprocPerNode("auto", {}, no_gpu) == 6);
  CHECK(*ResolveNprocPerNode("auto", {}, two_gpus) == 2);
  CHECK(*ResolveNprocPerNode("gpu", {}, two_gpus) == 2);
  CHECK(*ResolveNprocPerNode("gpu", {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}}, no_gpu) == 4);
  auto none = ResolveNprocPerNode("gpu", {}, no_gpu);
  REQUIRE_FALSE(none.ok());
  CHECK_THAT(std::string(none.status().message()), Catch::Contains("no NVIDIA GPU"));
  CHECK_FALSE(ResolveNprocPerNode("gpu", {{"CUDA_VISIBLE_DEVICES", ""}}, two_gpus).ok());
}

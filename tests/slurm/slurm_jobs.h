#pragma once
// Batch jobs on the tests' own Slurm (tests/slurm_cluster.h): sbatch of a one-line script on both
// nodes, its output file watched. Shared by slurm_test.cc and the fault catalogue's Slurm rows.

#include <chrono>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include "absl/strings/strip.h"
#include "tests/slurm_cluster.h"
#include "tests/subprocess.h"

namespace mxrun::testing {

// "Submitted batch job 12" -> "12"
inline std::string SubmittedId(const ProcessResult& r) {
  const std::string prefix = "Submitted batch job ";
  const size_t at = r.out.find(prefix);
  if (at == std::string::npos) return "";
  return std::string(absl::StripAsciiWhitespace(r.out.substr(at + prefix.size())));
}

// sbatch of a script wrapping `command`, its output in jobs()/NAME.out; returns the job id.
inline std::string Submit(const SlurmCluster& cluster, const std::string& name,
                          const std::string& command, std::vector<std::string> more = {}) {
  const std::string script = cluster.jobs() + "/" + name + ".sh";
  std::ofstream(script) << "#!/bin/sh\n" << command << "\n";
  std::vector<std::string> argv{"sbatch", "-N2", "--ntasks-per-node=1",
                                "--output=" + cluster.jobs() + "/" + name + ".out",
                                "--chdir=" + cluster.jobs()};
  argv.insert(argv.end(), more.begin(), more.end());
  argv.push_back(script);
  ProcessResult r = Run(argv, {}, std::chrono::seconds(30));
  INFO(Describe(r));
  REQUIRE(r.exit_code == 0);
  std::string id = SubmittedId(r);
  REQUIRE_FALSE(id.empty());
  return id;
}

// Waits (bounded) until `path` holds `count` lines containing `needle`.
inline bool WaitForLines(const std::string& path, const std::string& needle, int count,
                         std::chrono::seconds timeout = std::chrono::seconds(60)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (CountOccurrences(ReadFile(path), needle) >= count) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

}  // namespace mxrun::testing

#pragma once
// `mxrun status`'s settings on the flag engine (flags/flag_engine.h): flags, MXRUN_<FLAG> and
// PET_<FLAG> as for the job itself (so a shell that has the job's MXRUN_RDZV_ENDPOINT asks the
// job's master), and --config with the job's own file (its launch keys are ignored here).

#include <map>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace mxrun {

struct StatusFlags {
  std::string endpoint;   // the master's HOST[:PORT], or with etcd the etcd members
  std::string run_id;     // only this run (empty: every run)
  bool etcd = false;      // find the master elected in etcd
  std::string rdzv_conf;  // the agents' k=v,k=v (TLS files, token_file, etcd's)
  double timeout_s = 5;
  bool json = false;
  std::optional<double> watch_s;  // --watch: show it again every this many seconds
};

struct StatusFlagsResult {
  std::optional<StatusFlags> flags;  // absent when `text` is to be printed (exit 0)
  std::string text;                  // --help, --print-config
};

// argv[0] is "mxrun" and argv[1] "status".
absl::StatusOr<StatusFlagsResult> ResolveStatusFlags(int argc, const char* const* argv,
                                                     const std::map<std::string, std::string>& env);

}  // namespace mxrun

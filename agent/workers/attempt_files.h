#pragma once
// One attempt's folder and files: attempt_<N>/ under the spec's folder, a folder per local rank
// with its error, heartbeat and log files, and the attempt's filtered files
// (--duplicate-std*-filters) that every rank's relays share.

#include <string>

#include "agent/workers/output_relay.h"
#include "agent/workers/worker_process.h"
#include "agent/workers/worker_spec.h"

namespace mxrun {

class AttemptFiles {
 public:
  explicit AttemptFiles(const WorkerSpec& spec);
  ~AttemptFiles();
  AttemptFiles(const AttemptFiles&) = delete;
  AttemptFiles& operator=(const AttemptFiles&) = delete;

  // Attempt `attempt` begins: its filtered files are opened (the last attempt's closed).
  void Begin(int attempt);
  std::string Dir() const;  // attempt_<N>
  // `worker`'s folder and the files it is told about (a stale error or heartbeat file from an
  // earlier run removed, so that it is not reported or counted as a beat).
  void PrepareRank(WorkerProcess& worker) const;
  // The filtered file of stderr or stdout (its fd is -1 when none is asked for).
  LineDuplicate* Duplicate(bool is_stderr) { return is_stderr ? &err_ : &out_; }
  // A log file, truncated, appended to; -1 (said why) when it cannot be opened.
  static int OpenLog(const std::string& path);

 private:
  void Close();

  const WorkerSpec& spec_;
  int attempt_ = 0;
  LineDuplicate out_;  // attempt_<N>/filtered_stdout.log
  LineDuplicate err_;  // attempt_<N>/filtered_stderr.log
};

}  // namespace mxrun

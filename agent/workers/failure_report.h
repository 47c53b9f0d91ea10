#pragma once
// Reading what a failed worker left behind (its TORCHELASTIC_ERROR_FILE, in the JSON shape of
// PyTorch's @record) and presenting the job's failure: the console summary and the agent's own
// error file.

#include <optional>
#include <string>

#include "common/worker_failure.h"

namespace mxrun {

struct ErrorFileContents {
  std::string message;    // message.message (or message, when it is a plain string)
  std::string traceback;  // message.extraInfo.py_callstack
  std::string raw;        // the file as read, for copying into the agent's own error file
};

// nullopt when the file does not exist or is empty. A file that is not valid JSON still yields
// its first bytes as the message, so nothing the worker wrote is lost.
std::optional<ErrorFileContents> ReadErrorFile(const std::string& path);

struct SummaryContext {
  std::string entrypoint;  // what the job ran, for the headline
  int restarts_spent = 0;
  int max_restarts = 0;
};

// The multi-line summary printed to stderr when the job fails.
std::string FormatFailureSummary(const WorkerFailure& failure, const SummaryContext& context);

// The agent's own TORCHELASTIC_ERROR_FILE: the worker's error file when it wrote one (as torchrun
// copies it), otherwise the @record shape built from `failure`; in both cases with an "mxrun"
// object naming the failed worker. Returns false when the file could not be written.
bool WriteAgentErrorFile(const std::string& path, const WorkerFailure& failure);

// The job failed: the summary on stderr (one JSON log record with `json_logs`), and the agent's
// error file when one is asked for (`agent_error_file`; empty: none).
void ReportJobFailure(const WorkerFailure& failure, const SummaryContext& context, bool json_logs,
                      const std::string& agent_error_file);

}  // namespace mxrun

#include "agent/workers/failure_report.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "common/signal_names.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

constexpr size_t kMaxErrorFileBytes = 1 << 20;

std::string FormatTime(std::chrono::system_clock::time_point time) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromChrono(time), absl::UTCTimeZone());
}

void AppendIndented(std::string& out, absl::string_view text, absl::string_view indent) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    absl::StrAppend(&out, indent, line, "\n");
  }
}

}  // namespace

std::optional<ErrorFileContents> ReadErrorFile(const std::string& path) {
  if (path.empty()) return std::nullopt;
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::string raw(kMaxErrorFileBytes, '\0');
  in.read(raw.data(), static_cast<std::streamsize>(raw.size()));
  raw.resize(static_cast<size_t>(in.gcount()));
  if (raw.empty()) return std::nullopt;

  ErrorFileContents contents;
  contents.raw = raw;
  nlohmann::json doc = nlohmann::json::parse(raw, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("message")) {
    contents.message = absl::StrCat("(not in the @record JSON shape) ", raw.substr(0, 2000));
    return contents;
  }
  const nlohmann::json& message = doc["message"];
  if (message.is_string()) {
    contents.message = message.get<std::string>();
  } else if (message.is_object()) {
    if (message.contains("message") && message["message"].is_string()) {
      contents.message = message["message"].get<std::string>();
    }
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      const nlohmann::json& extra = message["extraInfo"];
      if (extra.contains("py_callstack") && extra["py_callstack"].is_string()) {
        contents.traceback = extra["py_callstack"].get<std::string>();
      }
    }
  } else {
    contents.message = message.dump();
  }
  return contents;
}

std::string FormatFailureSummary(const WorkerFailure& f, const SummaryContext& context) {
  const std::string rule(68, '=');
  std::string out;
  absl::StrAppend(&out, rule, "\n");
  absl::StrAppend(&out, "mxrun: ", context.entrypoint,
                  " FAILED (restarts spent: ", context.restarts_spent, " of ", context.max_restarts,
                  ")\n");
  absl::StrAppend(&out, std::string(68, '-'), "\n");
  absl::StrAppend(&out, "Root cause (first observed failure):\n");
  absl::StrAppend(&out, "  time       : ", FormatTime(f.time), "\n");
  absl::StrAppend(&out, "  host       : ", f.host, "\n");
  absl::StrAppend(&out, "  node rank  : ", f.node_rank, "\n");
  absl::StrAppend(&out, "  rank       : ", f.global_rank, " (local_rank: ", f.local_rank, ")\n");
  absl::StrAppend(&out, "  pid        : ", f.pid, "\n");
  absl::StrAppend(&out, "  attempt    : ", f.attempt, "\n");
  absl::StrAppend(&out, "  exit       : ", DescribeExit(f), "\n");
  if (f.hang.hung() && f.hang.rule != kStragglerRule) {  // a straggler is slow, not stuck
    absl::StrAppend(&out, "  diagnostics: ",
                    f.hang.diagnostics_dir.empty() ? "<not written>" : f.hang.diagnostics_dir,
                    f.hang.diagnostics_dir.empty() ? "" : " (on that host)", "\n");
    if (!f.hang.diagnostics.empty()) {
      absl::StrAppend(&out, "  hang state :\n");
      for (const std::string& line : f.hang.diagnostics)
        absl::StrAppend(&out, "      ", line, "\n");
    }
  }
  if (!f.collective_sign.empty()) {  // a collective failed: its peers' recorders, taken then
    absl::StrAppend(&out, "  collective : failed (\"", f.collective_sign, "\")\n");
    if (!f.flight_dir.empty()) {
      absl::StrAppend(&out, "  diagnostics: ", f.flight_dir, " (on that host)\n");
    }
    for (const std::string& line : f.flight) absl::StrAppend(&out, "      ", line, "\n");
  }
  absl::StrAppend(&out, "  error_file : ", f.error_file.empty() ? "<N/A>" : f.error_file, "\n");
  if (!f.message.empty()) {
    absl::StrAppend(&out, "  message    :\n");
    AppendIndented(out, f.message, "      ");
  }
  if (!f.traceback.empty()) {
    absl::StrAppend(&out, "  traceback  :\n");
    AppendIndented(out, f.traceback, "      ");
  }
  if (!f.last_lines.empty()) {
    absl::StrAppend(&out, "  last output lines of rank ", f.global_rank, ":\n");
    for (const std::string& line : f.last_lines) absl::StrAppend(&out, "      ", line, "\n");
  }
  absl::StrAppend(&out, rule, "\n");
  return out;
}

bool WriteAgentErrorFile(const std::string& path, const WorkerFailure& failure) {
  nlohmann::json doc;
  if (!failure.error_file_contents.empty()) {
    doc = nlohmann::json::parse(failure.error_file_contents, nullptr, /*allow_exceptions=*/false);
  }
  if (doc.is_discarded() || !doc.is_object()) {
    doc = nlohmann::json::object();
  }
  if (!doc.contains("message")) {
    std::string text =
        absl::StrCat("worker rank ", failure.global_rank, " (local_rank ", failure.local_rank,
                     ", pid ", failure.pid, ") failed: ", DescribeExit(failure));
    doc["message"] = {
        {"message", text},
        {"extraInfo",
         {{"py_callstack", absl::StrJoin(failure.last_lines, "\n")},
          {"timestamp", std::to_string(std::chrono::duration_cast<std::chrono::seconds>(
                                           failure.time.time_since_epoch())
                                           .count())}}}};
  }
  doc["mxrun"] = {{"host", failure.host},
                  {"node_rank", failure.node_rank},
                  {"rank", failure.global_rank},
                  {"local_rank", failure.local_rank},
                  {"pid", failure.pid},
                  {"attempt", failure.attempt},
                  {"exitcode", failure.term_signal > 0 ? -failure.term_signal : failure.exit_code},
                  {"signal", failure.term_signal > 0 ? SignalName(failure.term_signal) : ""},
                  {"error_file", failure.error_file}};
  if (failure.hang.hung()) {
    doc["mxrun"]["hang"] = {{"rule", failure.hang.rule},
                            {"detail", failure.hang.detail},
                            {"diagnostics_dir", failure.hang.diagnostics_dir},
                            {"diagnostics", failure.hang.diagnostics}};
  }
  if (!failure.collective_sign.empty()) {
    doc["mxrun"]["collective"] = {{"sign", failure.collective_sign},
                                  {"diagnostics_dir", failure.flight_dir},
                                  {"flight_recorder", failure.flight}};
  }
  std::ofstream out(path, std::ios::trunc);
  if (!out) return false;
  out << doc.dump(2) << "\n";
  return static_cast<bool>(out);
}

void ReportJobFailure(const WorkerFailure& failure, const SummaryContext& context, bool json_logs,
                      const std::string& agent_error_file) {
  const std::string summary = FormatFailureSummary(failure, context);
  if (json_logs) {
    spdlog::error("{}", summary);  // one JSON record; the summary's lines stay in its message
  } else {
    std::fwrite(summary.data(), 1, summary.size(), stderr);
  }
  std::fflush(stderr);
  if (!agent_error_file.empty() && !WriteAgentErrorFile(agent_error_file, failure)) {
    spdlog::warn("cannot write the error file {}", agent_error_file);
  }
}

}  // namespace mxrun

// libFuzzer target: what a worker sends its agent, on arbitrary bytes: its control channel's
// stream cut into lines (agent/workers/control_lines), each line as a control message
// (common/control_protocol), a round notice as a worker reads it, and a FileTimer request line
// (agent/hang/file_timer). Invariants after every input, not only "no crash": the stream gives
// the same lines however it is cut into reads, none over the bound; an accepted message has the
// ranges the protocol promises and, written out again, parses to the same; a refused one says why.

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include "agent/hang/file_timer.h"
#include "agent/workers/control_lines.h"
#include "common/control_protocol.h"

namespace {

void Check(bool holds) {
  if (!holds) std::abort();  // an invariant broken: libFuzzer keeps the input
}

struct Split {
  std::vector<std::string> lines;
  std::vector<size_t> oversize;
};

// The stream fed in reads of `chunk` bytes (0: all at once).
Split Feed(const std::string& stream, size_t max_line, size_t chunk) {
  mxrun::ControlLines reader(max_line);
  Split out;
  const size_t step = chunk == 0 ? stream.size() + 1 : chunk;
  for (size_t at = 0; at < stream.size(); at += step) {
    reader.Feed(
        std::string_view(stream).substr(at, step),
        [&](std::string_view line) { out.lines.emplace_back(line); },
        [&](size_t bytes) { out.oversize.push_back(bytes); });
  }
  return out;
}

void CheckMessage(const std::string& line) {
  mxrun::WorkerControlMessage m;
  try {
    m = mxrun::ParseWorkerControlLine(line);
  } catch (const std::invalid_argument& e) {
    Check(std::string(e.what()).size() > 0);
    return;
  }
  using Kind = mxrun::WorkerControlMessage::Kind;
  if (m.kind == Kind::kHello) {
    Check(m.version >= 1);
    const auto again = mxrun::ParseWorkerControlLine(mxrun::HelloLine(m.in_process_restart));
    Check(again.kind == Kind::kHello && again.in_process_restart == m.in_process_restart);
  } else if (m.kind == Kind::kJoined) {
    Check(m.round >= 0);
    const auto again = mxrun::ParseWorkerControlLine(mxrun::JoinedLine(m.round));
    Check(again.kind == Kind::kJoined && again.round == m.round);
  } else {
    Check(m.step >= 0);
    Check(m.step_seconds == -1 ||
          (std::isfinite(m.step_seconds) && m.step_seconds >= 0 && m.step_seconds <= 1e6));
    const auto again = mxrun::ParseWorkerControlLine(mxrun::ProgressLine(m.step, m.step_seconds));
    Check(again.kind == Kind::kProgress && again.step == m.step);
    Check(again.step_seconds == m.step_seconds);  // JSON numbers round-trip doubles exactly
  }
}

void CheckRoundNotice(const std::string& line) {
  mxrun::RoundNotice notice;
  try {
    notice = mxrun::ParseRoundNoticeLine(line);
  } catch (const std::invalid_argument& e) {
    Check(std::string(e.what()).size() > 0);
    return;
  }
  Check(notice.round >= 0);
  const mxrun::RoundNotice again = mxrun::ParseRoundNoticeLine(mxrun::RoundNoticeLine(notice));
  Check(again.round == notice.round && again.env == notice.env);
  Check(again.failure_time == notice.failure_time ||
        (std::isnan(again.failure_time) && std::isnan(notice.failure_time)));
}

void CheckTimerLine(const std::string& line) {
  absl::StatusOr<mxrun::FileTimerRequest> request = mxrun::ParseFileTimerLine(line);
  if (!request.ok()) {
    Check(!request.status().message().empty());
    return;
  }
  Check(request->pid > 0);
  Check(request->signal >= 0 && request->signal < 65);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string stream(reinterpret_cast<const char*>(data), size);
  // A small bound, so that oversize lines are common; the first byte picks the read size.
  const size_t max_line = 64;
  const Split whole = Feed(stream, max_line, 0);
  const Split cut = Feed(stream, max_line, size > 0 ? 1 + data[0] % 17 : 1);
  Check(whole.lines == cut.lines && whole.oversize == cut.oversize);
  for (const std::string& line : whole.lines) {
    Check(line.size() <= max_line && line.find('\n') == std::string::npos);
  }
  for (size_t bytes : whole.oversize) Check(bytes > max_line);
  // Each line as a worker's message (and the whole input as one, as the agent's 64 KiB allows).
  for (const std::string& line : whole.lines) CheckMessage(line);
  CheckMessage(stream);
  CheckRoundNotice(stream);
  CheckTimerLine(stream);
  return 0;
}

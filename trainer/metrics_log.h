#pragma once
// Training metrics as JSON lines (--metrics_file), appended and flushed one record at a time so a
// crash loses at most the line being written and a restarted run keeps appending. Every record
// carries `time`, the wall clock in seconds since the Unix epoch, so goodput (time spent on steps
// that count) can be read from the log alone. Sinks (the TensorBoard writer) see each record as
// it is written.

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace mxrun::trainer {

// Seconds since the Unix epoch; injected so tests control `time`.
using WallClock = std::function<double()>;
double SystemWallClock();

class MetricsLog {
 public:
  using Sink = std::function<void(const nlohmann::json& record)>;

  // An empty path writes no file (sinks still get records). Throws std::runtime_error when the
  // file cannot be opened for appending.
  explicit MetricsLog(const std::string& path, WallClock clock = SystemWallClock);

  // Stamps `record` with `time` (unless it has one), writes it, then hands it to every sink.
  void Append(nlohmann::json record);
  void AddSink(Sink sink) { sinks_.push_back(std::move(sink)); }
  double Now() const { return clock_(); }

 private:
  std::unique_ptr<FILE, int (*)(FILE*)> file_;
  WallClock clock_;
  std::vector<Sink> sinks_;
};

}  // namespace mxrun::trainer

#include "trainer/metrics_log.h"

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace mxrun::trainer {

double SystemWallClock() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

MetricsLog::MetricsLog(const std::string& path, WallClock clock)
    : file_(nullptr, &std::fclose), clock_(std::move(clock)) {
  if (path.empty()) return;
  file_.reset(std::fopen(path.c_str(), "a"));
  if (!file_) {
    throw std::runtime_error("cannot open --metrics_file " + path +
                             " for appending: " + std::strerror(errno));
  }
}

void MetricsLog::Append(nlohmann::json record) {
  if (!record.contains("time")) record["time"] = clock_();
  if (file_) {
    const std::string line = record.dump() + "\n";
    std::fwrite(line.data(), 1, line.size(), file_.get());
    std::fflush(file_.get());
  }
  for (const Sink& sink : sinks_) sink(record);
}

}  // namespace mxrun::trainer

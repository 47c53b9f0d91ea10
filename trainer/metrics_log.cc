#include "trainer/metrics_log.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace mxrun::trainer {

MetricsLog::MetricsLog(const std::string& path) : file_(nullptr, &std::fclose) {
  if (path.empty()) return;
  file_.reset(std::fopen(path.c_str(), "a"));
  if (!file_) {
    throw std::runtime_error("cannot open --metrics_file " + path + " for appending: " +
                             std::strerror(errno));
  }
}

void MetricsLog::Append(const nlohmann::json& record) {
  if (!file_) return;
  const std::string line = record.dump() + "\n";
  std::fwrite(line.data(), 1, line.size(), file_.get());
  std::fflush(file_.get());
}

}  // namespace mxrun::trainer

#pragma once
// Training metrics as JSON lines (--metrics_file), appended and flushed one record at a time so a
// crash loses at most the line being written and a restarted run keeps appending.

#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace mxrun::trainer {

class MetricsLog {
 public:
  // An empty path makes a log that drops everything. Throws std::runtime_error when the file
  // cannot be opened for appending.
  explicit MetricsLog(const std::string& path);
  void Append(const nlohmann::json& record);

 private:
  std::unique_ptr<FILE, int (*)(FILE*)> file_;
};

}  // namespace mxrun::trainer

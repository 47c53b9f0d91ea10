#include "trainer/error_file.h"

#include <ctime>
#include <fstream>

#include <nlohmann/json.hpp>

namespace mxrun::trainer {

std::string ErrorFileJson(const std::string& type, const std::string& what,
                          const std::string& context, long long unix_seconds) {
  nlohmann::json doc;
  doc["message"]["message"] = type + ": " + what;
  doc["message"]["extraInfo"]["py_callstack"] = context;
  doc["message"]["extraInfo"]["timestamp"] = std::to_string(unix_seconds);
  // Replace invalid UTF-8 (an exception text may carry raw bytes) rather than throw while
  // reporting an error.
  return doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

bool WriteErrorFile(const std::string& path, const std::string& type, const std::string& what,
                    const std::string& context) {
  std::ofstream out(path, std::ios::trunc);
  out << ErrorFileJson(type, what, context, static_cast<long long>(std::time(nullptr)));
  out.close();
  return static_cast<bool>(out);
}

}  // namespace mxrun::trainer

#include "launcher/log_setup.h"

#include <memory>
#include <string>
#include <string_view>

#include "agent/workers/json_quote.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

// %* in a pattern: the message as a JSON string (quoted and escaped; bad UTF-8 replaced).
class JsonMessageFlag : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg& msg, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    const std::string text = JsonQuote(std::string_view(msg.payload.data(), msg.payload.size()));
    dest.append(text.data(), text.data() + text.size());
  }
  std::unique_ptr<custom_flag_formatter> clone() const override {
    return std::make_unique<JsonMessageFlag>();
  }
};

}  // namespace

void ConfigureLogging(bool json) {
  // The colour sink colours only when stderr is a terminal (systemd's journal gets plain text).
  auto logger = spdlog::stderr_color_st("mxrun");
  if (json) {
    auto formatter = std::make_unique<spdlog::pattern_formatter>();
    formatter->add_flag<JsonMessageFlag>('*').set_pattern(
        R"({"time":"%Y-%m-%dT%H:%M:%S.%e%z","level":"%l","source":"mxrun","message":%*})");
    logger->set_formatter(std::move(formatter));
  } else {
    logger->set_pattern("mxrun: %^%l%$: %v");
  }
  spdlog::set_default_logger(logger);
}

}  // namespace mxrun

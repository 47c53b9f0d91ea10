#include "agent/workers/json_quote.h"

#include <nlohmann/json.hpp>

namespace mxrun {

std::string JsonQuote(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', /*ensure_ascii=*/false, nlohmann::json::error_handler_t::replace);
}

}  // namespace mxrun

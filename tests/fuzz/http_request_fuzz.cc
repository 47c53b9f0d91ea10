// libFuzzer target: the HTTP request head every mxrun HTTP port parses (common/http/http_server)
// on arbitrary bytes, and the response it formats. Invariants after every input, not only "no
// crash": an accepted request is GET or HEAD with a path starting with '/' and lower-case token
// header names, and written out again it parses to the same request; a refused one has a status
// of 400, 405 or 505 and a message; a response's Content-Length is its body's length.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <variant>

#include "common/http/http_server.h"

namespace {

void Check(bool holds) {
  if (!holds) std::abort();  // an invariant broken: libFuzzer keeps the input
}

bool IsLowerToken(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    std::string("!#$%&'*+-.^_`|~").find(c) != std::string::npos;
    if (!ok) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string head(reinterpret_cast<const char*>(data), size);
  auto parsed = mxrun::ParseHttpRequestHead(head);
  if (auto* error = std::get_if<mxrun::HttpParseError>(&parsed)) {
    Check(error->status == 400 || error->status == 405 || error->status == 505);
    Check(!error->message.empty());
    const std::string response = mxrun::FormatHttpResponse(
        {error->status, "text/plain; charset=utf-8", error->message + "\n"}, false);
    Check(response.rfind("HTTP/1.1 " + std::to_string(error->status) + " ", 0) == 0);
    Check(response.find("Content-Length: " + std::to_string(error->message.size() + 1) + "\r\n") !=
          std::string::npos);
    return 0;
  }
  const mxrun::HttpRequest& request = std::get<mxrun::HttpRequest>(parsed);
  Check(request.method == "GET" || request.method == "HEAD");
  Check(!request.path.empty() && request.path[0] == '/');
  Check(request.path.find('?') == std::string::npos);
  std::string again = request.method + " " + request.path +
                      (request.query.empty() ? "" : "?" + request.query) + " HTTP/1.1\r\n";
  for (const auto& [name, value] : request.headers) {
    Check(IsLowerToken(name));
    again += name + ": " + value + "\r\n";
  }
  again += "\r\n";
  auto reparsed = mxrun::ParseHttpRequestHead(again);
  Check(std::holds_alternative<mxrun::HttpRequest>(reparsed));
  const mxrun::HttpRequest& second = std::get<mxrun::HttpRequest>(reparsed);
  Check(second.method == request.method && second.path == request.path &&
        second.query == request.query && second.headers == request.headers);
  // HEAD: the headers only, with the length the body would have.
  const std::string body = request.query;
  const std::string head_only = mxrun::FormatHttpResponse({200, "text/plain", body}, true);
  Check(head_only.size() >= 4 && head_only.substr(head_only.size() - 4) == "\r\n\r\n");
  Check(head_only.find("Content-Length: " + std::to_string(body.size()) + "\r\n") !=
        std::string::npos);
  return 0;
}

#include "common/control_protocol.h"

#include <sys/socket.h>

#include <cerrno>
#include <stdexcept>

#include <nlohmann/json.hpp>

namespace mxrun {
namespace {

using nlohmann::json;

json ParseObject(std::string_view line, const char* who) {
  json message = json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!message.is_object()) {
    throw std::invalid_argument(std::string(who) + " control line is not a JSON object: '" +
                                std::string(line.substr(0, 200)) + "'");
  }
  return message;
}

int IntField(const json& message, const char* key) {
  const json& value = message.at(key);
  if (!value.is_number_integer() || value.get<long long>() < 0 ||
      value.get<long long>() > 1'000'000'000) {
    throw std::invalid_argument(std::string("control message field '") + key +
                                "' must be a non-negative integer, got " + value.dump());
  }
  return value.get<int>();
}

// A progress report's optional time in seconds (0 to 1e6); -1 when not given.
double OptionalSeconds(const json& message, const char* key) {
  auto it = message.find(key);
  if (it == message.end()) return -1;
  if (!it->is_number() || it->get<double>() < 0 || it->get<double>() > 1e6) {
    throw std::invalid_argument(std::string("progress field '") + key +
                                "' must be a number of seconds from 0 to 1e6, got " + it->dump());
  }
  return it->get<double>();
}

}  // namespace

std::string HelloLine(bool in_process_restart) {
  return json{{"hello", kControlProtocolVersion}, {"in_process_restart", in_process_restart}}
      .dump();
}

std::string JoinedLine(int round) { return json{{"joined", round}}.dump(); }

std::string LeavingLine() { return json{{"leaving", true}}.dump(); }

std::string ProgressLine(long long step, double step_seconds) {
  json message{{"step", step}};
  if (step_seconds >= 0) message["step_seconds"] = step_seconds;
  return message.dump();
}

WorkerControlMessage ParseWorkerControlLine(std::string_view line) {
  const json message = ParseObject(line, "a worker's");
  WorkerControlMessage out;
  if (auto it = message.find("leaving"); it != message.end()) {
    if (!it->is_boolean() || !it->get<bool>()) {
      throw std::invalid_argument("'leaving' must be true, got " + it->dump());
    }
    out.kind = WorkerControlMessage::Kind::kLeaving;
    return out;
  }
  if (message.contains("hello")) {
    out.kind = WorkerControlMessage::Kind::kHello;
    out.version = IntField(message, "hello");
    if (out.version < 1) throw std::invalid_argument("control protocol version must be >= 1");
    if (auto it = message.find("in_process_restart"); it != message.end()) {
      if (!it->is_boolean()) {
        throw std::invalid_argument("'in_process_restart' must be true or false, got " +
                                    it->dump());
      }
      out.in_process_restart = it->get<bool>();
    }
    return out;
  }
  if (message.contains("joined")) {
    out.kind = WorkerControlMessage::Kind::kJoined;
    out.round = IntField(message, "joined");
    return out;
  }
  if (message.contains("step")) {
    out.kind = WorkerControlMessage::Kind::kProgress;
    const json& step = message.at("step");
    if (!step.is_number_integer() || step.get<long long>() < 0 ||
        step.get<long long>() > 1'000'000'000'000'000LL) {
      throw std::invalid_argument("progress field 'step' must be a non-negative integer, got " +
                                  step.dump());
    }
    out.step = step.get<long long>();
    out.step_seconds = OptionalSeconds(message, "step_seconds");
    out.busy_seconds = OptionalSeconds(message, "busy_seconds");
    if (auto it = message.find("auto"); it != message.end()) {
      if (!it->is_boolean()) {
        throw std::invalid_argument("progress field 'auto' must be true or false, got " +
                                    it->dump());
      }
      out.automatic = it->get<bool>();
    }
    return out;
  }
  throw std::invalid_argument(
      "unknown control message from a worker (expected \"hello\", "
      "\"joined\", \"step\" or \"leaving\"): " +
      std::string(line.substr(0, 200)));
}

std::string RoundNoticeLine(const RoundNotice& notice) {
  return json{{"round", notice.round}, {"env", notice.env}, {"failure_time", notice.failure_time}}
      .dump();
}

RoundNotice ParseRoundNoticeLine(std::string_view line) {
  const json message = ParseObject(line, "the agent's");
  if (!message.contains("round")) {
    throw std::invalid_argument("unknown control message from the agent (expected \"round\"): " +
                                std::string(line.substr(0, 200)));
  }
  RoundNotice notice;
  notice.round = IntField(message, "round");
  const auto env = message.find("env");
  if (env == message.end() || !env->is_object()) {
    throw std::invalid_argument("a round notice needs \"env\", an object of strings");
  }
  for (const auto& [key, value] : env->items()) {
    if (!value.is_string()) {
      throw std::invalid_argument("round notice: env." + key + " must be a string, got " +
                                  value.dump());
    }
    notice.env[key] = value.get<std::string>();
  }
  if (auto t = message.find("failure_time"); t != message.end()) {
    if (!t->is_number()) throw std::invalid_argument("'failure_time' must be a number");
    notice.failure_time = t->get<double>();
  }
  return notice;
}

bool SendControlLine(int fd, std::string_view line) {
  std::string text(line);
  text.push_back('\n');
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace mxrun

#include "agent/hang/file_timer.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/strings.h"
#include "nlohmann/json.hpp"

namespace mxrun {

absl::StatusOr<FileTimerRequest> ParseFileTimerLine(std::string_view line) {
  if (line.size() > kMaxFileTimerLine) {
    return absl::InvalidArgumentError(
        absl::StrCat("longer than ", kMaxFileTimerLine, " bytes (PIPE_BUF)"));
  }
  // Python's json writes an infinite float as Infinity, which is not JSON: a timer acquired with
  // `expires(after=float("inf"))` never expires (torchrun reads it so), and -Infinity releases.
  std::string text(line);
  for (const auto& [from, to] : {std::pair<const char*, const char*>{
                                     "\"expiration_time\": -Infinity", "\"expiration_time\": -1"},
                                 {"\"expiration_time\": Infinity", "\"expiration_time\": 1e308"}}) {
    if (size_t at = text.find(from); at != std::string::npos) {
      text.replace(at, std::strlen(from), to);
    }
  }
  if (text.find("\"expiration_time\": NaN") != std::string::npos) {
    return absl::InvalidArgumentError("'expiration_time' is NaN");
  }
  nlohmann::json doc = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded() || !doc.is_object()) {
    return absl::InvalidArgumentError("not a JSON object");
  }
  auto field = [&doc](const char* name) -> const nlohmann::json* {
    auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  const nlohmann::json* version = field("version");
  if (version == nullptr || !version->is_number_integer() || version->get<long long>() != 1) {
    return absl::InvalidArgumentError("'version' must be 1");
  }
  FileTimerRequest request;
  const nlohmann::json* pid = field("pid");
  if (pid == nullptr || !pid->is_number_integer() ||
      (pid->is_number_unsigned() && pid->get<unsigned long long>() > INT_MAX) ||
      pid->get<long long>() <= 0 || pid->get<long long>() > INT_MAX) {
    return absl::InvalidArgumentError("'pid' must be a process id (an integer > 0)");
  }
  request.pid = static_cast<pid_t>(pid->get<long long>());
  const nlohmann::json* scope = field("scope_id");
  if (scope == nullptr || !scope->is_string()) {
    return absl::InvalidArgumentError("'scope_id' must be a string");
  }
  request.scope_id = scope->get<std::string>();
  const nlohmann::json* expiration = field("expiration_time");
  if (expiration == nullptr || !expiration->is_number() ||
      !std::isfinite(expiration->get<double>())) {
    return absl::InvalidArgumentError(
        "'expiration_time' must be a number (seconds since the epoch; negative to release)");
  }
  request.expiration_time = expiration->get<double>();
  const nlohmann::json* signo = field("signal");
  if (signo == nullptr || !signo->is_number_integer() ||
      (signo->is_number_unsigned() && signo->get<unsigned long long>() > 1024) ||
      signo->get<long long>() > SIGRTMAX || signo->get<long long>() < INT_MIN) {
    return absl::InvalidArgumentError(
        absl::StrCat("'signal' must be an integer up to ", SIGRTMAX, " (<= 0: do not kill)"));
  }
  request.signal = std::max(0, static_cast<int>(signo->get<long long>()));
  return request;
}

absl::StatusOr<std::unique_ptr<FileTimerPipe>> FileTimerPipe::Create(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) == 0) {
    if (!S_ISFIFO(st.st_mode)) {
      return absl::FailedPreconditionError(
          absl::StrCat("TORCHELASTIC_TIMER_FILE=", path,
                       " exists and is not a named pipe; remove it or name "
                       "another path (mxrun creates the pipe there)"));
    }
    unlink(path.c_str());  // a pipe left by an earlier run, as torchrun replaces it
  }
  if (mkfifo(path.c_str(), 0600) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "cannot create the FileTimer pipe TORCHELASTIC_TIMER_FILE=", path, ": ", ErrnoText(errno)));
  }
  // Read end first: a non-blocking open for writing fails (ENXIO) while nobody reads.
  const int read_fd = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  const int write_fd = read_fd < 0 ? -1 : open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (read_fd < 0 || write_fd < 0) {
    const std::string error = ErrnoText(errno);
    if (read_fd >= 0) close(read_fd);
    unlink(path.c_str());
    return absl::InternalError(absl::StrCat("cannot open the FileTimer pipe ", path, ": ", error));
  }
  return std::unique_ptr<FileTimerPipe>(new FileTimerPipe(path, read_fd, write_fd));
}

FileTimerPipe::~FileTimerPipe() {
  close(read_fd_);
  close(write_fd_);
  unlink(path_.c_str());
}

void FileTimerPipe::OnReadable(
    const std::function<void(const absl::StatusOr<FileTimerRequest>&, std::string_view)>& on_line) {
  char buffer[16384];
  // Bounded: at most 64 reads a call, so a flood of requests cannot starve the agent's loop (what
  // is left is read on the next turn).
  for (int reads = 0; reads < 64; ++reads) {
    const ssize_t n = read(read_fd_, buffer, sizeof buffer);
    if (n <= 0) return;  // EAGAIN (drained) or EINTR; we hold a write end, so never EOF
    std::string_view data(buffer, static_cast<size_t>(n));
    while (!data.empty()) {
      const size_t newline = data.find('\n');
      const std::string_view piece = data.substr(0, newline);
      if (!oversize_) {
        partial_.append(piece.data(), std::min(piece.size(), kMaxFileTimerLine + 1));
        if (partial_.size() > kMaxFileTimerLine) {
          oversize_ = true;
          on_line(absl::InvalidArgumentError(
                      absl::StrCat("longer than ", kMaxFileTimerLine, " bytes (PIPE_BUF)")),
                  std::string_view(partial_).substr(0, 200));
          partial_.clear();
        }
      }
      if (newline == std::string_view::npos) break;
      if (!oversize_ && !partial_.empty()) on_line(ParseFileTimerLine(partial_), partial_);
      partial_.clear();
      oversize_ = false;
      data.remove_prefix(newline + 1);
    }
  }
}

}  // namespace mxrun

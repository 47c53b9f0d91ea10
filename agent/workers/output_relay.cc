#include "agent/workers/output_relay.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "agent/workers/console_collapser.h"
#include "agent/workers/console_line.h"
#include "agent/workers/line_prefix.h"
#include "spdlog/spdlog.h"

namespace mxrun {

void LineAssembler::Feed(std::string_view data, const std::function<void(std::string_view)>& emit) {
  while (!data.empty()) {
    size_t newline = data.find('\n');
    if (newline == std::string_view::npos) {
      partial_.append(data);
      while (partial_.size() >= kMaxLine) {
        emit(std::string_view(partial_).substr(0, kMaxLine));
        partial_.erase(0, kMaxLine);
      }
      return;
    }
    if (partial_.empty()) {
      emit(data.substr(0, newline));
    } else {
      partial_.append(data.substr(0, newline));
      emit(partial_);
      partial_.clear();
    }
    data.remove_prefix(newline + 1);
  }
}

void LineAssembler::Flush(const std::function<void(std::string_view)>& emit) {
  if (!partial_.empty()) {
    emit(partial_);
    partial_.clear();
  }
}

void LastLines::Add(std::string_view line) {
  if (capacity_ == 0) return;
  if (lines_.size() == capacity_) lines_.pop_front();
  lines_.emplace_back(line);
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

OutputRelay::OutputRelay(int pipe_fd, RelayTarget target, LastLines* last_lines)
    : pipe_fd_(pipe_fd), target_(std::move(target)), last_lines_(last_lines) {
  fcntl(pipe_fd_, F_SETFL, fcntl(pipe_fd_, F_GETFL) | O_NONBLOCK);
  MakePrefix();
}

void OutputRelay::Retarget(int node_rank, int global_rank, int local_rank) {
  target_.node_rank = node_rank;
  target_.global_rank = global_rank;
  target_.local_rank = local_rank;
  MakePrefix();
}

void OutputRelay::SetFile(int file_fd) {
  if (target_.file_fd >= 0) close(target_.file_fd);
  target_.file_fd = file_fd;
  file_write_failed_ = false;
}

void OutputRelay::NoteFileWriteFailed(int error) {
  // Once per file: a full disk fails every write after the first. Writing goes on (space may
  // come back), and the console, the job and the other files are not disturbed.
  if (file_write_failed_) return;
  file_write_failed_ = true;
  spdlog::warn(
      "the log file of rank {} ({}) misses output from here on: {}; the console still "
      "shows every line and the job goes on",
      target_.global_rank, target_.is_stderr ? "stderr" : "stdout", std::strerror(error));
}

void OutputRelay::MakePrefix() {
  const ConsoleStyle style{target_.json, target_.prefix_template, target_.role, target_.host_name};
  ConsolePrefix prefix = MakeConsolePrefix(style, target_.node_rank, {target_.global_rank},
                                           {target_.local_rank}, target_.is_stderr);
  text_prefix_ = std::move(prefix.text);
  line_prefix_ = std::move(prefix.line);
}

OutputRelay::~OutputRelay() { Close(); }

void OutputRelay::EmitLine(std::string_view line) {
  last_lines_->Add(line);
  const LineDuplicate* duplicate = target_.duplicate;
  if (duplicate != nullptr && duplicate->fd >= 0 && MatchesAnyFilter(line, duplicate->filters)) {
    std::string copy;
    copy.reserve(text_prefix_.size() + line.size() + 1);
    copy.append(text_prefix_).append(line).push_back('\n');
    WriteAll(duplicate->fd, copy);  // one write per line: lines of several workers stay whole
  }
  if (target_.console_fd < 0) return;
  if (target_.collapse != nullptr && target_.global_rank >= 0) {
    target_.collapse->Offer({target_.console_fd, target_.is_stderr, target_.node_rank,
                             target_.global_rank, target_.local_rank},
                            line);
    return;
  }
  if (!WriteAll(target_.console_fd, ConsoleLine(line_prefix_, target_.json, line))) {
    target_.console_fd = -1;  // console gone (EPIPE)
  }
}

OutputRelay::ReadResult OutputRelay::ReadOnce() {
  char buffer[16384];
  ssize_t n;
  do {
    n = read(pipe_fd_, buffer, sizeof buffer);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    std::string_view chunk(buffer, static_cast<size_t>(n));
    if (target_.file_fd >= 0 && !WriteAll(target_.file_fd, chunk)) NoteFileWriteFailed(errno);
    assembler_.Feed(chunk, [this](std::string_view line) { EmitLine(line); });
    return ReadResult::kData;
  }
  if (n < 0 && errno == EAGAIN) return ReadResult::kWouldBlock;
  return ReadResult::kEnd;  // EOF or error
}

bool OutputRelay::OnReadable() {
  if (pipe_fd_ < 0) return false;
  for (int reads = 0; reads < 16; ++reads) {  // bounded, so one chatty worker cannot starve others
    switch (ReadOnce()) {
      case ReadResult::kData:
        continue;
      case ReadResult::kWouldBlock:
        return true;
      case ReadResult::kEnd:
        Close();
        return false;
    }
  }
  return true;
}

void OutputRelay::DrainAndClose() {
  // Stops at EAGAIN too: a descendant that is still alive may hold the pipe's write end.
  while (pipe_fd_ >= 0 && ReadOnce() == ReadResult::kData) {
  }
  Close();
}

void OutputRelay::Close() {
  if (pipe_fd_ < 0) return;
  assembler_.Flush([this](std::string_view line) { EmitLine(line); });
  close(pipe_fd_);
  pipe_fd_ = -1;
  if (target_.file_fd >= 0) {
    close(target_.file_fd);
    target_.file_fd = -1;
  }
}

}  // namespace mxrun

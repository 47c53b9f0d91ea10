#include "trainer/progress_marker.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace mxrun::trainer {
namespace {

// "mxrun-progress 1 <step, 20 digits> <run id>\n": the step has a fixed width, so each rewrite
// covers the last one exactly.
constexpr char kMagic[] = "mxrun-progress 1";

std::string Line(std::int64_t step, const std::string& run_id) {
  char digits[32];
  std::snprintf(digits, sizeof(digits), "%020" PRId64, step);
  return std::string(kMagic) + " " + digits + " " + run_id + "\n";
}

}  // namespace

std::string ProgressMarkerPath(const std::string& ckpt_dir) { return ckpt_dir + "/progress"; }

std::optional<std::int64_t> ReadProgressMarker(const std::string& path, const std::string& run_id) {
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line)) return std::nullopt;
  const std::string head = std::string(kMagic) + " ";
  if (line.compare(0, head.size(), head) != 0 || line.size() < head.size() + 21) {
    return std::nullopt;
  }
  // 20 digits, all of them a step that fits (a damaged file must not stop the restart).
  const char* digits = line.data() + head.size();
  std::uint64_t step = 0;  // unsigned: no sign is read
  const auto [end, error] = std::from_chars(digits, digits + 20, step);
  if (error != std::errc() || end != digits + 20 ||
      step > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
      line[head.size() + 20] != ' ' ||
      line.compare(head.size() + 21, std::string::npos, run_id) != 0) {
    return std::nullopt;
  }
  return static_cast<std::int64_t>(step);
}

ProgressMarker::ProgressMarker(std::string path, std::string run_id)
    : path_(std::move(path)), run_id_(std::move(run_id)) {
  std::error_code ignored;  // the open below says what is wrong
  std::filesystem::create_directories(std::filesystem::path(path_).parent_path(), ignored);
  fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) Warn("cannot create");
}

ProgressMarker::~ProgressMarker() {
  if (fd_ >= 0) ::close(fd_);
}

void ProgressMarker::Record(std::int64_t step) {
  if (fd_ < 0) return;
  const std::string line = Line(step, run_id_);
  if (::pwrite(fd_, line.data(), line.size(), 0) != static_cast<ssize_t>(line.size())) {
    Warn("cannot write");
    ::close(fd_);
    fd_ = -1;
  }
}

void ProgressMarker::Warn(const char* what) {
  if (warned_) return;
  warned_ = true;
  std::fprintf(stderr,
               "train: %s the progress marker %s: %s (a restart will not know its steps_redone)\n",
               what, path_.c_str(), std::strerror(errno));
}

}  // namespace mxrun::trainer

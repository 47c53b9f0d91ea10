#include "rendezvous/grpc/served_tls_files.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/files.h"
#include "rendezvous/grpc/tls_verify.h"

namespace mxrun {
namespace {

// A memory file holding `text`; -1 with errno on failure.
int MemoryFile(const char* name, const std::string& text) {
  const int fd = memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int saved = errno;
      close(fd);
      errno = saved;
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<ServedTlsFiles>> ServedTlsFiles::Load(const TlsFiles& source) {
  std::unique_ptr<ServedTlsFiles> served(new ServedTlsFiles(source));
  if (absl::Status filled = served->Fill(/*replace=*/false); !filled.ok()) return filled;
  return served;
}

ServedTlsFiles::~ServedTlsFiles() {
  for (int fd : fds_) {
    if (fd >= 0) close(fd);
  }
}

absl::Status ServedTlsFiles::Reload() { return Fill(/*replace=*/true); }

absl::Status ServedTlsFiles::Fill(bool replace) {
  // Read once, verify what was read: the files may be replaced again meanwhile.
  const std::string* paths[3] = {&source_.cert, &source_.key, &source_.cacert};
  const char* names[3] = {"mxrun-tls-cert", "mxrun-tls-key", "mxrun-tls-cacert"};
  int fresh[3] = {-1, -1, -1};
  auto close_fresh = [&] {
    for (int& fd : fresh) {
      if (fd >= 0) close(fd);
      fd = -1;
    }
  };
  for (int i = 0; i < 3; ++i) {
    std::optional<std::string> text = ReadWholeFile(*paths[i]);
    if (!text) {
      close_fresh();
      return absl::InvalidArgumentError(absl::StrCat(*paths[i], " cannot be read"));
    }
    fresh[i] = MemoryFile(names[i], *text);
    if (fresh[i] < 0) {
      const std::string why = std::strerror(errno);
      close_fresh();
      return absl::InternalError(absl::StrCat("cannot hold the TLS files in memory: ", why));
    }
  }
  const TlsFiles candidate{absl::StrCat("/proc/self/fd/", fresh[0]),
                           absl::StrCat("/proc/self/fd/", fresh[1]),
                           absl::StrCat("/proc/self/fd/", fresh[2])};
  absl::Status verified = VerifyTlsFiles(candidate, "");
  if (!verified.ok()) {
    // Name the operator's files, not the memory copies.
    std::string message(verified.message());
    const std::string copies[3] = {candidate.cert, candidate.key, candidate.cacert};
    for (int i = 0; i < 3; ++i) {
      for (size_t at = message.find(copies[i]); at != std::string::npos;
           at = message.find(copies[i], at + paths[i]->size())) {
        message.replace(at, copies[i].size(), *paths[i]);
      }
    }
    close_fresh();
    return absl::InvalidArgumentError(message);
  }
  if (!replace) {
    for (int i = 0; i < 3; ++i) fds_[i] = fresh[i];
    served_ = candidate;
    return absl::OkStatus();
  }
  // The served paths keep their numbers; each now refers to the new file (dup2 is atomic).
  for (int i = 0; i < 3; ++i) {
    if (dup2(fresh[i], fds_[i]) < 0) {
      const std::string why = std::strerror(errno);
      close_fresh();
      return absl::InternalError(absl::StrCat("cannot swap in the new TLS files: ", why));
    }
  }
  close_fresh();
  return absl::OkStatus();
}

}  // namespace mxrun

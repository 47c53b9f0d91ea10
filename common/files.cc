#include "common/files.h"

#include <ftw.h>
#include <sys/stat.h>

#include <cstdio>

namespace mxrun {

bool MakeDirs(const std::string& path) {
  for (size_t pos = path.find('/', 1); pos != std::string::npos; pos = path.find('/', pos + 1)) {
    mkdir(path.substr(0, pos).c_str(), 0755);
  }
  mkdir(path.c_str(), 0755);
  struct stat st {};
  return stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

namespace {
int RemoveEntry(const char* path, const struct stat*, int, FTW*) {
  std::remove(path);
  return 0;
}
}  // namespace

void RemoveTree(const std::string& path) {
  if (!path.empty()) nftw(path.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);
}

}  // namespace mxrun

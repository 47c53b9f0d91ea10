/* LD_PRELOAD shim for tests/python/test_prestart.py: appends the name of every getenv() and
 * secure_getenv() call of the process to the file named by GETENV_TRACE_FILE, one per line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int trace_fd = -2;

static void note(const char* name, char* (*real)(const char*)) {
  if (trace_fd == -2) {
    const char* path = real("GETENV_TRACE_FILE");
    trace_fd = path ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : -1;
  }
  if (trace_fd >= 0 && name != NULL) {
    char line[512];
    int n = snprintf(line, sizeof line, "%s\n", name);
    if (n > 0 && write(trace_fd, line, (size_t)n) < 0) trace_fd = -1;
  }
}

char* getenv(const char* name) {
  static char* (*real)(const char*);
  if (real == NULL) real = (char* (*)(const char*))dlsym(RTLD_NEXT, "getenv");
  note(name, real);
  return real(name);
}

char* secure_getenv(const char* name) {
  static char* (*real)(const char*);
  if (real == NULL) real = (char* (*)(const char*))dlsym(RTLD_NEXT, "secure_getenv");
  note(name, real);
  return real(name);
}

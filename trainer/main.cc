// train: the trainer bundled with mxrun. Runs alone, under mxrun, or under torchrun --no_python.
// Exit codes: 0 done, 1 training failed (the reason is in TORCHELASTIC_ERROR_FILE when set, in
// PyTorch's @record shape), 2 bad command line or environment, or a request this machine cannot
// meet (--device cuda with no GPU visible, --backend nccl without NCCL).

#include <cxxabi.h>
#include <malloc.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include <c10/util/Exception.h>

#include "common/env_contract.h"
#include "common/worker_env.h"
#include "trainer/collectives.h"
#include "trainer/error_file.h"
#include "trainer/options.h"
#include "trainer/trainer.h"

extern char** environ;

namespace {

std::string CurrentExceptionType() {
  const std::type_info* type = abi::__cxa_current_exception_type();
  if (type == nullptr) return "UnknownError";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> name(
      abi::__cxa_demangle(type->name(), nullptr, nullptr, &status), &std::free);
  return status == 0 && name ? name.get() : type->name();
}

// LibTorch's CPU tensors come from malloc. With glibc's defaults, a step's freed activations go
// back to the kernel (blocks above the mmap threshold, and heap tops above the trim threshold),
// and the next step faults them in afresh: about 20% of a CPU worker's time, measured with perf.
// Keep them in the process instead, unless the user tuned malloc through the environment.
void KeepFreedMemoryForReuse() {
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") != nullptr ||
      std::getenv("MALLOC_TRIM_THRESHOLD_") != nullptr ||
      std::getenv("GLIBC_TUNABLES") != nullptr) {
    return;
  }
  mallopt(M_MMAP_THRESHOLD, 256 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// The identity a failure is reported under, read when it happens: a standby promoted in-process
// took its rank and error file from a round notice after start-up (Trainer::ApplyRound puts them
// in the environment), and a failure reported under the start-up identity would name no rank and
// leave the launcher's summary without the trainer's message.
mxrun::WorkerIdentity IdentityNow(const mxrun::WorkerIdentity& at_start) {
  try {
    return mxrun::ReadWorkerIdentity(mxrun::EnvFromStrings(environ));
  } catch (const std::invalid_argument&) {
    return at_start;
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace mxrun;
  KeepFreedMemoryForReuse();
  // A write to a connection whose peer died (an abandoned group's Gloo pair, the store) must be
  // an error the collective reports, not a SIGPIPE that kills a survivor of an in-process restart:
  // ignored as Python does at start-up for every PyTorch script.
  std::signal(SIGPIPE, SIG_IGN);
  trainer::ParsedTrainerArgs parsed;
  WorkerIdentity identity;
  try {
    parsed = trainer::ParseTrainerOptions(argc, argv);
    identity = ReadWorkerIdentity(EnvFromStrings(environ));
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "train: %s\nRun train --help for the accepted flags.\n", e.what());
    return 2;
  }
  if (parsed.version) {
    std::printf("train (bundled with mxrun): %s\n", trainer::BuildDescription().c_str());
    return 0;
  }
  if (!parsed.options) {
    std::fputs(parsed.help_text.c_str(), stdout);
    return 0;
  }
  auto fail = [&](const std::string& what) {
    const std::string type = CurrentExceptionType();
    const WorkerIdentity now = IdentityNow(identity);
    std::fprintf(stderr, "train: rank %d failed: %s: %s\n", now.rank, type.c_str(), what.c_str());
    if (!now.error_file.empty()) {
      trainer::WriteErrorFile(now.error_file, type, what,
                              "raised in the C++ trainer (train); no Python traceback");
    }
    return 1;
  };
  try {
    return trainer::RunTrainer(*parsed.options, identity);
  } catch (const trainer::UnmetRequest& e) {
    std::fprintf(stderr, "train: %s\n", e.what());
    const WorkerIdentity now = IdentityNow(identity);
    if (!now.error_file.empty()) {  // for the launcher's summary
      trainer::WriteErrorFile(now.error_file, "UnmetRequest", e.what(),
                              "raised in the C++ trainer (train); no Python traceback");
    }
    return 2;
  } catch (const c10::Error& e) {
    return fail(e.what_without_backtrace());  // LibTorch's own backtrace is noise to a user
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}

#include "common/signal_names.h"

#include <csignal>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace mxrun {
namespace {

struct NamedSignal {
  int signo;
  const char* name;
};

constexpr NamedSignal kSignals[] = {
    {SIGHUP, "SIGHUP"},       {SIGINT, "SIGINT"},   {SIGQUIT, "SIGQUIT"},   {SIGILL, "SIGILL"},
    {SIGTRAP, "SIGTRAP"},     {SIGABRT, "SIGABRT"}, {SIGBUS, "SIGBUS"},     {SIGFPE, "SIGFPE"},
    {SIGKILL, "SIGKILL"},     {SIGUSR1, "SIGUSR1"}, {SIGSEGV, "SIGSEGV"},   {SIGUSR2, "SIGUSR2"},
    {SIGPIPE, "SIGPIPE"},     {SIGALRM, "SIGALRM"}, {SIGTERM, "SIGTERM"},   {SIGCHLD, "SIGCHLD"},
    {SIGCONT, "SIGCONT"},     {SIGSTOP, "SIGSTOP"}, {SIGTSTP, "SIGTSTP"},   {SIGTTIN, "SIGTTIN"},
    {SIGTTOU, "SIGTTOU"},     {SIGURG, "SIGURG"},   {SIGXCPU, "SIGXCPU"},   {SIGXFSZ, "SIGXFSZ"},
    {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGWINCH, "SIGWINCH"}, {SIGIO, "SIGIO"},
    {SIGPWR, "SIGPWR"},       {SIGSYS, "SIGSYS"},
};

}  // namespace

std::string SignalName(int signo) {
  for (const auto& s : kSignals) {
    if (s.signo == signo) return s.name;
  }
  return absl::StrCat("SIG", signo);
}

std::optional<int> ParseSignal(absl::string_view text) {
  std::string upper = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(text));
  int number = 0;
  if (absl::SimpleAtoi(upper, &number)) {
    if (number > 0 && number < NSIG) return number;
    return std::nullopt;
  }
  if (!absl::StartsWith(upper, "SIG")) upper = "SIG" + upper;
  for (const auto& s : kSignals) {
    if (upper == s.name) return s.signo;
  }
  return std::nullopt;
}

std::string DescribeSignal(int signo) {
  return absl::StrCat("Signal ", signo, " (", SignalName(signo), ")");
}

}  // namespace mxrun

#include <catch2/catch.hpp>

#include "common/repeated_failure.h"

using mxrun::RepeatedFailures;
using mxrun::WorkerFailure;

namespace {

WorkerFailure Exit(int code, std::string message, std::vector<std::string> lines = {}) {
  WorkerFailure f;
  f.exit_code = code;
  f.message = std::move(message);
  f.last_lines = std::move(lines);
  return f;
}

}  // namespace

TEST_CASE("repeated failures: the same exit code and error on every attempt is deterministic",
          "[repeated_failure]") {
  RepeatedFailures failures;
  failures.Add(Exit(1, "ValueError: no such dataset"));
  CHECK_FALSE(failures.AllSame());  // one attempt proves nothing
  WorkerFailure other_rank = Exit(1, "ValueError: no such dataset");
  other_rank.global_rank = 5;  // which rank failed first does not matter
  failures.Add(other_rank);
  CHECK(failures.AllSame());
  CHECK(failures.signature() == "exit code 1: ValueError: no such dataset");
  CHECK(failures.attempts() == 2);
}

TEST_CASE("repeated failures: without an error file, the last output line tells them apart",
          "[repeated_failure]") {
  RepeatedFailures failures;
  failures.Add(Exit(2, "", {"loading", "FileNotFoundError: /data/x", "  "}));
  failures.Add(Exit(2, "", {"FileNotFoundError: /data/x"}));
  CHECK(failures.AllSame());
  CHECK(failures.signature() == "exit code 2: FileNotFoundError: /data/x");
}

TEST_CASE(
    "repeated failures: a signal, a hang, another error or nothing to compare is worth a "
    "requeue",
    "[repeated_failure]") {
  WorkerFailure killed = Exit(0, "");
  killed.term_signal = 9;
  WorkerFailure hung = Exit(1, "timeout");
  hung.hang.rule = "heartbeat";
  for (const WorkerFailure& odd :
       {killed, hung, Exit(1, "ValueError: other"), Exit(3, "ValueError: x"), Exit(1, "", {})}) {
    RepeatedFailures failures;
    failures.Add(Exit(1, "ValueError: x"));
    failures.Add(odd);
    failures.Add(Exit(1, "ValueError: x"));
    CHECK_FALSE(failures.AllSame());
  }
  RepeatedFailures lost;
  lost.Add(Exit(1, "ValueError: x"));
  lost.AddOther();  // a node lost between them
  CHECK_FALSE(lost.AllSame());
  CHECK_FALSE(mxrun::FailureSignature(killed).has_value());
}

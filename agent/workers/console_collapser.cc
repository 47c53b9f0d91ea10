#include "agent/workers/console_collapser.h"

#include "agent/workers/output_relay.h"

namespace mxrun {

ConsoleCollapser::~ConsoleCollapser() {
  timer_.Cancel();
  Write(collapse_.TakeAll());
}

void ConsoleCollapser::Offer(const ConsoleSource& from, std::string_view line) {
  const auto now = ConsoleCollapse::Time::clock::now();
  collapse_.Offer(now, from, line);
  Write(collapse_.TakeDue(now));  // what the memory bound pushes out, and what is already due
  Arm();
}

void ConsoleCollapser::Flush() {
  Write(collapse_.TakeAll());
  Arm();
}

void ConsoleCollapser::Arm() {
  const std::optional<ConsoleCollapse::Time> due = collapse_.NextDue();
  if (due == armed_for_) return;
  timer_.Cancel();
  armed_for_ = due;
  if (!due) return;
  timer_.At(*due, [this] {
    armed_for_.reset();
    Write(collapse_.TakeDue(ConsoleCollapse::Time::clock::now()));
    Arm();
  });
}

void ConsoleCollapser::Write(const std::vector<CollapsedLine>& lines) {
  for (const CollapsedLine& line : lines) {
    if (gone_.count(line.console_fd) > 0) continue;
    const ConsolePrefix prefix =
        MakeConsolePrefix(style_, line.node_rank, line.ranks, line.local_ranks, line.is_stderr);
    if (!WriteAll(line.console_fd, ConsoleLine(prefix.line, style_.json, line.text))) {
      gone_.insert(line.console_fd);  // the console is gone (EPIPE): written no more
    }
  }
}

}  // namespace mxrun

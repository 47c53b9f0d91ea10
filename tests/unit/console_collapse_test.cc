#include "agent/workers/console_collapse.h"

#include <catch2/catch.hpp>

#include "agent/workers/console_line.h"

namespace mxrun {
namespace {

using namespace std::chrono_literals;
using Time = ConsoleCollapse::Time;

ConsoleSource Rank(int rank, bool is_stderr = false) {
  return ConsoleSource{1, is_stderr, 0, rank, rank};
}

// "r0,1: text" per line, in order.
std::vector<std::string> Render(const std::vector<CollapsedLine>& lines) {
  std::vector<std::string> out;
  for (const CollapsedLine& l : lines) {
    out.push_back(std::string(l.is_stderr ? "e" : "o") + " r" + RankList(l.ranks) + ": " + l.text);
  }
  return out;
}

TEST_CASE("a line several ranks print within the window goes out once, with their ranks",
          "[collapse]") {
  ConsoleCollapse c(500ms);
  const Time t0{};
  for (int rank = 0; rank < 8; ++rank) {
    c.Offer(t0 + std::chrono::milliseconds(rank * 10), Rank(rank), "UserWarning: x");
  }
  c.Offer(t0 + 20ms, Rank(3), "loss 0.5");
  CHECK(c.TakeDue(t0 + 499ms).empty());  // nothing before its window ends
  CHECK(c.NextDue() == t0 + 500ms);
  CHECK(Render(c.TakeDue(t0 + 500ms)) == std::vector<std::string>{"o r0-7: UserWarning: x"});
  CHECK(Render(c.TakeDue(t0 + 520ms)) == std::vector<std::string>{"o r3: loss 0.5"});
  CHECK_FALSE(c.NextDue().has_value());
  CHECK(c.pending_bytes() == 0);
  // After the window the same text starts a new line.
  c.Offer(t0 + 600ms, Rank(0), "UserWarning: x");
  c.Offer(t0 + 1200ms, Rank(1), "UserWarning: x");
  CHECK(Render(c.TakeAll()) ==
        std::vector<std::string>{"o r0: UserWarning: x", "o r1: UserWarning: x"});
}

TEST_CASE("collapsing keeps every rank's own order, and streams apart", "[collapse]") {
  ConsoleCollapse c(1s);
  const Time t0{};
  c.Offer(t0, Rank(0), "A");
  c.Offer(t0, Rank(1), "B");
  c.Offer(t0, Rank(1), "A");  // rank 1 said B first: joining A (before B) would reorder it
  c.Offer(t0, Rank(2), "A");  // rank 2 has nothing pending: joins the newest A
  c.Offer(t0, Rank(2), "A");  // a rank repeating itself is not collapsed
  c.Offer(t0, Rank(3, /*is_stderr=*/true), "A");  // another stream
  CHECK(Render(c.TakeAll()) ==
        std::vector<std::string>{"o r0: A", "o r1: B", "o r1,2: A", "o r2: A", "e r3: A"});
  // Order of a line's copies does not matter: ranks come out ascending.
  c.Offer(t0, Rank(5), "C");
  c.Offer(t0, Rank(2), "C");
  c.Offer(t0, Rank(4), "C");
  const std::vector<CollapsedLine> lines = c.TakeAll();
  REQUIRE(lines.size() == 1);
  CHECK(lines[0].ranks == std::vector<int>{2, 4, 5});
  CHECK(lines[0].local_ranks == std::vector<int>{2, 4, 5});
}

TEST_CASE("pending text is bounded: beyond it the oldest lines go out early", "[collapse]") {
  ConsoleCollapse c(10s);
  const Time t0{};
  const std::string big(64 * 1024, 'x');
  size_t early = 0;
  for (int i = 0; i < 40; ++i) {
    c.Offer(t0, Rank(i % 4), big + std::to_string(i));
    early += c.TakeDue(t0).size();
    CHECK(c.pending_bytes() <= ConsoleCollapse::kMaxPendingBytes);
  }
  CHECK(early > 0);
  CHECK(early + c.TakeAll().size() == 40);
}

TEST_CASE("rank lists and collapsed console lines", "[collapse]") {
  CHECK(RankList({3}) == "3");
  CHECK(RankList({1, 2}) == "1,2");
  CHECK(RankList({1, 2, 3, 4, 5, 6, 7}) == "1-7");
  CHECK(RankList({0, 2, 4, 5, 6, 7, 9}) == "0,2,4-7,9");
  const ConsoleStyle text;
  CHECK(ConsoleLine(MakeConsolePrefix(text, 0, {1, 2, 3}, {1, 2, 3}, false).line, false, "hi") ==
        "[n0 r1-3] hi\n");
  CHECK(ConsoleLine(MakeConsolePrefix(text, 2, {9}, {1}, false).line, false, "hi") ==
        "[n2 r9] hi\n");
  const ConsoleStyle json{true, "", "", ""};
  CHECK(ConsoleLine(MakeConsolePrefix(json, 0, {4, 5}, {0, 1}, true).line, true, "w") ==
        "{\"node\":0,\"rank\":4,\"ranks\":[4,5],\"local_rank\":0,\"local_ranks\":[0,1],"
        "\"stream\":\"stderr\",\"line\":\"w\"}\n");
  CHECK(ConsoleLine(MakeConsolePrefix(json, 0, {4}, {0}, false).line, true, "w") ==
        "{\"node\":0,\"rank\":4,\"local_rank\":0,\"stream\":\"stdout\",\"line\":\"w\"}\n");
  const ConsoleStyle templ{false, "${role_name}${rank}|${local_rank}: ", "trainer", "h"};
  CHECK(MakeConsolePrefix(templ, 0, {0, 1, 2}, {0, 1, 2}, false).text == "trainer0-2|0-2: ");
}

}  // namespace
}  // namespace mxrun

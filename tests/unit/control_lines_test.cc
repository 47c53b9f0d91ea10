// agent/workers/control_lines: a worker's control channel split into lines, oversize ones dropped
// whole within bounded memory, and drops said in a few lines (issue 39, item 4).

#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "agent/workers/control_lines.h"

namespace {

struct Seen {
  std::vector<std::string> lines;
  std::vector<size_t> oversize;
};

void Feed(mxrun::ControlLines& reader, std::string_view data, Seen& seen) {
  reader.Feed(
      data, [&](std::string_view line) { seen.lines.emplace_back(line); },
      [&](size_t bytes) { seen.oversize.push_back(bytes); });
}

}  // namespace

TEST_CASE("control lines: whole lines in any chunking, none over the bound", "[unit][control]") {
  mxrun::ControlLines reader(16);
  Seen seen;
  Feed(reader, "{\"step\": 1}\n{\"st", seen);
  Feed(reader, "ep\": 2}\n", seen);
  Feed(reader, "\n", seen);
  CHECK(seen.lines == std::vector<std::string>{"{\"step\": 1}", "{\"step\": 2}", ""});
  CHECK(seen.oversize.empty());
  // Exactly the bound is accepted, one byte more is not.
  Feed(reader, std::string(16, 'a') + "\n" + std::string(17, 'b') + "\n", seen);
  CHECK(seen.lines.back() == std::string(16, 'a'));
  CHECK(seen.oversize == std::vector<size_t>{17});
}

TEST_CASE(
    "control lines: an oversize line arriving in pieces is dropped whole, and the next line "
    "is read",
    "[unit][control]") {
  mxrun::ControlLines reader(8);
  Seen seen;
  for (int i = 0; i < 1000; ++i) Feed(reader, "0123456789", seen);  // 10,000 bytes, no newline
  Feed(reader, "tail\n{\"a\":1}\n", seen);
  CHECK(seen.oversize == std::vector<size_t>{10004});
  CHECK(seen.lines == std::vector<std::string>{"{\"a\":1}"});
}

TEST_CASE("control lines: the first drops are each said, the rest counted", "[unit][control]") {
  mxrun::ControlLines reader(8);
  for (int i = 1; i <= mxrun::ControlLines::kLoggedDrops; ++i) {
    const std::string warning = reader.Dropped("worker local_rank 0 (pid 7)", "not JSON");
    CHECK(warning.find("worker local_rank 0 (pid 7): dropped a control message: not JSON") == 0);
    CHECK((warning.find("further dropped messages are counted") != std::string::npos) ==
          (i == mxrun::ControlLines::kLoggedDrops));
  }
  CHECK(reader.unlogged_drops() == 0);
  for (int i = 0; i < 995; ++i) CHECK(reader.Dropped("w", "not JSON").empty());
  CHECK(reader.unlogged_drops() == 995);
  CHECK(reader.drops() == 1000);
}

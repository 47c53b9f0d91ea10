#include <catch2/catch.hpp>

#include <fcntl.h>
#include <unistd.h>

#include "agent/workers/json_quote.h"
#include "agent/workers/line_prefix.h"
#include "agent/workers/log_spec.h"
#include "agent/workers/output_relay.h"
#include "nlohmann/json.hpp"

using mxrun::LineAssembler;

namespace {

std::vector<std::string> Feed(LineAssembler& a, std::string_view data) {
  std::vector<std::string> lines;
  a.Feed(data, [&](std::string_view line) { lines.emplace_back(line); });
  return lines;
}

}  // namespace

TEST_CASE("lines are assembled across reads", "[output]") {
  LineAssembler a;
  CHECK(Feed(a, "hel").empty());
  CHECK(Feed(a, "lo\nwor") == std::vector<std::string>{"hello"});
  CHECK(Feed(a, "ld\n\nx\n") == std::vector<std::string>{"world", "", "x"});
  std::vector<std::string> rest;
  a.Flush([&](std::string_view line) { rest.emplace_back(line); });
  CHECK(rest.empty());
  Feed(a, "tail");
  a.Flush([&](std::string_view line) { rest.emplace_back(line); });
  CHECK(rest == std::vector<std::string>{"tail"});
}

TEST_CASE("an endless line is emitted in bounded pieces", "[output]") {
  LineAssembler a;
  std::string big(LineAssembler::kMaxLine * 2 + 10, 'x');
  auto lines = Feed(a, big);
  REQUIRE(lines.size() == 2);
  CHECK(lines[0].size() == LineAssembler::kMaxLine);
}

TEST_CASE("last lines keep the newest", "[output]") {
  mxrun::LastLines last(2);
  last.Add("a");
  last.Add("b");
  last.Add("c");
  CHECK(last.Lines() == std::vector<std::string>{"b", "c"});
}

TEST_CASE("the relay prefixes whole lines and writes raw bytes to the file", "[output]") {
  int in[2], console[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(console) == 0);
  char path[] = "/tmp/mxrun-relay-XXXXXX";
  int file = mkstemp(path);
  REQUIRE(file >= 0);
  mxrun::LastLines last(10);
  {
    mxrun::OutputRelay relay(in[0], {.console_fd = console[1], .file_fd = file, .global_rank = 1},
                             &last);
    REQUIRE(write(in[1], "one\ntw", 6) == 6);
    CHECK(relay.OnReadable());
    REQUIRE(write(in[1], "o\nthree", 7) == 7);
    close(in[1]);
    relay.DrainAndClose();
  }
  close(console[1]);
  char buffer[256] = {};
  ssize_t n = read(console[0], buffer, sizeof buffer - 1);
  CHECK(std::string(buffer, n > 0 ? n : 0) == "[n0 r1] one\n[n0 r1] two\n[n0 r1] three\n");
  CHECK(last.Lines() == std::vector<std::string>{"one", "two", "three"});
  char raw[256] = {};
  ssize_t m = pread(open(path, O_RDONLY), raw, sizeof raw - 1, 0);
  CHECK(std::string(raw, m > 0 ? m : 0) == "one\ntwo\nthree");
  unlink(path);
  close(console[0]);
}

TEST_CASE("with json the relay writes one whole object per line", "[output]") {
  int in[2], console[2];
  REQUIRE(pipe(in) == 0);
  REQUIRE(pipe(console) == 0);
  mxrun::LastLines last(10);
  {
    mxrun::OutputRelay relay(in[0],
                             {.console_fd = console[1],
                              .node_rank = 2,
                              .global_rank = 9,
                              .local_rank = 1,
                              .is_stderr = true,
                              .json = true},
                             &last);
    const std::string data = "say \"hi\"\tnow\nbad \xff byte\n";
    REQUIRE(write(in[1], data.data(), data.size()) == static_cast<ssize_t>(data.size()));
    close(in[1]);
    relay.DrainAndClose();
  }
  close(console[1]);
  char buffer[512] = {};
  ssize_t n = read(console[0], buffer, sizeof buffer - 1);
  close(console[0]);
  const std::string text(buffer, n > 0 ? n : 0);
  CHECK(text.substr(0, text.find('\n')) ==
        R"({"node":2,"rank":9,"local_rank":1,"stream":"stderr","line":"say \"hi\"\tnow"})");
  auto second = nlohmann::json::parse(text.substr(text.find('\n') + 1));
  CHECK(second["line"] == "bad \xef\xbf\xbd byte");  // invalid UTF-8 replaced, the line kept
  CHECK(second["stream"] == "stderr");
}

TEST_CASE("JsonQuote escapes quotes, backslashes and control characters", "[output]") {
  CHECK(mxrun::JsonQuote("a\"b\\c\nd") == R"("a\"b\\c\nd")");
  CHECK(mxrun::JsonQuote("") == R"("")");
}

TEST_CASE("routing follows torchrun's redirects and tee", "[output]") {
  mxrun::LogSpec spec;
  spec.redirects = *mxrun::ParsePerRankStd("1");
  spec.tee = *mxrun::ParsePerRankStd("0:1");
  auto out0 = spec.Route(0, mxrun::kStdOut);
  auto out1 = spec.Route(1, mxrun::kStdOut);
  auto err1 = spec.Route(1, mxrun::kStdErr);
  CHECK(out0.to_console);  // redirected but teed
  CHECK(out0.to_file);
  CHECK_FALSE(out1.to_console);  // redirected only
  CHECK(out1.to_file);
  CHECK(err1.to_console);
  CHECK_FALSE(err1.to_file);
  CHECK(spec.NeedsFiles());

  mxrun::LogSpec plain;
  CHECK_FALSE(plain.NeedsFiles());
  plain.log_dir = "/logs";
  CHECK(plain.Route(0, mxrun::kStdErr).to_file);
  CHECK(plain.Route(0, mxrun::kStdErr).to_console);
  plain.console_ranks = {1};
  CHECK_FALSE(plain.Route(0, mxrun::kStdOut).to_console);
  CHECK(plain.Route(1, mxrun::kStdOut).to_console);
}

TEST_CASE("per-rank std values are validated", "[output]") {
  CHECK_FALSE(mxrun::ParsePerRankStd("4").ok());
  CHECK_FALSE(mxrun::ParsePerRankStd("a:1").ok());
  CHECK_FALSE(mxrun::ParsePerRankStd("0:9").ok());
  CHECK(mxrun::ParsePerRankStd("9:0")->For(9) == 0);
  CHECK_FALSE(mxrun::ParseLocalRanksFilter("0,x").ok());
}

TEST_CASE("prefix templates expand as Python's Template.safe_substitute", "[output][torchrun2]") {
  const std::map<std::string, std::string> values = {
      {"role_name", "trainer"}, {"rank", "3"}, {"local_rank", "1"}, {"hostname", "node7"}};
  CHECK(mxrun::ExpandLinePrefix("[${role_name}${local_rank}]:", values) == "[trainer1]:");
  CHECK(mxrun::ExpandLinePrefix("$hostname/$rank ", values) == "node7/3 ");
  CHECK(mxrun::ExpandLinePrefix("$$rank=${rank}", values) == "$rank=3");
  // Unknown names, a lone '$' and a broken brace stay as written.
  CHECK(mxrun::ExpandLinePrefix("${nope} $nope $ ${rank", values) == "${nope} $nope $ ${rank");
  CHECK(mxrun::ExpandLinePrefix("${rank}x$rankx", values) == "3x$rankx");
  CHECK(mxrun::ExpandLinePrefix("end$", values) == "end$");
}

TEST_CASE("filters match plain substrings, case-sensitively", "[output][torchrun2]") {
  const std::vector<std::string> filters = {"loss", "a,b"};
  CHECK(mxrun::MatchesAnyFilter("step 3 loss=1.2", filters));
  CHECK(mxrun::MatchesAnyFilter("x a,b y", filters));
  CHECK_FALSE(mxrun::MatchesAnyFilter("LOSS", filters));
  CHECK_FALSE(mxrun::MatchesAnyFilter("anything", {}));
}

TEST_CASE("a relay with a template and filters: console prefix, JSON prefix, filtered copy",
          "[output][torchrun2]") {
  for (const bool json : {false, true}) {
    int pipe_fds[2], console[2], filtered[2];
    REQUIRE(pipe(pipe_fds) == 0);
    REQUIRE(pipe(console) == 0);
    REQUIRE(pipe(filtered) == 0);
    mxrun::LineDuplicate duplicate{filtered[1], {"loss"}};
    mxrun::RelayTarget target;
    target.console_fd = console[1];
    target.node_rank = 0;
    target.global_rank = 5;
    target.local_rank = 1;
    target.json = json;
    target.prefix_template = "[${role_name}${local_rank}]:";
    target.role = "default";
    target.duplicate = &duplicate;
    mxrun::LastLines last(4);
    {
      mxrun::OutputRelay relay(pipe_fds[0], target, &last);
      const std::string data = "loss=1\nother\n";
      REQUIRE(write(pipe_fds[1], data.data(), data.size()) == static_cast<ssize_t>(data.size()));
      close(pipe_fds[1]);
      relay.DrainAndClose();
    }
    close(console[1]);
    close(filtered[1]);
    char buffer[4096];
    ssize_t n = read(console[0], buffer, sizeof buffer);
    const std::string shown(buffer, n > 0 ? n : 0);
    n = read(filtered[0], buffer, sizeof buffer);
    const std::string copied(buffer, n > 0 ? n : 0);
    close(console[0]);
    close(filtered[0]);
    if (json) {
      auto first = nlohmann::json::parse(shown.substr(0, shown.find('\n')));
      CHECK(first["prefix"] == "[default1]:");
      CHECK(first["line"] == "loss=1");
      CHECK(first["rank"] == 5);
    } else {
      CHECK(shown == "[default1]:loss=1\n[default1]:other\n");
    }
    CHECK(copied == "[default1]:loss=1\n");  // text prefix in the file, whatever the console
  }
}

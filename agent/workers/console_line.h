#pragma once
// How a worker's line looks on the console, for one rank or for several that printed the same
// (console_collapse.h). Text: "[n<node> r<ranks>] <line>", or --log_line_prefix_template expanded
// (line_prefix.h) with ${rank} and ${local_rank} the rank lists ("1-7"). JSON (--log_format=json):
// {"node":0,"rank":3,"local_rank":1,"stream":"stdout","line":"..."}, with "prefix" when a
// template is set, and for several ranks "ranks" and "local_ranks" arrays after "rank" and
// "local_rank" (the first of each). Pure.

#include <string>
#include <string_view>
#include <vector>

namespace mxrun {

struct ConsoleStyle {
  bool json = false;
  std::string prefix_template;  // empty: mxrun's "[n<node> r<rank>] "
  std::string role;             // ${role_name}
  std::string host_name;        // ${hostname}
};

struct ConsolePrefix {
  std::string text;  // the text console's prefix (also the filtered files')
  std::string line;  // what comes before the line: the text prefix, or a JSON object's start
};

// `ranks` and `local_ranks` ascending, at least one each; a negative rank is a warm standby's
// line ("[n0 standby] ").
ConsolePrefix MakeConsolePrefix(const ConsoleStyle& style, int node_rank,
                                const std::vector<int>& ranks, const std::vector<int>& local_ranks,
                                bool is_stderr);

// The whole console line, newline included: written with one write, so lines stay whole.
std::string ConsoleLine(const std::string& line_prefix, bool json, std::string_view line);

}  // namespace mxrun

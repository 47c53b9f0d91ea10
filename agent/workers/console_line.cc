#include "agent/workers/console_line.h"

#include "agent/workers/console_collapse.h"
#include "agent/workers/json_quote.h"
#include "agent/workers/line_prefix.h"

namespace mxrun {
namespace {

std::string JsonInts(const std::vector<int>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out.push_back(',');
    out += std::to_string(values[i]);
  }
  return out + "]";
}

}  // namespace

ConsolePrefix MakeConsolePrefix(const ConsoleStyle& style, int node_rank,
                                const std::vector<int>& ranks, const std::vector<int>& local_ranks,
                                bool is_stderr) {
  const std::string node = std::to_string(node_rank);
  const std::string rank = RankList(ranks);
  ConsolePrefix prefix;
  if (ranks.front() < 0) {
    prefix.text = "[n" + node + " standby] ";  // a spare without a rank yet (no template)
  } else if (!style.prefix_template.empty()) {
    prefix.text = ExpandLinePrefix(style.prefix_template, {{"role_name", style.role},
                                                           {"rank", rank},
                                                           {"local_rank", RankList(local_ranks)},
                                                           {"hostname", style.host_name}});
  } else {
    prefix.text = "[n" + node + " r" + rank + "] ";
  }
  if (!style.json) {
    prefix.line = prefix.text;
    return prefix;
  }
  const bool several = ranks.size() > 1;
  prefix.line = "{\"node\":" + node + ",\"rank\":" + std::to_string(ranks.front());
  if (several) prefix.line += ",\"ranks\":" + JsonInts(ranks);
  prefix.line += ",\"local_rank\":" + std::to_string(local_ranks.front());
  if (several) prefix.line += ",\"local_ranks\":" + JsonInts(local_ranks);
  prefix.line += std::string(",\"stream\":\"") + (is_stderr ? "stderr" : "stdout") + "\",";
  if (!style.prefix_template.empty()) prefix.line += "\"prefix\":" + JsonQuote(prefix.text) + ",";
  prefix.line += "\"line\":";
  return prefix;
}

std::string ConsoleLine(const std::string& line_prefix, bool json, std::string_view line) {
  std::string whole;
  whole.reserve(line_prefix.size() + line.size() + 4);
  whole.append(line_prefix);
  if (json) {
    whole.append(JsonQuote(line)).append("}\n");
  } else {
    whole.append(line).push_back('\n');
  }
  return whole;
}

}  // namespace mxrun

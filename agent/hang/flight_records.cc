#include "agent/hang/flight_records.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "agent/process/descendants.h"
#include "agent/process/helper_run.h"
#include "common/files.h"
#include "common/strings.h"
#include "spdlog/spdlog.h"

namespace mxrun {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::string_view kRequest = "fr_trace\n";
constexpr size_t kMaxHeader = 4096;  // "ok <N>" or "error <why>"

// Whether `pid` is `root` or descends from it (the worker may run Python under a shell).
bool IsSelfOrDescendant(pid_t pid, pid_t root) {
  for (int depth = 0; depth < 16 && pid > 1; ++depth) {
    if (pid == root) return true;
    pid = ReadLiveParent(pid);
  }
  return false;
}

struct Connection {
  const FlightTarget* target = nullptr;
  FlightDump* dump = nullptr;
  int fd = -1;
  size_t sent = 0;
  std::string received;
  bool done = false;
};

void Fail(Connection& c, std::string why) {
  c.dump->error = std::move(why);
  c.done = true;
  if (c.fd >= 0) close(c.fd);
  c.fd = -1;
}

void Connect(Connection& c) {
  const std::string& path = c.target->socket;
  sockaddr_un address{};
  if (path.empty() || path.size() >= sizeof address.sun_path) {
    return Fail(c, "no flight-recorder socket was given to it");
  }
  c.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (c.fd < 0) return Fail(c, absl::StrCat("cannot make a socket: ", ErrnoText(errno)));
  address.sun_family = AF_UNIX;
  std::memcpy(address.sun_path, path.data(), path.size());
  if (connect(c.fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ECONNREFUSED) {
      return Fail(c,
                  "it serves no flight recorder (the script never called mxrun.step_done or "
                  "mxrun.run, which start the server)");
    }
    return Fail(c, absl::StrCat("cannot connect to ", path, ": ", ErrnoText(err)));
  }
  // A Unix socket connects at once (or fails): who listens is known now.
  ucred peer{};
  socklen_t size = sizeof peer;
  if (getsockopt(c.fd, SOL_SOCKET, SO_PEERCRED, &peer, &size) != 0 ||
      !IsSelfOrDescendant(peer.pid, c.target->pid)) {
    return Fail(c, absl::StrCat("the process serving ", path, " (pid ", peer.pid,
                                ") is not this worker's; not trusted"));
  }
}

// An ended worker's dump, written as it died (kFlightExitSuffix beside its socket).
void TakeExitDump(const FlightTarget& target, const std::string& dir, FlightDump& dump) {
  if (target.socket.empty()) {
    dump.error = "no flight-recorder socket was given to it";
    return;
  }
  const std::string path = target.socket + kFlightExitSuffix;
  std::optional<std::string> json = ReadWholeFile(path);
  if (!json || json->empty()) {
    dump.error =
        "it ended without leaving a dump (killed by a signal, or it never called "
        "mxrun.step_done)";
    return;
  }
  dump.file = absl::StrCat(dir, "/rank", target.global_rank, ".json");
  std::ofstream out(dump.file, std::ios::binary | std::ios::trunc);
  out << *json;
  if (!out) {
    dump.error = absl::StrCat("cannot write its dump into ", dir);
    dump.file.clear();
    return;
  }
  dump.bytes = json->size();
  dump.at_exit = true;
}

}  // namespace

FlightReply ParseFlightReply(std::string_view whole, bool eof, size_t max_bytes) {
  FlightReply reply;
  const absl::string_view data(whole.data(), whole.size());  // Debian's absl has its own
  const size_t newline = data.find('\n');
  if (newline == absl::string_view::npos) {
    if (data.size() > kMaxHeader) {
      reply.complete = true;
      reply.error = "a reply without a header line";
    } else if (eof) {
      reply.complete = true;
      reply.error = data.empty() ? "it closed the connection without a reply"
                                 : "a reply cut short in its header line";
    }
    return reply;
  }
  absl::string_view header = data.substr(0, newline);
  if (absl::ConsumePrefix(&header, "error ")) {
    reply.complete = true;
    reply.error = absl::StrCat("it could not dump: ", header.substr(0, 300));
    return reply;
  }
  size_t length = 0;
  if (!absl::ConsumePrefix(&header, "ok ") || !absl::SimpleAtoi(header, &length)) {
    reply.complete = true;
    reply.error =
        absl::StrCat("an unexpected reply: ", data.substr(0, std::min<size_t>(newline, 80)));
    return reply;
  }
  if (length > max_bytes) {
    reply.complete = true;
    reply.error = absl::StrCat("its dump of ", length, " bytes is over the limit of ", max_bytes);
    return reply;
  }
  absl::string_view body = data.substr(newline + 1);
  if (body.size() >= length) {
    reply.complete = true;
    reply.ok = true;
    reply.body = std::string(body.substr(0, length));
  } else if (eof) {
    reply.complete = true;
    reply.error = absl::StrCat("its dump was cut short (", body.size(), " of ", length, " bytes)");
  }
  return reply;
}

std::vector<FlightDump> FetchFlightRecords(const std::vector<FlightTarget>& targets,
                                           const std::string& dir,
                                           const FlightFetchOptions& options,
                                           const KeepReading& keep_reading) {
  std::vector<FlightDump> dumps(targets.size());
  std::vector<Connection> connections(targets.size());
  for (size_t i = 0; i < targets.size(); ++i) {
    dumps[i].global_rank = targets[i].global_rank;
    connections[i].target = &targets[i];
    connections[i].dump = &dumps[i];
    if (targets[i].running) {
      Connect(connections[i]);
    } else {
      TakeExitDump(targets[i], dir, dumps[i]);
      connections[i].done = true;
    }
  }
  const Clock::time_point deadline = Clock::now() + options.budget;
  char buffer[65536];
  while (true) {
    std::vector<pollfd> fds;
    std::vector<Connection*> polled;
    for (Connection& c : connections) {
      if (c.done) continue;
      fds.push_back({c.fd, static_cast<short>(c.sent < kRequest.size() ? POLLOUT : POLLIN), 0});
      polled.push_back(&c);
    }
    if (fds.empty()) break;
    if (keep_reading.fd >= 0) fds.push_back({keep_reading.fd, POLLIN, 0});
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      for (Connection* c : polled) {
        Fail(*c, absl::StrCat("it did not answer within ", options.budget.count() / 1000.0,
                              " s (a worker holding Python's GIL, or stopped)"));
      }
      break;
    }
    if (poll(fds.data(), fds.size(), static_cast<int>(left.count())) < 0 && errno != EINTR) break;
    if (keep_reading.fd >= 0 && (fds.back().revents & POLLIN) != 0) keep_reading.on_readable();
    for (size_t i = 0; i < polled.size(); ++i) {
      Connection& c = *polled[i];
      if (fds[i].revents == 0) continue;
      if (c.sent < kRequest.size()) {
        const ssize_t n = send(c.fd, kRequest.data() + c.sent, kRequest.size() - c.sent,
                               MSG_NOSIGNAL | MSG_DONTWAIT);
        if (n < 0 && errno != EAGAIN && errno != EINTR) {
          Fail(c, absl::StrCat("cannot send the request: ", ErrnoText(errno)));
        } else if (n > 0) {
          c.sent += static_cast<size_t>(n);
        }
        continue;
      }
      const ssize_t n = recv(c.fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (n < 0) {
        Fail(c, absl::StrCat("cannot read its reply: ", ErrnoText(errno)));
        continue;
      }
      c.received.append(buffer, static_cast<size_t>(n));
      FlightReply reply = ParseFlightReply(c.received, n == 0, options.max_bytes);
      if (!reply.complete) continue;
      if (!reply.ok) {
        Fail(c, std::move(reply.error));
        continue;
      }
      c.dump->file = absl::StrCat(dir, "/rank", c.target->global_rank, ".json");
      std::ofstream out(c.dump->file, std::ios::binary | std::ios::trunc);
      out << reply.body;
      out.close();
      if (!out) {
        c.dump->file.clear();
        Fail(c, absl::StrCat("cannot write its dump into ", dir));
        continue;
      }
      c.dump->bytes = reply.body.size();
      close(c.fd);
      c.fd = -1;
      c.done = true;
    }
  }
  for (Connection& c : connections) {
    if (c.fd >= 0) close(c.fd);
  }
  // A worker that died while it was asked (its own collective gave up too) may have left its dump
  // as it died.
  for (size_t i = 0; i < targets.size(); ++i) {
    if (!targets[i].running || !dumps[i].file.empty() || targets[i].socket.empty()) continue;
    struct stat st {};
    if (stat((targets[i].socket + kFlightExitSuffix).c_str(), &st) != 0) continue;
    FlightDump at_exit;
    at_exit.global_rank = targets[i].global_rank;
    TakeExitDump(targets[i], dir, at_exit);
    if (!at_exit.file.empty()) dumps[i] = std::move(at_exit);
  }
  return dumps;
}

std::vector<std::string> FlightVerdict(const std::string& python,
                                       const std::vector<std::string>& env, const std::string& dir,
                                       int world_size, std::chrono::milliseconds timeout,
                                       const KeepReading& keep_reading) {
  if (python.empty()) {
    return {"no verdict: no Python is known to run the analyzer with (--no_python)"};
  }
  const std::string output = dir + "/.verdict";
  const std::string analysis = dir + "/analysis.txt";  // written by the verdict when it ran
  unlink(analysis.c_str());
  const int out = open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (out < 0) return {absl::StrCat("no verdict: cannot create ", output, ": ", ErrnoText(errno))};
  const auto started = Clock::now();
  absl::StatusOr<StartedHelper> helper = StartHelper(
      python, {python, "-m", "mxrun._flight_verdict", dir, std::to_string(world_size)}, env, out);
  close(out);
  if (!helper.ok()) return {absl::StrCat("no verdict: ", helper.status().message())};
  WaitForHelpers({&*helper}, started, started + timeout, keep_reading.fd, keep_reading.on_readable);
  const std::string text = ReadWholeFile(output).value_or("");
  unlink(output.c_str());
  std::vector<std::string> lines;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipWhitespace())) {
    lines.emplace_back(absl::StripAsciiWhitespace(line));
  }
  if (helper->timed_out) {
    return {absl::StrCat("no verdict: ", python, " -m mxrun._flight_verdict did not finish in ",
                         timeout.count() / 1000.0, " s")};
  }
  // No analysis.txt: it did not run to its end (the workers' Python cannot import mxrun, a crash);
  // its last line says why.
  struct stat st {};
  if (stat(analysis.c_str(), &st) != 0) {
    return {absl::StrCat("no verdict: ", python, " -m mxrun._flight_verdict failed",
                         lines.empty() ? "" : absl::StrCat(": ", lines.back().substr(0, 300)))};
  }
  return lines;
}

namespace {

std::string MakeFlightFolder(const std::string& dir, std::string* error) {
  const std::string folder = dir + "/flight_recorder";
  if (mkdir(folder.c_str(), 0755) != 0 && errno != EEXIST) {
    *error = absl::StrCat("cannot create ", folder, ": ", ErrnoText(errno));
  }
  return folder;
}

std::string JoinRanks(const std::set<int>& ranks) { return absl::StrJoin(ranks, ","); }

}  // namespace

FlightRecordSet ToFlightRecordSet(const std::vector<FlightDump>& dumps, int round) {
  FlightRecordSet set;
  set.round = round;
  size_t total = 0;
  for (const FlightDump& dump : dumps) {
    RankFlightRecord rank;
    rank.global_rank = dump.global_rank;
    rank.error = dump.error;
    if (!dump.file.empty()) {
      std::optional<std::string> json = ReadWholeFile(dump.file);
      if (!json) {
        rank.error = absl::StrCat("cannot read back ", dump.file);
      } else if (total + json->size() > kMaxFlightMessage) {
        rank.error = absl::StrCat("left out: this node's dumps are over ", kMaxFlightMessage >> 20,
                                  " MiB (kept on its disk, ", dump.file, ")");
      } else {
        total += json->size();
        rank.json = std::move(*json);
      }
    }
    set.ranks.push_back(std::move(rank));
  }
  return set;
}

std::vector<std::string> WriteOtherNodesDumps(const std::vector<FlightRecordSet>& sets,
                                              const std::set<int>& expected,
                                              const std::string& folder, int* written) {
  std::vector<std::string> lines;
  std::set<int> unheard = expected;
  for (const FlightRecordSet& set : sets) {
    for (const RankFlightRecord& rank : set.ranks) {
      if (unheard.erase(rank.global_rank) == 0) continue;  // not asked for, or already in
      if (rank.json.empty()) {
        lines.push_back(
            absl::StrCat("rank ", rank.global_rank, " (on ", set.host, "): no dump: ", rank.error));
        continue;
      }
      const std::string file = absl::StrCat(folder, "/rank", rank.global_rank, ".json");
      std::ofstream out(file, std::ios::binary | std::ios::trunc);
      out << rank.json;
      if (!out) {
        lines.push_back(absl::StrCat("rank ", rank.global_rank, " (on ", set.host,
                                     "): cannot write its dump into ", folder));
        continue;
      }
      ++*written;
    }
  }
  if (!unheard.empty()) {
    lines.push_back(
        absl::StrCat("rank ", JoinRanks(unheard), ": no answer from their node(s) in time"));
  }
  return lines;
}

std::vector<std::string> TakeFlightRecords(const FlightRecorderConfig& config,
                                           const std::vector<FlightTarget>& targets,
                                           const std::string& dir, int world_size, int round,
                                           const std::set<int>& local_ranks,
                                           const KeepReading& keep_reading) {
  if (!config.on || targets.empty() || dir.empty()) return {};
  std::string error;
  const std::string folder = MakeFlightFolder(dir, &error);
  if (!error.empty()) return {absl::StrCat("flight recorder: ", error)};
  const auto started = Clock::now();
  FlightFetchOptions options;
  options.budget = config.fetch_budget;
  const std::vector<FlightDump> dumps = FetchFlightRecords(targets, folder, options, keep_reading);
  std::vector<std::string> lines = DescribeFlightDumps(dumps);
  int got = static_cast<int>(std::count_if(dumps.begin(), dumps.end(),
                                           [](const FlightDump& d) { return !d.file.empty(); }));
  std::set<int> elsewhere;
  for (int rank = 0; rank < world_size; ++rank) {
    if (local_ranks.count(rank) == 0) elsewhere.insert(rank);
  }
  if (!elsewhere.empty() && config.gather) {
    // Before this node reports the hang: every other node's live ranks are still running.
    int written = 0;
    auto meanwhile = [&keep_reading] {
      if (keep_reading.fd < 0) return;
      pollfd fd{keep_reading.fd, POLLIN, 0};
      if (poll(&fd, 1, 0) > 0 && (fd.revents & POLLIN) != 0) keep_reading.on_readable();
    };
    std::vector<std::string> missing = WriteOtherNodesDumps(
        config.gather(ToFlightRecordSet(dumps, round), elsewhere, config.gather_budget, meanwhile),
        elsewhere, folder, &written);
    lines.push_back(absl::StrCat("dumps of ", written, " of ", elsewhere.size(),
                                 " ranks on other nodes gathered through the master"));
    lines.insert(lines.end(), missing.begin(), missing.end());
    got += written;
  }
  if (got > 0) {
    for (std::string& line : FlightVerdict(config.python, config.env, folder, world_size,
                                           config.verdict_timeout, keep_reading)) {
      lines.push_back(std::move(line));
    }
  }
  for (std::string& line : lines) line = absl::StrCat("flight recorder: ", line);
  spdlog::warn("flight recorder of {} rank(s) taken into {} in {:.2f} s", got, folder,
               std::chrono::duration<double>(Clock::now() - started).count());
  return lines;
}

FlightRecordSet TakeFlightRecordsForPeer(const FlightRecorderConfig& config,
                                         const std::vector<FlightTarget>& targets,
                                         const std::string& dir, int round) {
  FlightRecordSet set;
  set.round = round;
  if (!config.on) {
    for (const FlightTarget& target : targets) {
      set.ranks.push_back({target.global_rank, "", "the flight recorder is off on its node"});
    }
    return set;
  }
  std::string error = dir.empty() ? "no folder to take them into" : "";
  const std::string folder = dir.empty() ? "" : MakeFlightFolder(dir, &error);
  if (!error.empty()) {
    for (const FlightTarget& target : targets) set.ranks.push_back({target.global_rank, "", error});
    return set;
  }
  FlightFetchOptions options;
  options.budget = config.fetch_budget;
  const std::vector<FlightDump> dumps = FetchFlightRecords(targets, folder, options);
  spdlog::warn("flight recorder of {} rank(s) taken into {} for the node that judged a hang",
               dumps.size(), folder);
  return ToFlightRecordSet(dumps, round);
}

std::vector<std::string> DescribeFlightDumps(const std::vector<FlightDump>& dumps) {
  std::vector<std::string> lines;
  std::vector<int> got, at_exit;
  for (const FlightDump& dump : dumps) {
    if (dump.file.empty()) {
      lines.push_back(absl::StrCat("rank ", dump.global_rank, ": no dump: ", dump.error));
    } else {
      got.push_back(dump.global_rank);
      if (dump.at_exit) at_exit.push_back(dump.global_rank);
    }
  }
  if (!got.empty()) {
    auto ranks = [](const std::vector<int>& r) {
      return absl::StrCat(r.size() == 1 ? "rank " : "ranks ", absl::StrJoin(r, ","));
    };
    lines.insert(
        lines.begin(),
        absl::StrCat("dumps of ", ranks(got), " (", got.size(), " of ", dumps.size(), " ranks here",
                     at_exit.empty() ? ""
                                     : absl::StrCat("; ", ranks(at_exit), " written as ",
                                                    at_exit.size() == 1 ? "it" : "they", " died"),
                     ")"));
  }
  return lines;
}

}  // namespace mxrun

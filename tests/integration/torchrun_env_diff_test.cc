// The worker environment of torchrun (PyTorch 2.13, the project's .venv: TORCHRUN_BIN; 2.15's
// under scripts/check-torch215.sh, through MXRUN_TEST_TORCH_ENV) and of mxrun, diffed live: one
// small Python worker dumps its whole environment under each launcher, in three layouts (one node
// without --standalone and without a port, --standalone, two nodes with c10d on 127.0.0.1), and
// what each launcher added to, changed in or removed from the environment it was given is
// compared rank by rank:
//  - every variable torchrun sets, mxrun sets to the same value;
//  - values that are per-run by nature (ports, random run ids, the error and timer files) are
//    compared by shape, and both launchers' MASTER_ADDR must be an address of this host;
//  - the rows of docs/CONTRACT.md's table "torchrun 2.13's worker environment, diffed live" (read
//  at
//    test time, CONTRACT_MD) are the known differences; a row may name the layouts it is about
//    ("one-node", "standalone", "two-nodes") after the variable, else it covers all three;
//  - mxrun's own MXRUN_* variables are allowed, and listed in the test's output.
// Also PyTorch 2.13's @record error files under both launchers. (Its FileTimerClient under mxrun is
// covered by hang_test.cc with scripts/examples/file_timer.py.)
//
// Self-check of the comparison: MXRUN_ENVDIFF_MUTATE (read by this test, never passed on) changes
// mxrun's side before it is compared, to show that a difference fails the test:
// "drop:VAR" removes VAR from mxrun's worker environments (and a top-level key VAR from its @record
// files); "set:VAR=VALUE" sets it.
// Every wait is bounded; ports come from the kernel; every endpoint is 127.0.0.1 or localhost.

#include <catch2/catch.hpp>

#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <memory>
#include <optional>
#include <regex>
#include <set>
#include <sstream>

#include "nlohmann/json.hpp"
#include "rendezvous/net.h"
#include "tests/subprocess.h"
#include "tests/temp_dir.h"

extern char** environ;

using namespace std::chrono_literals;
using mxrun::testing::Describe;
using mxrun::testing::ProcessResult;
using mxrun::testing::ReadFile;
using mxrun::testing::Subprocess;
using mxrun::testing::TempDir;

namespace {

using Env = std::map<std::string, std::string>;

// Dumps the worker's environment to <dir>/<tag>_rank<RANK>.json, and what it saw of its files to
// <dir>/<tag>_rank<RANK>.facts.json. Imports nothing from PyTorch (fast).
const char kDumpScript[] = R"PY(import json, os, stat, sys

out, tag = sys.argv[1], sys.argv[2]
env = dict(os.environ)
base = os.path.join(out, f"{tag}_rank{env['RANK']}")


def is_fifo(path):
    try:
        return stat.S_ISFIFO(os.stat(path).st_mode)
    except OSError:
        return False


error_file = env.get("TORCHELASTIC_ERROR_FILE", "")
facts = {
    "error_dir_exists": bool(error_file) and os.path.isdir(os.path.dirname(error_file)),
    "error_file_exists": bool(error_file) and os.path.exists(error_file),
    "timer_is_fifo": is_fifo(env.get("TORCHELASTIC_TIMER_FILE", "")),
}
for suffix, doc in ((".json", env), (".facts.json", facts)):
    with open(base + suffix + ".tmp", "w") as f:
        json.dump(doc, f, sort_keys=True, indent=1)
    os.replace(base + suffix + ".tmp", base + suffix)
)PY";

// PyTorch's @record on a function that raises; the error file it wrote is copied to
// <dir>/<tag>_rank<RANK>_error.json (the launchers may remove theirs when they exit). The worker
// prints no traceback of its own, so the message reaches the launcher's output only through the
// error file.
// Every rank copies its error file, then waits (at most 60 s) until every rank has: the first
// failure makes a launcher stop the others, which must not happen before they wrote theirs.
const char kRecordScript[] = R"PY(import os, shutil, sys, time

from torch.distributed.elastic.multiprocessing.errors import record

out, tag = sys.argv[1], sys.argv[2]
rank = os.environ["RANK"]


@record
def main():
    raise RuntimeError(f"envdiff record boom from rank {rank}")


if __name__ == "__main__":
    sys.excepthook = lambda *exc_info: None  # exit code 1, nothing on stderr
    try:
        main()
    finally:
        error_file = os.environ.get("TORCHELASTIC_ERROR_FILE", "")
        if error_file and os.path.exists(error_file):
            shutil.copyfile(error_file, os.path.join(out, f"{tag}_rank{rank}_error.json"))
        world = int(os.environ["WORLD_SIZE"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not all(
                os.path.exists(os.path.join(out, f"{tag}_rank{r}_error.json")) for r in range(world)):
            time.sleep(0.01)
)PY";

// torchrun's worker contract: a parent environment that already carries any of these (say, a test
// run started by a launcher) would hide what the launcher sets.
const std::set<std::string> kContractNames = {"RANK",
                                              "LOCAL_RANK",
                                              "WORLD_SIZE",
                                              "LOCAL_WORLD_SIZE",
                                              "GROUP_RANK",
                                              "GROUP_WORLD_SIZE",
                                              "ROLE_RANK",
                                              "ROLE_NAME",
                                              "ROLE_WORLD_SIZE",
                                              "MASTER_ADDR",
                                              "MASTER_PORT",
                                              "OMP_NUM_THREADS",
                                              "TORCH_NCCL_ASYNC_ERROR_HANDLING",
                                              "NCCL_ASYNC_ERROR_HANDLING",
                                              "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                                              "NOTIFY_SOCKET",
                                              "WATCHDOG_USEC",
                                              "WATCHDOG_PID"};

bool StartsWith(const std::string& s, const std::string& prefix) { return s.rfind(prefix, 0) == 0; }

// The environment both launchers get: the test's, minus every launcher's variables, plus `add`;
// and the removals and additions that make Subprocess pass exactly that.
struct ParentEnv {
  Env env;        // what the launcher starts with
  Env overrides;  // for Subprocess (an empty value removes)
};

ParentEnv MakeParentEnv(const Env& add) {
  ParentEnv parent;
  for (char** e = environ; *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq == std::string::npos) continue;
    const std::string key = entry.substr(0, eq);
    if (StartsWith(key, "PET_") || StartsWith(key, "MXRUN_") || StartsWith(key, "TORCHELASTIC_") ||
        StartsWith(key, "TORCH_ELASTIC_") || kContractNames.count(key) != 0) {
      parent.overrides[key] = "";
    } else {
      parent.env[key] = entry.substr(eq + 1);
    }
  }
  for (const auto& [key, value] : add) {
    parent.env[key] = value;
    parent.overrides[key] = value;
  }
  return parent;
}

// MXRUN_ENVDIFF_MUTATE applied to one of mxrun's worker environments (see the header).
void Mutate(Env& env) {
  const char* mutate = std::getenv("MXRUN_ENVDIFF_MUTATE");
  if (mutate == nullptr || *mutate == '\0') return;
  const std::string m = mutate;
  if (StartsWith(m, "drop:")) {
    env.erase(m.substr(5));
  } else if (StartsWith(m, "set:") && m.find('=') != std::string::npos) {
    const size_t eq = m.find('=');
    env[m.substr(4, eq - 4)] = m.substr(eq + 1);
  }
}

void Mutate(nlohmann::json& doc) {
  const char* mutate = std::getenv("MXRUN_ENVDIFF_MUTATE");
  if (mutate != nullptr && StartsWith(mutate, "drop:") && doc.is_object()) {
    doc.erase(std::string(mutate).substr(5));
  }
}

// One row of the known-differences table: a variable and the layouts it covers (empty: all).
struct KnownDifference {
  std::string variable;
  std::set<std::string> layouts;
  std::string row;
};

const std::vector<std::string> kLayoutNames = {"one-node", "standalone", "two-nodes"};

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string cell;
  bool code = false;
  for (size_t i = 1; i < line.size(); ++i) {  // after the leading '|'
    const char c = line[i];
    if (c == '`') code = !code;
    if (c == '|' && !code) {
      cells.push_back(cell);
      cell.clear();
    } else {
      cell += c;
    }
  }
  return cells;
}

// The rows of "### torchrun 2.13's worker environment, diffed live" in docs/CONTRACT.md.
std::vector<KnownDifference> ReadKnownDifferences() {
  std::istringstream in(ReadFile(CONTRACT_MD));
  std::vector<KnownDifference> known;
  bool in_section = false, in_table = false;
  for (std::string line; std::getline(in, line);) {
    if (StartsWith(line, "#")) {
      if (in_section) break;
      in_section = StartsWith(line, "### torchrun 2.13's worker environment, diffed live");
      continue;
    }
    if (!in_section) continue;
    if (!StartsWith(line, "|")) {
      if (in_table) break;
      continue;
    }
    const bool header = !in_table;
    in_table = true;
    std::vector<std::string> cells = Cells(line);
    if (header || cells.empty() || StartsWith(cells[0], "---")) continue;
    const std::string& first = cells[0];
    const size_t open = first.find('`');
    const size_t close = open == std::string::npos ? open : first.find('`', open + 1);
    if (close == std::string::npos) continue;
    KnownDifference row{first.substr(open + 1, close - open - 1), {}, line};
    for (const std::string& layout : kLayoutNames) {
      if (first.find(layout, close) != std::string::npos) row.layouts.insert(layout);
    }
    known.push_back(row);
  }
  return known;
}

struct Layout {
  std::string name;                // as the CONTRACT table names it
  std::vector<std::string> flags;  // both launchers' flags (the endpoint is added per run)
  int nodes = 1;
  int world_size = 2;
  Env add;  // added to the parent environment
};

// One launcher's run of a layout: every worker's environment and facts, by global rank.
struct LayoutRun {
  std::map<int, Env> env;
  std::map<int, nlohmann::json> facts;
  std::vector<ProcessResult> results;
};

std::vector<std::string> LauncherArgv(const std::string& launcher, const Layout& layout,
                                      const std::string& endpoint, const std::string& script,
                                      const std::string& dir, const std::string& tag) {
  std::vector<std::string> argv{launcher};
  argv.insert(argv.end(), layout.flags.begin(), layout.flags.end());
  if (!endpoint.empty()) argv.push_back("--rdzv_endpoint=" + endpoint);
  argv.insert(argv.end(), {"--monitor_interval=0.1", script, dir, tag});
  return argv;
}

// Starts `layout.nodes` processes of `launcher` at once and waits (bounded) for all of them.
std::vector<ProcessResult> RunLauncher(const std::string& launcher, const Layout& layout,
                                       const ParentEnv& parent, const std::string& script,
                                       const std::string& dir, const std::string& tag) {
  std::string endpoint;
  if (layout.nodes > 1) {
    absl::StatusOr<int> port = mxrun::PickFreePort("127.0.0.1");
    REQUIRE(port.ok());
    endpoint = "127.0.0.1:" + std::to_string(*port);
  }
  std::vector<std::unique_ptr<Subprocess>> nodes;
  for (int n = 0; n < layout.nodes; ++n) {
    nodes.push_back(std::make_unique<Subprocess>(
        LauncherArgv(launcher, layout, endpoint, script, dir, tag), parent.overrides));
  }
  std::vector<ProcessResult> results;
  for (auto& node : nodes) results.push_back(node->Wait(120s));
  return results;
}

LayoutRun RunLayout(const std::string& launcher, const Layout& layout, const ParentEnv& parent,
                    const std::string& script, const std::string& dir, const std::string& tag,
                    bool mutate) {
  LayoutRun run;
  run.results = RunLauncher(launcher, layout, parent, script, dir, tag);
  for (const ProcessResult& r : run.results) {
    INFO(tag << ":\n" << Describe(r));
    REQUIRE(r.exit_code == 0);
  }
  for (int rank = 0; rank < layout.world_size; ++rank) {
    const std::string base = dir + "/" + tag + "_rank" + std::to_string(rank);
    const std::string text = ReadFile(base + ".json");
    INFO(tag << ": " << base << ".json");
    REQUIRE(!text.empty());
    run.env[rank] = nlohmann::json::parse(text).get<Env>();
    if (mutate) Mutate(run.env[rank]);
    run.facts[rank] = nlohmann::json::parse(ReadFile(base + ".facts.json"));
  }
  return run;
}

// What a launcher did to one variable: set (added or changed) to a value, removed, or nothing.
struct Change {
  enum Kind { kNone, kSet, kRemoved } kind = kNone;
  std::string value;
  std::string Show() const {
    return kind == kSet ? "'" + value + "'" : kind == kRemoved ? "<removed>" : "<inherited/unset>";
  }
};

Change ChangeOf(const Env& parent, const Env& worker, const std::string& key) {
  auto p = parent.find(key);
  auto w = worker.find(key);
  if (w == worker.end()) return p == parent.end() ? Change{} : Change{Change::kRemoved, ""};
  if (p != parent.end() && p->second == w->second) return Change{};
  return Change{Change::kSet, w->second};
}

std::set<std::string> ChangedKeys(const Env& parent, const Env& worker) {
  std::set<std::string> keys;
  for (const auto& [key, value] : worker) {
    if (ChangeOf(parent, worker, key).kind != Change::kNone) keys.insert(key);
  }
  for (const auto& [key, value] : parent) {
    if (worker.count(key) == 0) keys.insert(key);
  }
  return keys;
}

const std::regex kUuid4("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}");

bool IsPort(const std::string& s) {
  return std::regex_match(s, std::regex("[1-9][0-9]{0,4}")) && std::stoi(s) <= 65535;
}

// True when `host` resolves to an address of this machine (one a socket can bind).
bool NamesThisHost(const std::string& host) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &found) != 0) return false;
  bool local = false;
  for (addrinfo* a = found; a != nullptr && !local; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    local = bind(fd, a->ai_addr, a->ai_addrlen) == 0;  // port 0 in the address: any free one
    close(fd);
  }
  freeaddrinfo(found);
  return local;
}

// The last `n` components of a path.
std::string Tail(const std::string& path, int n) {
  size_t pos = path.size();
  for (int i = 0; i < n && pos != std::string::npos && pos > 0; ++i) pos = path.rfind('/', pos - 1);
  return pos == std::string::npos ? path : path.substr(pos + 1);
}

// Variables whose value is per-run by nature, and the shape mxrun's must have given torchrun's:
// an empty string when it fits, else why not. `nullopt`: compare values.
std::optional<std::string> ShapeMismatch(const std::string& key, const std::string& tr,
                                         const std::string& mx, const nlohmann::json& tr_facts,
                                         const nlohmann::json& mx_facts,
                                         const std::string& tmpdir) {
  if (key == "MASTER_PORT") {
    if (!IsPort(mx)) return "not a port number";
    // torchrun chose this port itself (c10d on a free port): a fixed default would collide with
    // the next job on the host.
    if (tr != "29500" && mx == "29500")
      return "the fixed default 29500 where torchrun picks a free port";
    return "";
  }
  if (key == "TORCHELASTIC_RUN_ID" && std::regex_match(tr, kUuid4)) {
    return std::regex_match(mx, kUuid4) ? "" : "not a random uuid4 as torchrun's";
  }
  if (key == "TORCHELASTIC_ERROR_FILE") {
    // torchrun: $TMPDIR/torchelastic_*/<run>_*/attempt_<N>/<local_rank>/error.json
    if (!StartsWith(mx, tmpdir + "/")) return "not under the launcher's TMPDIR " + tmpdir;
    if (Tail(mx, 3) != Tail(tr, 3)) return "does not end in " + Tail(tr, 3) + " as torchrun's";
    if (tr_facts.value("error_dir_exists", false) && !mx_facts.value("error_dir_exists", false)) {
      return "its folder did not exist when the worker started";
    }
    if (mx_facts.value("error_file_exists", true)) return "the file already existed";
    return "";
  }
  if (key == "TORCHELASTIC_TIMER_FILE") {
    if (!StartsWith(mx, "/")) return "not an absolute path";
    if (StartsWith(tr, tmpdir + "/") && !StartsWith(mx, tmpdir + "/")) {
      return "not under the launcher's TMPDIR " + tmpdir;
    }
    if (tr_facts.value("timer_is_fifo", false) && !mx_facts.value("timer_is_fifo", false)) {
      return "not a named pipe while the worker ran";
    }
    return "";
  }
  return std::nullopt;
}

struct Comparison {
  std::vector<std::string> failures;                        // unexplained differences
  std::map<std::string, std::set<std::string>> known_hits;  // VAR -> layouts where a row matched
  std::set<size_t> rows_used;                               // indexes into the known rows
  std::map<std::string, std::string> mxrun_own;             // MXRUN_* -> a value seen
  std::string table;  // the compact per-layout table for the output
};

void CompareLayout(const Layout& layout, const Env& parent, const LayoutRun& tr,
                   const LayoutRun& mx, const std::vector<KnownDifference>& known,
                   Comparison& out) {
  const std::string tmpdir = parent.at("TMPDIR");
  std::map<std::string, std::map<std::string, std::string>> rows;  // var -> launcher -> rank0 view
  for (int rank = 0; rank < layout.world_size; ++rank) {
    const Env& t = tr.env.at(rank);
    const Env& m = mx.env.at(rank);
    std::set<std::string> keys = ChangedKeys(parent, t);
    for (const std::string& key : ChangedKeys(parent, m)) keys.insert(key);
    for (const std::string& key : keys) {
      const Change ct = ChangeOf(parent, t, key);
      const Change cm = ChangeOf(parent, m, key);
      if (rank == 0) {
        rows[key]["torchrun"] = ct.Show();
        rows[key]["mxrun"] = cm.Show();
      }
      std::optional<std::string> shape;
      bool same = ct.kind == cm.kind && ct.value == cm.value;
      if (ct.kind == Change::kSet && cm.kind == Change::kSet) {
        shape =
            ShapeMismatch(key, ct.value, cm.value, tr.facts.at(rank), mx.facts.at(rank), tmpdir);
        if (shape) same = shape->empty();
      }
      if (same) continue;
      bool explained = false;
      for (size_t i = 0; i < known.size(); ++i) {
        if (known[i].variable == key &&
            (known[i].layouts.empty() || known[i].layouts.count(layout.name) != 0)) {
          explained = true;
          out.rows_used.insert(i);
          out.known_hits[key].insert(layout.name);
        }
      }
      if (explained) continue;
      if (ct.kind == Change::kNone && cm.kind == Change::kSet && StartsWith(key, "MXRUN_")) {
        out.mxrun_own[key] = cm.value;
        continue;
      }
      out.failures.push_back(layout.name + ", rank " + std::to_string(rank) + ": " + key +
                             ": torchrun " + ct.Show() + ", mxrun " + cm.Show() +
                             (shape && !shape->empty() ? " (" + *shape + ")" : ""));
    }
  }
  // Every launcher here runs on this host: MASTER_ADDR (whatever name it uses) must reach it.
  for (const auto* run : {&tr, &mx}) {
    const std::string who = run == &tr ? "torchrun" : "mxrun";
    for (const auto& [rank, env] : run->env) {
      const std::string addr = env.count("MASTER_ADDR") ? env.at("MASTER_ADDR") : "";
      if (!NamesThisHost(addr)) {
        out.failures.push_back(layout.name + ", rank " + std::to_string(rank) + ": " + who +
                               "'s MASTER_ADDR '" + addr + "' is not an address of this host");
      }
    }
  }
  // One run's values agree on every rank (both nodes), for both launchers.
  for (const auto* run : {&tr, &mx}) {
    const std::string who = run == &tr ? "torchrun" : "mxrun";
    for (const char* key : {"MASTER_ADDR", "MASTER_PORT", "TORCHELASTIC_RUN_ID"}) {
      std::set<std::string> values;
      for (const auto& [rank, env] : run->env) values.insert(env.count(key) ? env.at(key) : "");
      if (values.size() != 1) {
        out.failures.push_back(layout.name + ": " + who + "'s " + key + " differs between ranks");
      }
    }
    std::set<std::string> error_files;
    for (const auto& [rank, env] : run->env) {
      if (env.count("TORCHELASTIC_ERROR_FILE"))
        error_files.insert(env.at("TORCHELASTIC_ERROR_FILE"));
    }
    if (error_files.size() != run->env.size()) {
      out.failures.push_back(layout.name + ": " + who +
                             "'s workers do not each have an error file");
    }
  }
  out.table += "\n" + layout.name + " (rank 0; torchrun | mxrun):\n";
  for (const auto& [key, views] : rows) {
    out.table += "  " + key + " | " + views.at("torchrun") + " | " + views.at("mxrun") + "\n";
  }
}

// The key structure of an @record error file: its top-level keys, and those of "message" and
// "message.extraInfo" when they are objects.
std::set<std::string> KeyShape(const nlohmann::json& doc) {
  std::set<std::string> keys;
  if (!doc.is_object()) return keys;
  for (const auto& [key, value] : doc.items()) keys.insert(key);
  if (doc.contains("message") && doc["message"].is_object()) {
    for (const auto& [key, value] : doc["message"].items()) keys.insert("message." + key);
    const auto& message = doc["message"];
    if (message.contains("extraInfo") && message["extraInfo"].is_object()) {
      for (const auto& [key, value] : message["extraInfo"].items()) {
        keys.insert("message.extraInfo." + key);
      }
    }
  }
  return keys;
}

std::string Join(const std::set<std::string>& items, const std::string& sep = ", ") {
  std::string out;
  for (const std::string& item : items) out += (out.empty() ? "" : sep) + item;
  return out;
}

// "torchrun 2.13.0": the version of the torchrun compared (2.15's under scripts/check-torch215.sh,
// through MXRUN_TEST_TORCH_ENV), read without importing torch.
std::string TorchrunName() {
  const ProcessResult r = mxrun::testing::Run(
      {PYTHON_BIN, "-c", "import importlib.metadata as m; print(m.version('torch'))"});
  std::string version = r.out.substr(0, r.out.find_first_of("+\n"));
  return "torchrun " + (version.empty() ? "of " + std::string(PYTHON_BIN) : version);
}

}  // namespace

TEST_CASE("worker environments of torchrun 2.13 and mxrun agree when diffed live in three layouts",
          "[integration][envdiff]") {
  const std::vector<KnownDifference> known = ReadKnownDifferences();
  REQUIRE(!known.empty());  // the table is there and was read
  TempDir dir;
  const std::string script = dir.path() + "/dump_env.py";
  std::ofstream(script) << kDumpScript;
  const std::string tmpdir = dir.path() + "/tmp";
  REQUIRE(mxrun::MakeDirs(tmpdir));

  const std::vector<Layout> layouts = {
      // torchrun 2.12+ turns this into c10d on localhost:0 with a random run id.
      {"one-node", {"--nproc_per_node=2"}, 1, 2, {}},
      // With PyTorch's FileTimer server on: TORCHELASTIC_TIMER_FILE too.
      {"standalone",
       {"--standalone", "--nproc_per_node=2"},
       1,
       2,
       {{"TORCHELASTIC_ENABLE_FILE_TIMER", "1"}}},
      {"two-nodes",
       {"--nnodes=2", "--nproc_per_node=1", "--rdzv_backend=c10d", "--rdzv_id=envdiff-two-nodes"},
       2,
       2,
       {}},
  };
  Comparison comparison;
  std::string timings;
  for (const Layout& layout : layouts) {
    Env add = layout.add;
    add["PYTHON_EXEC"] = PYTHON_BIN;
    add["TMPDIR"] = tmpdir;
    const ParentEnv parent = MakeParentEnv(add);
    const LayoutRun tr = RunLayout(TORCHRUN_BIN, layout, parent, script, dir.path(),
                                   "torchrun_" + layout.name, false);
    const LayoutRun mx =
        RunLayout(MXRUN_BIN, layout, parent, script, dir.path(), "mxrun_" + layout.name, true);
    timings += " " + layout.name + ": torchrun " +
               std::to_string(tr.results.front().elapsed.count()) + " ms, mxrun " +
               std::to_string(mx.results.front().elapsed.count()) + " ms;";
    CompareLayout(layout, parent.env, tr, mx, known, comparison);
  }

  std::string stale;
  for (size_t i = 0; i < known.size(); ++i) {
    if (comparison.rows_used.count(i) == 0) stale += "\n  " + known[i].row;
  }
  std::string own, known_seen;
  for (const auto& [key, value] : comparison.mxrun_own) own += " " + key + "=" + value;
  for (const auto& [key, layouts] : comparison.known_hits) {
    known_seen += (known_seen.empty() ? "" : ", ") + key + " (" + Join(layouts, " ") + ")";
  }
  const std::string summary = "what each launcher added or changed:" + comparison.table +
                              "known differences (" + CONTRACT_MD + "): " + known_seen +
                              "\nmxrun's own variables:" + own + "\ntimings:" + timings;
  INFO(summary);
  WARN(TorchrunName() << " vs mxrun, worker environments: " << comparison.failures.size()
                      << " unexplained difference(s); known: " << known_seen
                      << "; mxrun's own:" << own << ";" << timings
                      << (stale.empty()
                              ? ""
                              : "\nrows of the known-differences table that matched nothing "
                                "here (stale, or about another machine):" +
                                    stale));
  for (const std::string& failure : comparison.failures) {
    INFO("not in the known-differences table of " << CONTRACT_MD);
    CHECK(failure == "");
  }
  CHECK(comparison.failures.empty());
  // mxrun's own variables that every worker gets (docs/CONTRACT.md, "Environment of every worker").
  CHECK(comparison.mxrun_own.count("MXRUN_HOST") == 1);
}

TEST_CASE("a worker's @record error file under torchrun 2.13 and under mxrun",
          "[integration][envdiff]") {
  TempDir dir;
  const std::string script = dir.path() + "/record_raise.py";
  std::ofstream(script) << kRecordScript;
  const std::string tmpdir = dir.path() + "/tmp";
  REQUIRE(mxrun::MakeDirs(tmpdir));
  const ParentEnv parent = MakeParentEnv({{"PYTHON_EXEC", PYTHON_BIN}, {"TMPDIR", tmpdir}});
  const Layout layout{"standalone", {"--standalone", "--nproc_per_node=2"}, 1, 2, {}};

  std::map<std::string, std::map<int, nlohmann::json>> files;  // launcher -> rank -> error file
  std::map<std::string, int> exit_codes;
  for (const std::string launcher : {"torchrun", "mxrun"}) {
    const std::string bin = launcher == "torchrun" ? TORCHRUN_BIN : MXRUN_BIN;
    std::vector<ProcessResult> results =
        RunLauncher(bin, layout, parent, script, dir.path(), launcher);
    REQUIRE(results.size() == 1);
    const ProcessResult& r = results.front();
    INFO(launcher << ":\n" << Describe(r));
    CHECK(!r.timed_out);
    CHECK(r.exit_code != 0);
    exit_codes[launcher] = r.exit_code;
    // The launcher's failure report names the worker's exception, read from its error file (the
    // worker itself prints no traceback).
    CHECK_THAT(r.err, Catch::Contains("RuntimeError: envdiff record boom from rank "));
    for (int rank = 0; rank < layout.world_size; ++rank) {
      const std::string path =
          dir.path() + "/" + launcher + "_rank" + std::to_string(rank) + "_error.json";
      const std::string text = ReadFile(path);
      INFO(path);
      REQUIRE(!text.empty());  // TORCHELASTIC_ERROR_FILE was set, and @record wrote it
      nlohmann::json doc = nlohmann::json::parse(text);
      if (launcher == "mxrun") Mutate(doc);
      CHECK_THAT(doc.dump(),
                 Catch::Contains("envdiff record boom from rank " + std::to_string(rank)));
      files[launcher][rank] = doc;
    }
  }
  CHECK(exit_codes["torchrun"] == exit_codes["mxrun"]);
  for (int rank = 0; rank < layout.world_size; ++rank) {
    const std::set<std::string> tr = KeyShape(files["torchrun"][rank]);
    const std::set<std::string> mx = KeyShape(files["mxrun"][rank]);
    INFO("rank " << rank << ": torchrun's error file has {" << Join(tr) << "}, mxrun's {"
                 << Join(mx) << "}");
    CHECK(!tr.empty());
    CHECK(tr == mx);
  }
}

#include "rendezvous/etcd/etcd_state_layout.h"

#include <map>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "rendezvous/master_state/master_state_file.h"

namespace mxrun {
namespace {

std::string Generation(int64_t generation) { return absl::StrFormat("%016d", generation); }

std::string GenerationPrefix(const std::string& prefix, int64_t generation) {
  return absl::StrCat(EtcdStatePrefix(prefix), Generation(generation), "/");
}

std::string PageKey(const std::string& prefix, int64_t generation, size_t page) {
  return absl::StrCat(GenerationPrefix(prefix, generation), "page/", absl::StrFormat("%06d", page));
}

// The runs cut into pages of at most `max_bytes` of JSON each: whole runs where they fit, a large
// run's members spread over several partial copies of it. Sizes are added up member by member
// (each member's JSON measured once) rather than by serialising a growing page again and again.
std::vector<std::string> Paginate(const std::vector<PersistedRun>& runs, size_t max_bytes) {
  const size_t empty_doc = PersistedRunsToJson({}).size();
  std::vector<std::string> pages;
  std::vector<PersistedRun> page;
  size_t page_bytes = empty_doc;
  auto flush = [&] {
    if (!page.empty()) pages.push_back(PersistedRunsToJson(page));
    page.clear();
    page_bytes = empty_doc;
  };
  for (const PersistedRun& run : runs) {
    PersistedRun empty = run;
    empty.members.clear();
    const size_t run_bytes = PersistedRunsToJson({empty}).size() - empty_doc + 8;
    if (page_bytes + run_bytes > max_bytes) flush();
    page.push_back(empty);
    page_bytes += run_bytes;
    PersistedRun one = empty;
    one.members.resize(1);
    for (const PersistedMember& member : run.members) {
      one.members[0] = member;
      const size_t member_bytes = PersistedRunsToJson({one}).size() - run_bytes - empty_doc + 16;
      if (page_bytes + member_bytes > max_bytes && !page.back().members.empty()) {
        flush();
        page.push_back(empty);
        page_bytes += run_bytes;
      }
      page.back().members.push_back(member);
      page_bytes += member_bytes;
    }
  }
  flush();
  if (pages.empty()) pages.push_back(PersistedRunsToJson({}));  // an empty state is a state too
  return pages;
}

}  // namespace

std::string EtcdStatePrefix(const std::string& prefix) { return prefix + "/state/"; }

std::string EtcdStateCurrentKey(const std::string& prefix) {
  return EtcdStatePrefix(prefix) + "current";
}

std::vector<std::vector<EtcdOp>> PlanEtcdStateWrite(const std::string& prefix, int64_t generation,
                                                    int64_t previous,
                                                    const std::vector<PersistedRun>& runs,
                                                    const std::vector<int64_t>& stale,
                                                    const EtcdStateLimits& limits) {
  std::vector<std::vector<EtcdOp>> txns(1);
  size_t bytes = 0;
  const std::vector<std::string> pages = Paginate(runs, limits.max_page_bytes);
  for (size_t i = 0; i < pages.size(); ++i) {
    EtcdOp put{EtcdOp::Kind::kPut, PageKey(prefix, generation, i), pages[i]};
    const size_t size = put.key.size() + put.value.size();
    if (!txns.back().empty() &&
        (txns.back().size() + 1 > limits.max_txn_ops || bytes + size > limits.max_txn_bytes)) {
      txns.emplace_back();
      bytes = 0;
    }
    txns.back().push_back(std::move(put));
    bytes += size;
  }
  // The switch: `current` and the removal of what it replaces, in a transaction of its own
  // unless it fits in the last one.
  std::vector<EtcdOp> commit{
      {EtcdOp::Kind::kPut, EtcdStateCurrentKey(prefix), Generation(generation)}};
  std::set<int64_t> old(stale.begin(), stale.end());
  if (previous > 0) old.insert(previous);
  old.erase(generation);
  for (int64_t g : old) {
    commit.push_back({EtcdOp::Kind::kDeletePrefix, GenerationPrefix(prefix, g), ""});
  }
  size_t commit_bytes = 0;
  for (const EtcdOp& op : commit) commit_bytes += op.key.size() + op.value.size();
  if (txns.back().size() + commit.size() > limits.max_txn_ops ||
      bytes + commit_bytes > limits.max_txn_bytes) {
    txns.emplace_back();
  }
  for (EtcdOp& op : commit) txns.back().push_back(std::move(op));
  return txns;
}

absl::StatusOr<EtcdState> ReadEtcdState(const std::string& prefix,
                                        const std::vector<EtcdKeyValue>& kvs) {
  const std::string base = EtcdStatePrefix(prefix);
  EtcdState state;
  // generation -> page name -> its key and value
  std::map<int64_t, std::map<std::string, const EtcdKeyValue*>> pages;
  for (const EtcdKeyValue& kv : kvs) {
    if (!absl::StartsWith(kv.key, base)) continue;
    const std::string rest = kv.key.substr(base.size());
    if (rest == "current") {
      if (!absl::SimpleAtoi(kv.value, &state.generation) || state.generation <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("etcd key ", kv.key, " holds '", kv.value, "', not a generation"));
      }
      continue;
    }
    std::vector<std::string> parts = absl::StrSplit(rest, '/');
    int64_t generation = 0;
    if (parts.size() != 3 || parts[1] != "page" || !absl::SimpleAtoi(parts[0], &generation)) {
      continue;  // not ours to read
    }
    pages[generation][parts[2]] = &kv;
  }
  for (const auto& [generation, unused] : pages) {
    if (generation != state.generation) state.stale.push_back(generation);
  }
  if (state.generation == 0) return state;
  auto current = pages.find(state.generation);
  if (current == pages.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("etcd state generation ", state.generation, " under ", base, " has no pages"));
  }
  std::map<std::string, size_t> index;  // run id -> position in state.runs
  for (const auto& [name, kv] : current->second) {
    absl::StatusOr<std::vector<PersistedRun>> runs = PersistedRunsFromJson(kv->value);
    if (!runs.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("etcd state page ", kv->key, ": ", runs.status().message()));
    }
    for (PersistedRun& run : *runs) {
      auto [it, inserted] = index.emplace(run.run_id, state.runs.size());
      if (inserted) {
        state.runs.push_back(std::move(run));
      } else {
        std::vector<PersistedMember>& members = state.runs[it->second].members;
        members.insert(members.end(), run.members.begin(), run.members.end());
      }
    }
  }
  return state;
}

}  // namespace mxrun

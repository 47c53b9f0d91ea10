#include "rendezvous/master_state/rank_order.h"

#include "absl/strings/ascii.h"
#include "absl/strings/str_split.h"

namespace mxrun {

bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const bool da = absl::ascii_isdigit(static_cast<unsigned char>(a[i]));
    const bool db = absl::ascii_isdigit(static_cast<unsigned char>(b[j]));
    if (da && db) {
      size_t ei = i, ej = j;
      while (ei < a.size() && absl::ascii_isdigit(static_cast<unsigned char>(a[ei]))) ++ei;
      while (ej < b.size() && absl::ascii_isdigit(static_cast<unsigned char>(b[ej]))) ++ej;
      // Compare numerically without overflow: strip leading zeros, then by length, then text.
      size_t si = i, sj = j;
      while (si + 1 < ei && a[si] == '0') ++si;
      while (sj + 1 < ej && b[sj] == '0') ++sj;
      if (ei - si != ej - sj) return ei - si < ej - sj;
      int cmp = a.compare(si, ei - si, b, sj, ej - sj);
      if (cmp != 0) return cmp < 0;
      i = ei;
      j = ej;
      continue;
    }
    if (a[i] != b[j]) return a[i] < b[j];
    ++i;
    ++j;
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> TopologyComponents(const std::string& topology) {
  if (topology.empty()) return {};
  return absl::StrSplit(topology, '/');
}

RankOrder::RankOrder(const std::vector<Entry>& nodes) {
  for (const Entry& e : nodes) {
    paths_[e.desc] = TopologyComponents(e.desc->topology);
    if (e.desc->hosts_master) master_path_ = paths_[e.desc];
  }
}

bool RankOrder::Less(const Entry& a, const Entry& b) const {
  const std::vector<std::string>& pa = PathOf(a.desc);
  const std::vector<std::string>& pb = PathOf(b.desc);
  bool on_master_path = true;  // the components so far are the master's
  for (size_t i = 0; i < pa.size() && i < pb.size(); ++i) {
    if (pa[i] != pb[i]) {
      if (on_master_path && i < master_path_.size()) {
        const bool am = pa[i] == master_path_[i], bm = pb[i] == master_path_[i];
        if (am != bm) return am;
      }
      return NaturalLess(pa[i], pb[i]);
    }
    on_master_path = on_master_path && i < master_path_.size() && pa[i] == master_path_[i];
  }
  if (pa.size() != pb.size()) return pa.size() < pb.size();
  if (a.desc->hosts_master != b.desc->hosts_master) return a.desc->hosts_master;
  if (a.desc->host != b.desc->host) return NaturalLess(a.desc->host, b.desc->host);
  return a.join_order < b.join_order;
}

}  // namespace mxrun

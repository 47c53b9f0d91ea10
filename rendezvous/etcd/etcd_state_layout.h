#pragma once
// How the master's kept state (MasterState::Persisted(), what --state_dir keeps in a file) is laid
// out in etcd, so that a 16,384-node job fits etcd's limits: values and whole requests of at most
// 1.5 MiB (--max-request-bytes) and at most 128 operations per transaction (--max-txn-ops).
//
// Under a prefix P (one per master service):
//   P/state/current              the generation G that holds the state ("%016d")
//   P/state/G/page/NNNNNN        a page: the state's runs as JSON (mxrun-master-state-1); a run
//                                with many members is split over several pages, each with a
//                                share of its members, merged again when read
//
// A write makes a new generation: its pages go in one or more transactions, then a last one points
// `current` at it and deletes the previous generation. Every transaction is fenced on the writer's
// leadership (etcd_client.h TxnIfCreated), so a deposed leader writes nothing; and since readers
// follow `current` only, a write cut short leaves the previous generation whole (the next writer
// removes the orphaned pages). Pure: plans and decodes, no I/O.

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "rendezvous/etcd/etcd_client.h"
#include "rendezvous/master_state/master_state.h"

namespace mxrun {

struct EtcdStateLimits {
  size_t max_page_bytes = 512 * 1024;  // one value, well under etcd's 1.5 MiB request limit
  size_t max_txn_bytes = 1024 * 1024;  // the keys and values of one transaction
  size_t max_txn_ops = 100;            // under etcd's default 128
};

// The key of the pointer to the current generation.
std::string EtcdStateCurrentKey(const std::string& prefix);
// Every key of the state (the range to read).
std::string EtcdStatePrefix(const std::string& prefix);

// The transactions that replace the state of generation `previous` (0: none yet) with `runs` as
// generation `generation` (> previous). Each inner vector is one transaction; the last one
// switches `current` and removes the previous generation's pages, and also `stale` generations
// (pages of writes that never finished) when given.
std::vector<std::vector<EtcdOp>> PlanEtcdStateWrite(const std::string& prefix, int64_t generation,
                                                    int64_t previous,
                                                    const std::vector<PersistedRun>& runs,
                                                    const std::vector<int64_t>& stale = {},
                                                    const EtcdStateLimits& limits = {});

struct EtcdState {
  int64_t generation = 0;  // 0: no state kept yet
  std::vector<PersistedRun> runs;
  std::vector<int64_t> stale;  // generations with pages but not current (unfinished)
};

// The state from every key under EtcdStatePrefix(prefix). Errors: InvalidArgument when the
// current generation's pages are damaged or missing.
absl::StatusOr<EtcdState> ReadEtcdState(const std::string& prefix,
                                        const std::vector<EtcdKeyValue>& kvs);

}  // namespace mxrun

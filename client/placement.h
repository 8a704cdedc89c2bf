// Object placement: oid -> placement group (pg) -> OSD, as Ceph does with one copy.
//
//   oid -> pg   StableHash64(oid) mod pg_num. The hash is defined here (FNV-1a then a
//               splitmix64 finalizer), not std::hash, so every process and every build
//               agrees on it forever.
//   pg  -> osd  rendezvous hashing, weight-aware in straw2 style: every OSD that is *in*
//               with weight > 0 draws u = hash(pg, osd id) in (0, 1] and scores
//               ln(u) / weight; the highest score wins. Taking an OSD out (or adding
//               one) only moves the PGs that it held (or wins); every other PG stays put.
//               An OSD that is down but still in keeps its PGs: writes to it wait.
//
// Thread-safety: the free functions are pure. PlacementMap is immutable after Build()
// and may be shared between threads without locking.
#ifndef MSGR_CLIENT_PLACEMENT_H_
#define MSGR_CLIENT_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msgr::client {

inline constexpr int kNoOsd = -1;

// A 64-bit hash that never changes across processes, builds or versions.
uint64_t StableHash64(std::string_view data);

// oid -> pg. REQUIRES: pg_num > 0.
uint32_t ObjectToPg(std::string_view oid, uint32_t pg_num);

// One OSD as placement sees it (a subset of the monitor's OsdInfo).
struct OsdEntry {
  uint32_t id = 0;
  std::string addr;       // messenger address "host:port"
  bool up = false;        // reachable now
  bool in = false;        // holds PGs
  double weight = 1.0;    // relative share of PGs
  uint64_t up_from = 0;   // epoch it last came up: a new value means a new incarnation
  std::vector<std::string> ms_types;  // messenger backends it serves (empty: unknown)
};

// pg -> osd id over `osds` (straw2 draw among those in with weight > 0), or kNoOsd.
int PgToOsd(uint32_t pg, const std::vector<OsdEntry>& osds);

// A cluster map epoch with its pg -> osd table precomputed.
class PlacementMap {
 public:
  PlacementMap() = default;
  // REQUIRES: pg_num > 0. OSD ids must be unique.
  static PlacementMap Build(uint64_t epoch, uint32_t pg_num, std::vector<OsdEntry> osds);

  uint64_t epoch() const { return epoch_; }
  uint32_t pg_num() const { return pg_num_; }
  const std::vector<OsdEntry>& osds() const { return osds_; }

  uint32_t PgOf(std::string_view oid) const { return ObjectToPg(oid, pg_num_); }
  // The primary (only) OSD of `pg`, or kNoOsd when no OSD is in.
  int OsdOfPg(uint32_t pg) const { return pg < pg_to_osd_.size() ? pg_to_osd_[pg] : kNoOsd; }
  int OsdOf(std::string_view oid) const { return OsdOfPg(PgOf(oid)); }
  // The entry for OSD `id`, or nullptr when the map does not know it.
  const OsdEntry* Find(int id) const;

 private:
  uint64_t epoch_ = 0;
  uint32_t pg_num_ = 0;
  std::vector<OsdEntry> osds_;
  std::vector<int> pg_to_osd_;
};

}  // namespace msgr::client

#endif  // MSGR_CLIENT_PLACEMENT_H_

// Object placement: oid -> placement group (pg) -> acting set of OSDs, as Ceph does.
//
//   oid -> pg   StableHash64(oid) mod pg_num. The hash is defined here (FNV-1a then a
//               splitmix64 finalizer), not std::hash, so every process and every build
//               agrees on it forever.
//   pg  -> osd  rendezvous hashing, weight-aware in straw2 style: every OSD that is *in*
//               with weight > 0 draws u = hash(pg, osd id) in (0, 1] and scores
//               ln(u) / weight; the highest score wins. Taking an OSD out (or adding
//               one) only moves the PGs that it held (or wins); every other PG stays put.
//               An OSD that is down but still in keeps its PGs: writes to it wait.
//   pools       a PG is (pool id, pg index): the pool id takes part in the straw2 draw, so
//               pools spread differently (pool 0, the default pool, draws as it always
//               did). Each pool has its own pg_num and size.
//   pg  -> acting set  with a pool size N > 1: the N best-scoring OSDs, one per host while
//               hosts remain (a host is a failure domain; an OSD without a host name is a
//               host of its own), then the best of the rest. Rendezvous keeps it stable:
//               an OSD leaving only replaces itself in the sets it was in. The first
//               member that is up is the PG's primary: clients send it every op, it
//               forwards writes to the other members.
//
// Thread-safety: the free functions are pure. PlacementMap is immutable after Build()
// and may be shared between threads without locking.
#ifndef MSGR_PROTO_PLACEMENT_H_
#define MSGR_PROTO_PLACEMENT_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace msgr::placement {

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
  std::string host;       // failure domain (empty: its own)
  std::string cluster_addr;  // where OSD peers reach it (empty: addr)
};

// pg -> osd id over `osds` (straw2 draw among those in with weight > 0), or kNoOsd.
int PgToOsd(uint32_t pg, const std::vector<OsdEntry>& osds, uint32_t pool_id = 0);

// pg -> its acting set: up to `size` distinct OSD ids, best first (see above). Fewer
// when fewer OSDs are in. PgToOsds(pg, osds, 1) == {PgToOsd(pg, osds)}.
std::vector<int> PgToOsds(uint32_t pg, const std::vector<OsdEntry>& osds, uint32_t size,
                          uint32_t pool_id = 0);

// Objects of different pools are different objects. The name an OSD stores an object
// under, which is also the oid of a write's ring records (msg/ring/ring_format.h): the
// oid itself in the default pool (id 0: the names stores always had), else
// "\x01" + decimal pool id + "\x01" + oid. An oid of the default pool may not start
// with kPoolNameMark (the client refuses it).
inline constexpr char kPoolNameMark = '\x01';
inline constexpr uint32_t kDefaultPoolId = 0;
inline constexpr char kDefaultPoolName[] = "default";
std::string PoolObjectName(uint32_t pool_id, std::string_view oid);
// The inverse: false if `name` is malformed (a mark, then no valid id and second mark).
bool SplitPoolObjectName(std::string_view name, uint32_t* pool_id, std::string_view* oid);
// Bytes PoolObjectName adds to an oid of `pool_id`.
size_t PoolNameOverhead(uint32_t pool_id);

// How many copies a pool keeps, and how many must be written for a write to be
// acknowledged (Ceph's size and min_size).
struct PoolSize {
  uint32_t size = 1;
  uint32_t min_size = 1;
};

// A pool as the map describes it.
struct PoolInfo {
  uint32_t id = kDefaultPoolId;
  std::string name = kDefaultPoolName;
  PoolSize size;
  uint32_t pg_num = 1;
};
// min_size when none is given: a majority of the copies (Ceph's size - size / 2).
constexpr uint32_t DefaultMinSize(uint32_t size) { return size - size / 2; }

// A cluster map epoch with one pool's pg -> acting set table precomputed.
class PlacementMap {
 public:
  PlacementMap() = default;
  // REQUIRES: pg_num > 0, 1 <= pool.min_size <= pool.size. OSD ids must be unique.
  static PlacementMap Build(uint64_t epoch, uint32_t pg_num, std::vector<OsdEntry> osds,
                            PoolSize pool = {}, uint32_t pool_id = kDefaultPoolId);

  uint64_t epoch() const { return epoch_; }
  uint32_t pg_num() const { return pg_num_; }
  PoolSize pool() const { return pool_; }
  uint32_t pool_id() const { return pool_id_; }
  const std::vector<OsdEntry>& osds() const { return osds_; }

  uint32_t PgOf(std::string_view oid) const { return ObjectToPg(oid, pg_num_); }
  // The primary of `pg` (its first acting member that is up, else its first member: ops
  // wait for it), or kNoOsd when no OSD is in.
  int OsdOfPg(uint32_t pg) const { return pg < primary_.size() ? primary_[pg] : kNoOsd; }
  int OsdOf(std::string_view oid) const { return OsdOfPg(PgOf(oid)); }
  // The acting set of `pg`, best first (empty when no OSD is in or pg >= pg_num).
  const std::vector<int>& ActingOfPg(uint32_t pg) const;
  // The entry for OSD `id`, or nullptr when the map does not know it.
  const OsdEntry* Find(int id) const;

 private:
  uint64_t epoch_ = 0;
  uint32_t pg_num_ = 0;
  PoolSize pool_;
  uint32_t pool_id_ = kDefaultPoolId;
  std::vector<OsdEntry> osds_;
  std::vector<std::vector<int>> acting_;
  std::vector<int> primary_;
};

}  // namespace msgr::placement

#endif  // MSGR_PROTO_PLACEMENT_H_

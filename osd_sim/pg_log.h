// The primary's PG log: which objects of a PG changed, in order, and which of them each
// member of the PG may lack. With it, a member that comes back (restarted with its store,
// or marked down and up again) is synced by copying only the objects it missed -- Ceph's
// log-based recovery -- instead of comparing the PG's whole copies (backfill).
//
// Entries. The primary appends one entry per write record and delete it applies
// (Replicator: Begin, DeleteTargets), at a position from one counter that only grows.
// An entry names the plain object id; a newer entry of the same object replaces the older
// one (recovery copies an object's current state, so one entry per object is enough).
// Trimming drops the oldest entries when a PG holds more than its share of `max_entries`.
//
// Members. For each member the log keeps *marks*: entries whose copy it was sent and has
// not acknowledged yet (outstanding), and entries it missed -- its copy was refused or
// lost, it was not sent one (down, or not reachable), or the local store failed the write
// after the member took it (the member then holds a version this copy lacks). A tracked
// member holds this copy's version of every object whose last entry is at or before its
// *frontier*: the position before its first mark (or the newest position, without
// marks). So what it may lack is exactly the objects with entries after the frontier
// (MissedBy), provided no entry after it was trimmed; otherwise the caller compares whole
// copies.
//
// Tracking begins when peering makes a member equal to this copy, or finds it complete
// (MarkInSync), and ends for all members when the copy here stops being the PG's
// authority: this OSD no longer leads the PG, or replaced its copy from another OSD's
// (Reset). So the log covers what happened since this OSD became the PG's primary: a
// primary that restarts (its log is in memory) syncs returning members by comparing
// copies, as before.
//
// Memory: the entries (a share of `max_entries` per PG) and, per member, its outstanding
// and missed marks; a member that misses more than a few thousand writes of one PG (down
// for long) is no longer followed and is backfilled when it comes back.
//
// What this does not cover: a member that restarted without its store (memory mode, a new
// disk) -- the caller passes only members whose copy survived (PgInfoBody::as_of_epoch);
// divergence between members that peering already trusted as complete.
//
// Thread-safety: every method may be called from any thread; the lock is a leaf (nothing
// is called out under it).
#ifndef MSGR_OSD_SIM_PG_LOG_H_
#define MSGR_OSD_SIM_PG_LOG_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace msgr::osd {

// A placement group: pool id and PG number within the pool.
struct PgId {
  uint32_t pool = 0;
  uint32_t pg = 0;
  bool operator<(const PgId& o) const { return pool != o.pool ? pool < o.pool : pg < o.pg; }
  bool operator==(const PgId& o) const { return pool == o.pool && pg == o.pg; }
};

class PgLog {
 public:
  // ~150 bytes per entry: 262,144 entries (the default) are ~40 MB at most per OSD.
  static constexpr size_t kDefaultMaxEntries = size_t{1} << 18;
  // `max_entries` 0: no log (Append logs nothing, MissedBy never knows).
  explicit PgLog(size_t max_entries = kDefaultMaxEntries);
  PgLog(const PgLog&) = delete;
  PgLog& operator=(const PgLog&) = delete;

  // One logged write or delete, for its members' outcomes. Movable; when it goes away,
  // members that were sent the copy and never reported count as missing it.
  class Ticket {
   public:
    Ticket() = default;
    Ticket(PgLog* log, PgId pg, uint64_t pos) : log_(log), pg_(pg), pos_(pos) {}
    Ticket(Ticket&& o) noexcept { *this = std::move(o); }
    Ticket& operator=(Ticket&& o) noexcept;
    ~Ticket();
    // `osd` acknowledged its copy (ok) or its copy was refused or lost.
    void Resolved(int osd, bool ok) const;
    // The local store failed the write: every member may hold a version this copy lacks.
    void Diverged() const;
    uint64_t pos() const { return pos_; }

   private:
    PgLog* log_ = nullptr;
    PgId pg_;
    uint64_t pos_ = 0;
  };

  // Logs a write or delete of `oid` (the plain object id) that this OSD applies as the
  // PG's primary and sends to `targets`.
  Ticket Append(const PgId& pg, std::string_view oid, const std::vector<int>& targets);

  // The newest position appended, in any PG (0: none yet).
  uint64_t Head() const;
  // This OSD no longer leads `pg`, or its copy was replaced from another OSD's: forgets
  // the PG's entries and every member's state.
  void Reset(const PgId& pg);
  // `osd`'s copy is equal to this one as of position `through` (a sync copied this copy's
  // state after every entry up to `through` was applied here), or is trusted complete
  // (`through` 0): it is tracked from now on, and what it missed up to `through` is
  // forgotten. Outstanding copies stay marked: one that fails later still counts.
  void MarkInSync(const PgId& pg, int osd, uint64_t through);
  // The objects `osd` may lack or hold in another version than this copy, in no
  // particular order; nullopt when the log cannot tell (the member is not tracked, or
  // entries after its frontier were trimmed).
  std::optional<std::vector<std::string>> MissedBy(const PgId& pg, int osd) const;

  struct Stats {
    uint64_t entries = 0;  // kept now, all PGs
    uint64_t trimmed = 0;  // dropped for room since start
  };
  Stats stats() const;

 private:
  struct Member {
    bool tracked = false;
    std::map<uint64_t, bool> marks;  // position -> missed (true) or outstanding (false)
    uint64_t missed_trimmed = 0;     // newest missed position dropped with a trim (0: none)
    // Its missed marks were dropped for room (kMaxMarksPerMember, pg_log.cc): unknown until
    // a sync as of a point (MarkInSync with `through` > 0).
    bool overflowed = false;
  };
  struct Pg {
    std::map<uint64_t, std::string> by_pos;
    std::unordered_map<std::string, uint64_t> by_oid;
    uint64_t trimmed_through = 0;  // newest position trimmed
    std::map<int, Member> members;
  };

  void Resolve(const PgId& pg, uint64_t pos, int osd, bool ok);
  void Abandon(const PgId& pg, uint64_t pos);
  void Diverge(const PgId& pg, uint64_t pos);

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  std::map<PgId, Pg> pgs_ ABSL_GUARDED_BY(mu_);
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t entries_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t trimmed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_PG_LOG_H_

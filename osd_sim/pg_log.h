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
// (MarkInSync), or -- for a member that is down when this OSD starts to lead the PG --
// from the start of the log (TrackAbsent, below). It ends for all members when this
// copy is replaced from another OSD's, or when this OSD leads the PG again (Reset). When
// this OSD stops leading the PG the log is *retired*, not dropped: the PG's new primary
// (a returning OSD that leads it again) may ask what it missed (MissedByReturning). A
// retired log goes as soon as this OSD's copy takes a write, delete or push from another
// primary (CopyChanged): from then on it no longer describes this copy.
//
// A member down at the start (TrackAbsent). When this OSD (R) starts to lead the PG
// while member Q is down, its copy is complete (peering made it so before the first
// entry), and Q, if it was the PG's primary in the map R saw just before, holds every
// write acknowledged under the maps in which it was a complete member -- up to its
// as_of epoch V (peering.h). Every write acknowledged before R's log began was
// acknowledged under a map older than the epoch S in which R started to lead (under S,
// R acknowledges nothing before its first peering ends, and OSDs with S refuse other
// primaries). So if V + 1 >= S, Q's copy lacks nothing acknowledged before the log began
// and what it lacks since is in the log; it may also hold writes of its own that never
// reached R (Q applied them as primary just before it died or was cut off): the log
// cannot know those, Q adds them from its watermark (below). If Q was not the previous
// primary, another primary may have led between Q's as_of and S (its writes excused on
// Q as it went down): R does not track Q. MissedByReturning checks V against S.
//
// Watermark. Per PG, the point of this OSD's store order (store::ObjectStore::NextSeq)
// before which every write and delete it applied as the PG's primary was taken by every
// member it was sent to and by its own store: a write still in flight holds it at the
// store's seq when it was logged (a lower bound of its own), one that failed anywhere,
// was dropped, or whose local store failed holds it there until this OSD's copy is next
// replaced from an authority's (Resynced) or the process ends (RestoreWatermark then
// brings back the value saved before). Objects of the PG written at or after it are the
// ones this copy may hold in a version no other member has: a returning primary's
// candidates. Writes of other primaries are not covered (with stable placement an OSD
// that leads a PG whenever it is up never takes them for it).
//
// Memory: the entries (a share of `max_entries` per PG) and, per member, its outstanding
// and missed marks; a member that misses more than a few thousand writes of one PG (down
// for long) is no longer followed and is backfilled when it comes back. Per write in
// flight, its members still to answer (the watermark).
//
// What this does not cover: a member that restarted without its store (memory mode, a new
// disk) -- the caller passes only members whose copy survived (PgInfoBody::as_of_epoch);
// divergence between members that peering already trusted as complete; a write the
// primary forwarded and then lost from its own store (power loss before its flush: the
// watermark assumes what the store returned from Append survives, as it does a kill -9).
//
// Thread-safety: every method may be called from any thread; the lock is a leaf (nothing
// is called out under it; the store's seq is read before it is taken).
#ifndef MSGR_OSD_SIM_PG_LOG_H_
#define MSGR_OSD_SIM_PG_LOG_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <optional>
#include <set>
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
    // The local store applied it (durable): with every member's ok, the write no longer
    // holds the PG's watermark.
    void LocalDone() const;
    uint64_t pos() const { return pos_; }

   private:
    PgLog* log_ = nullptr;
    PgId pg_;
    uint64_t pos_ = 0;
  };

  // Logs a write or delete of `oid` (the plain object id) that this OSD applies as the
  // PG's primary and sends to `targets`.
  // `low`: SeqNow() read before the write reaches the local store (default: read here).
  Ticket Append(const PgId& pg, std::string_view oid, const std::vector<int>& targets,
                std::optional<uint64_t> low = std::nullopt);
  // The store's next seq (0 without a sequence source). The source takes the store's
  // lock: a caller holding a lock of its own reads this before taking it.
  uint64_t SeqNow() const { return next_seq_ ? next_seq_() : 0; }

  // The newest position appended, in any PG (0: none yet).
  uint64_t Head() const;
  // This OSD leads `pg` again, or its copy was replaced from another OSD's: forgets the
  // PG's entries and every member's state (a retired log too).
  void Reset(const PgId& pg);
  // This OSD no longer leads `pg`: the log stays for MissedByReturning until Reset or
  // CopyChanged.
  void Retire(const PgId& pg);
  // This OSD's copy of `pg` took a write, delete or push from another primary: a retired
  // log of the PG goes. Cheap (no lock) while no log is retired.
  void CopyChanged(const PgId& pg);
  // `osd`'s copy is equal to this one as of position `through` (a sync copied this copy's
  // state after every entry up to `through` was applied here), or is trusted complete
  // (`through` 0): it is tracked from now on, and what it missed up to `through` is
  // forgotten. Outstanding copies stay marked: one that fails later still counts.
  void MarkInSync(const PgId& pg, int osd, uint64_t through);
  // The objects `osd` may lack or hold in another version than this copy, in no
  // particular order; nullopt when the log cannot tell (the member is not tracked, or
  // entries after its frontier were trimmed).
  // Unknown too for a retired log and for a member tracked by TrackAbsent and not synced
  // since (its copy may hold writes of its own this log cannot know).
  std::optional<std::vector<std::string>> MissedBy(const PgId& pg, int osd) const;

  // `osd` is a member of `pg` that is down as this OSD starts to lead it from map epoch
  // `since_epoch`, after peering made this copy complete, and it was the PG's primary
  // in the map before: tracked from the log's start (header comment). False (nothing
  // done) when the log already has entries (this is not the leadership's first peering)
  // or the member is tracked already.
  bool TrackAbsent(const PgId& pg, int osd, uint64_t since_epoch);
  // For `osd`, returning as the PG's primary with a copy complete as of epoch `as_of`:
  // the objects it may lack or hold in another version than this copy, as MissedBy, from
  // a retired log only; nullopt when the log cannot tell (not retired, not tracked,
  // trimmed, too many, or `as_of` older than the log's start requires).
  // `why` (may be null): for nullopt, the reason.
  std::optional<std::vector<std::string>> MissedByReturning(const PgId& pg, int osd,
                                                            uint64_t as_of,
                                                            std::string* why = nullptr) const;

  // Where the store's seqs come from (store::ObjectStore::NextSeq); without it writes
  // hold the watermark at 0. REQUIRES: called before the first Append (Peering's
  // constructor does, before any PG is active), once.
  void SetSequenceSource(std::function<uint64_t()> next_seq);
  // `pg`'s watermark (header comment); 0 when unknown (no log, no sequence source).
  uint64_t Watermark(const PgId& pg) const;
  // At start: the watermark saved before (0: unknown); the PG's writes from then on are
  // candidates until Resynced.
  void RestoreWatermark(const PgId& pg, uint64_t seq);
  // This OSD's copy of `pg` was just made equal to an authority's (nothing of the PG in
  // flight): every write it applied before is settled, failed ones and ones still in
  // flight included.
  void Resynced(const PgId& pg);

  struct Stats {
    uint64_t entries = 0;  // kept now, all PGs
    uint64_t trimmed = 0;  // dropped for room since start
  };
  Stats stats() const;

 private:
  struct Member {
    bool tracked = false;
    uint64_t since_epoch = 0;  // TrackAbsent's epoch, until a sync (0: tracked while up)
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
    bool retired = false;  // this OSD no longer leads the PG (Retire)
  };
  // The watermark's state of one PG (kept across Reset: it is about this OSD's store).
  static constexpr uint64_t kNoPin = std::numeric_limits<uint64_t>::max();
  struct Written {
    uint64_t pin = kNoPin;              // held here by a failed write or a restart
    std::multiset<uint64_t> unsettled;  // the lower bounds of the writes in flight
  };
  struct InFlight {
    PgId pg;
    uint64_t low = 0;          // the store's seq when it was logged
    std::vector<int> pending;  // members that have not answered
    bool local_pending = true;
  };

  // Frontier-based MissedBy of a tracked member (mu_ held).
  std::optional<std::vector<std::string>> MissedLocked(const Pg& p, const Member& m,
                                                      std::string* why = nullptr) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The write at `pos` is settled (`ok`) or holds the watermark (!ok).
  void SettleLocked(std::map<uint64_t, InFlight>::iterator it, bool ok)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(std::map<PgId, Pg>::iterator it) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void LocalDone(uint64_t pos);

  void Resolve(const PgId& pg, uint64_t pos, int osd, bool ok);
  void Abandon(const PgId& pg, uint64_t pos);
  void Diverge(const PgId& pg, uint64_t pos);

  const size_t max_entries_;
  mutable absl::Mutex mu_;
  std::map<PgId, Pg> pgs_ ABSL_GUARDED_BY(mu_);
  uint64_t head_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t entries_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t trimmed_ ABSL_GUARDED_BY(mu_) = 0;
  std::function<uint64_t()> next_seq_;  // set once before use: called without mu_
  std::map<PgId, Written> written_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, InFlight> in_flight_ ABSL_GUARDED_BY(mu_);
  std::atomic<size_t> retired_{0};  // retired logs in pgs_ (CopyChanged's fast path)
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_PG_LOG_H_

// Peering and recovery: before a PG's primary serves client ops in a new interval (its set
// of up members changed, or its primary), it makes sure that it, and every member it
// writes to, holds every write and delete acknowledged so far.
//
// Each OSD keeps, per PG, whether its copy is *complete* (has every acknowledged write and
// delete) and the last map epoch that was known, and its watermark (step 2 from the log,
// below) (kept in a file of its store's directory, so a restarted OSD still says how
// recent its copies are):
//  * a member that stays up in the PG's up set from one map to the next, in the same
//    incarnation (up_from), stays complete, as of the new epoch (writes and deletes reach
//    every up member before they are acknowledged: one that an up member did not take
//    fails, Replicator);
//  * a member that is new to the up set (added, back in, restarted, or marked down and up
//    again) is not complete until synced;
//  * an OSD that leaves the up set keeps its flag with its epoch frozen: a stray copy,
//    complete as of the last epoch it was a member (the source when a PG moves away and
//    its new members must be filled from it: backfill).
//
// When the primary starts a new interval of a PG (the PG is *peering*: client ops get
// UNAVAILABLE, which clients retry):
//  1. it asks every up OSD about its copy (kPgQuery) and picks the copy known complete as
//     of the newest epoch (its own on a tie; among others, the next in acting order: the
//     PG's interim primary while this OSD was down);
//  2. if that is another OSD's, it pulls. A surviving copy (as_of_epoch > 0) is pulled
//     from the PG log (below) when it can be; otherwise it lists that PG there and here
//     with each object's size and crc32c (kPgList), reads what differs (kRead), stores
//     it, and deletes what the source does not have;
//  3. it pushes to every up member that said it is not complete: what differs (kPgPush),
//     deleting what the primary does not have, then tells it it is complete (kPgActivate);
//  4. the PG is active: client ops flow.
// If no up OSD has a complete copy (a new cluster, a whole cluster restarted, the holders
// restarted), the PG waits while any OSD of the map is down (it may hold the newest copy);
// with all up, the primary merges: every object it lacks, from the first OSD that has one
// (nothing deleted; where copies of an object differ its own wins). While any up OSD does
// not answer the query, the PG stays peering and is retried.
//
// A primary that has not yet seen the map that ends its role may still take writes (its
// clients may not have that map either), but none of them is lost: the query carries the
// querier's map epoch, and the OSD asked first catches up to it, then lets every write and
// delete it admitted under its older map reach its store (Admission), then answers. From
// then on it refuses what the new map gives to another OSD, and what it acknowledged is
// in the copy the new primary syncs from. Ceph's rule is the same (a peering query makes
// the OSD asked advance its map first).
//
// Step 3 is *recovery* from the primary's PG log (osd_sim/pg_log.h) when the log knows what
// the member missed -- it was tracked since this OSD leads the PG, and its copy survived
// (as_of_epoch > 0: not a new or emptied store): only those objects are copied or deleted,
// nothing else is read. Otherwise it is *backfill*: every object of the PG is read and
// crc'd on both sides and the ones that differ are copied (a new member, a primary that
// restarted or pulled its copy, a log trimmed past the member's point).
//
// Step 2 from the log (PullFromLog): an OSD (Q) that comes back and leads a PG again
// asks the copy it picked (R, the interim primary) with kPgMissed, sending its as_of and
// its *candidates*: the PG's objects it wrote or deleted at or after its watermark (a
// point of its store's order before which every write it applied as primary was taken
// by every member and its own store; pg_log.h), which may be versions of its own that
// never reached R. R, whose log followed Q from its start and was kept (retired) when R
// stopped leading, answers with what Q missed and, for each of those and each candidate,
// whether it holds it and its size (from its index: nothing is read). Q fetches what R
// has and deletes what R lacks: its copy is then R's. R answers "unknown" when its log
// cannot tell (it did not follow Q, or Q's copy is older than the log's start, entries
// were trimmed, R's copy took another primary's writes since, R restarted); Q then
// compares whole copies (peering.log_pull_fallbacks). The watermark is saved with the
// PG's epoch in the state file every second or so (lazily: an older one only makes more
// candidates); a PG without one compares.
//
// Thread-safety: every method may be called from any thread.
#ifndef MSGR_OSD_SIM_PEERING_H_
#define MSGR_OSD_SIM_PEERING_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/base/perf_counters.h"
#include "osd_sim/pg_log.h"
#include "osd_sim/replicator.h"
#include "osd_sim/store/object_store.h"
#include "proto/osd_protocol.h"
#include "proto/placement.h"

namespace msgr::osd {

#define MSGR_PEERING_COUNTERS(X)                                                               \
  X(pgs_peering, kGauge, kNone, "PGs this OSD leads that are not active yet (ops wait)")      \
  X(pgs_active, kGauge, kNone, "PGs this OSD leads that are active")                           \
  X(peerings, kCounter, kNone, "PG intervals this OSD started as primary")                    \
  X(pulls, kCounter, kNone, "PGs this OSD filled from another OSD's copy")                      \
  X(pushes, kCounter, kNone, "PG copies this OSD synced on a member (recovery, backfill)")      \
  X(objects_recovered, kCounter, kNone, "objects copied or deleted by those syncs")           \
  X(bytes_recovered, kCounter, kBytes, "bytes those copies moved")                             \
  X(peering_errors, kCounter, kNone, "peering attempts that failed and were retried")        \
  X(strays_removed, kCounter, kNone,                                                          \
    "stray PG copies this OSD dropped when their PG's members were all up and complete")     \
  X(stray_objects_removed, kCounter, kNone, "objects those drops deleted")                  \
  X(queries_behind_map, kCounter, kNone,                                                      \
    "peer queries that came with a newer map than this OSD's; answered once it had that map") \
  X(recoveries_from_log, kCounter, kNone,                                                     \
    "member syncs that copied only the objects the PG log says it missed")                   \
  X(backfills, kCounter, kNone, "syncs (pushes or pulls) that compared the PG's whole copies") \
  X(bytes_digested, kCounter, kBytes,                                                         \
    "object bytes this OSD read to compare copies (its listings for syncs)")                 \
  X(pg_log_entries, kGauge, kNone, "entries in this OSD's PG logs (PGs it leads)")           \
  X(pg_log_trimmed, kCounter, kNone, "PG log entries dropped for room (older syncs backfill)") \
  X(pulls_from_log, kCounter, kNone,                                                          \
    "pulls of a returning primary that copied only what the interim primary's PG log says "   \
    "it missed and what it wrote after its watermark (no whole-copy compare)")                \
  X(log_pull_fallbacks, kCounter, kNone,                                                      \
    "pulls of a surviving copy that compared whole copies since the log or the watermark "    \
    "could not tell (logged why)")

MSGR_COUNTER_SNAPSHOT(PeeringCounters, MSGR_PEERING_COUNTERS);

struct PeeringOptions {
  uint32_t self = 0;
  // A returning primary's surviving copy is synced from the interim primary's PG log and
  // its own watermark (PullFromLog) when both can tell; false: always compared whole.
  bool pull_from_log = true;
  absl::Duration call_timeout = absl::Seconds(10);  // one request to a peer
  absl::Duration retry_delay = absl::Milliseconds(300);
  // Where each PG's "complete as of epoch" survives a restart (a file in the store's
  // directory); empty: nowhere (memory mode: the copies do not survive either).
  std::string state_path;
  // How long a query from a peer with a newer map waits for this OSD to get that map
  // before it is refused (UNAVAILABLE; the peer retries). Below the peer's query timeout.
  absl::Duration map_wait = absl::Seconds(1);
};

class Peering {
 public:
  // `store`, `replicator` (whose sessions carry the requests) and `log` (the one the
  // replicator appends to; may be null: every sync compares whole copies) outlive this.
  Peering(const PeeringOptions& options, store::ObjectStore* store, Replicator* replicator,
          PgLog* log = nullptr);
  ~Peering();  // Stop()
  void Stop();

  // A new map, one PlacementMap per pool, all of one epoch (in epoch order).
  void HandleMaps(const std::vector<placement::PlacementMap>& pools);

  // OK when this OSD may serve a client's op on `oid` of `pool`: it is the PG's primary in
  // its map and the PG is active. UNAVAILABLE otherwise, saying why (the client retries).
  absl::Status CheckActive(uint32_t pool, std::string_view oid) const;
  // OK when `sender` is the primary of `oid`'s PG (or of PG `pg`) in this OSD's map: a
  // replica takes writes, deletes and syncs of a PG only from its primary, so an OSD that
  // was paused and still acts on an older map cannot overwrite what the new primary wrote.
  // UNAVAILABLE otherwise (the sender's write counts as a missing copy; its sync retries).
  absl::Status CheckPrimary(uint32_t pool, std::string_view oid, uint64_t sender) const;
  absl::Status CheckPrimaryOfPg(uint32_t pool, uint32_t pg, uint64_t sender) const;

  // Held (shared: many at once) while a client's write or delete, or a primary's write to
  // a replica, is checked against the map (CheckActive, CheckPrimary) and handed to the
  // store. A peer's query with a newer map waits for every Admission taken before this OSD
  // had that map: what was admitted under the older map is in the store before the answer.
  class ABSL_SCOPED_LOCKABLE Admission {
   public:
    explicit Admission(Peering& p) ABSL_SHARED_LOCK_FUNCTION(p.admit_mu_) : mu_(&p.admit_mu_) {
      mu_->ReaderLock();
    }
    ~Admission() ABSL_UNLOCK_FUNCTION() { mu_->ReaderUnlock(); }
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

   private:
    absl::Mutex* const mu_;
  };

  // A peer's peering request (kPgQuery, kPgList, kPgPush, kPgActivate) from osd.`sender`:
  // the reply. Pushes and activations are taken from the PG's primary only. A query that
  // carries a newer map epoch than this OSD's waits (up to map_wait) for that map and for
  // the Admissions taken before it (see the header comment). Pushes are admitted too.
  Reply Serve(const PgRequest& req, uint64_t sender);

  PeeringCounters counters() const;

 private:
  using PgKey = PgId;
  struct PgState {
    bool complete = false;        // complete now (a member since as_of, or synced)
    uint64_t as_of = 0;           // last epoch the copy was known complete (0: never)
    bool primary = false;         // this OSD leads the PG in its map
    bool active = false;          // primary only: client ops flow
    bool queued = false;          // in queue_
    uint64_t interval = 0;        // bumped whenever the primary starts a new interval
    std::vector<int> up_members;  // the interval: up members in order (primary first)
    std::vector<uint64_t> up_from;
    // Since this OSD leads the PG: the epoch it started to, and the PG's primary in the
    // map it had before (-1: none known) -- a member down then is tracked by the log
    // from its start only if it was that primary (pg_log.h, TrackAbsent).
    uint64_t lead_from = 0;
    int prev_primary = -1;
  };
  struct Entry {
    uint64_t size = 0;
    uint32_t crc = 0;
  };
  using Listing = std::map<std::string, Entry>;  // plain oid -> digest

  void Loop();
  // The state file's lines: each PG's "complete as of" is taken under mu_, its watermark
  // (the PG log's and the store's locks) after, outside it.
  using StateRows = std::vector<std::pair<PgKey, uint64_t>>;
  StateRows StateRowsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string FormatState(const StateRows& rows) const;
  void SaveState(const std::string& state);
  void LoadState();
  // One PG's peering as primary; OK when it is active.
  absl::Status Peer(const PgKey& key);
  // This OSD's objects of the PG, with digests (reads each one).
  // Up to `max` ids of this OSD's objects in a PG that sort after `after`, in order.
  std::vector<std::string> LocalNames(const PgKey& key, uint32_t pg_num, std::string_view after,
                                      size_t max) const;
  // Size and crc32c of each object (read whole); one deleted meanwhile is left out.
  absl::StatusOr<Listing> Digests(uint32_t pool, const std::vector<std::string>& oids) const;
  absl::StatusOr<Listing> LocalListing(const PgKey& key, uint32_t pg_num) const;
  absl::StatusOr<Listing> RemoteListing(int osd, const PgKey& key, uint32_t pg_num);
  // Makes `osd`'s copy equal to this OSD's (`local`): backfill.
  absl::Status PushTo(int osd, const PgKey& key, uint32_t pg_num, const Listing& local);
  // Makes `osd`'s copy of `oids` (what the PG log says it missed) equal to this OSD's.
  absl::Status RecoverFromLog(int osd, const PgKey& key, const std::vector<std::string>& oids);
  // Copies `copy` (of `sizes`) to `osd` and deletes `remove` there; counts them.
  absl::Status SendObjects(int osd, const PgKey& key, const std::vector<std::string>& copy,
                           const std::vector<uint64_t>& sizes,
                           const std::vector<std::string>& remove, const char* how);
  // kPgRemove: deletes this OSD's copy of a PG it is not a member of (in its own map) and
  // forgets that it ever had one. Returns the objects deleted.
  absl::StatusOr<uint64_t> RemoveStray(const PgKey& key);
  // Makes this OSD's copy equal to `osd`'s (`authoritative`: its copy is complete), or
  // adds the objects `osd` has and this OSD lacks (a merge when no copy is complete).
  absl::Status PullFrom(int osd, const PgKey& key, uint32_t pg_num, bool authoritative);
  // Makes this OSD's surviving copy (complete as of `as_of`) equal to `osd`'s without
  // comparing them: copies what `osd`'s retired PG log says this OSD missed and the
  // objects this OSD wrote after its watermark (kPgMissed). FAILED_PRECONDITION (nothing
  // changed) when either cannot tell: the caller compares whole copies instead.
  absl::Status PullFromLog(int osd, const PgKey& key, uint32_t pg_num, uint64_t epoch,
                           uint64_t as_of);
  // This OSD's objects of the PG written or deleted at or after store seq `since`.
  std::vector<std::string> LocalWrittenSince(const PgKey& key, uint32_t pg_num,
                                             uint64_t since) const;
  // kPgMissed from osd.`sender`: the body of the reply.
  absl::StatusOr<PgMissedBody> AnswerMissed(const PgRequest& req, uint64_t sender);
  // Reads `wanted` (of `sizes`) from `osd` into this OSD's store and deletes `remove` here.
  absl::Status FetchObjects(int osd, const PgKey& key, const std::vector<std::string>& wanted,
                            const std::vector<uint64_t>& sizes,
                            const std::vector<std::string>& remove);
  // One request to `osd` (`make` encodes it with its tid), and its reply.
  absl::StatusOr<Reply> CallOne(int osd, const std::function<Message(uint64_t)>& make);
  absl::StatusOr<Reply> Call(int osd, const PgRequest& req);
  // Writes an object whole (replacing any older copy); returns the store's ticket.
  absl::StatusOr<uint64_t> AppendWhole(uint32_t pool, const std::string& oid,
                                       const std::string& data);
  // A query from osd.`sender` at map `epoch`: waits (up to map_wait) until this OSD has
  // that map, then for every Admission taken before (a barrier). UNAVAILABLE on timeout.
  absl::Status CatchUp(uint64_t epoch, uint64_t sender) ABSL_LOCKS_EXCLUDED(mu_, admit_mu_);

  const PeeringOptions options_;
  store::ObjectStore* const store_;
  Replicator* const replicator_;
  PgLog* const log_;
  mutable std::atomic<uint64_t> bytes_digested_{0};  // Digests() is const

  // Admissions hold it shared; a query from a newer map takes it once, alone (a barrier).
  // Never taken while holding mu_ (an admission takes mu_ inside it).
  absl::Mutex admit_mu_;
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  std::map<uint32_t, std::shared_ptr<const placement::PlacementMap>> pools_ ABSL_GUARDED_BY(mu_);
  std::map<PgKey, PgState> pgs_ ABSL_GUARDED_BY(mu_);
  std::deque<PgKey> queue_ ABSL_GUARDED_BY(mu_);
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool save_pending_ ABSL_GUARDED_BY(mu_) = false;
  std::string saved_state_;  // what the state file holds (the peering thread's only)
  PeeringCounters counters_ ABSL_GUARDED_BY(mu_);
  std::thread thread_;
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_PEERING_H_

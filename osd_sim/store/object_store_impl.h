// Private: the state behind ObjectStore. Split by topic across
//   object_store.cc         Open / recovery, Read, stats, the public facade
//   object_store_append.cc  space reservation, the pwritev data path, rollback on failure
//   object_store_commit.cc  group commit (flusher thread) and durability tracking
//   object_store_compact.cc compaction: copying live records out of sparse segments
// Locking: one mutex `mu_` guards everything below it; no system call that touches
// the disk runs under it except creating a segment and rolling back a failed write.
// `compact_mu_` serialises compactions (the background thread and Compact()); it is
// taken before `mu_`, never while holding it.
#ifndef MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_
#define MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_

#include <algorithm>
#include <map>
#include <optional>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "msg/base/growing_ring.h"
#include "msg/base/spin_policy.h"
#include "msg/base/thread_cpu.h"
#include "osd_sim/store/io_pool.h"
#include "osd_sim/store/object_index.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/segment_file.h"

namespace msgr::store {

// The tickets not durable yet. They are handed out in increasing order and leave in any
// order: kept in issue order, each marked when it leaves, the marked ones dropped from the
// front. No allocation once the ring has grown to the most tickets ever in flight (a
// std::set or btree allocates nodes as the tickets churn).
class PendingTickets {
 public:
  void Add(uint64_t t) { q_.push_back({t, false}); }  // REQUIRES: above every ticket added
  void Remove(uint64_t t) {
    auto it = Find(t);
    if (it == q_.end()) return;
    it->gone = true;
    while (!q_.empty() && q_.front().gone) q_.pop_front();
  }
  bool Contains(uint64_t t) { return Find(t) != q_.end(); }
  bool empty() const { return q_.empty(); }
  uint64_t lowest() const { return q_.front().ticket; }  // REQUIRES: !empty()

 private:
  struct Entry {
    uint64_t ticket;
    bool gone;
  };
  GrowingRing<Entry>::iterator Find(uint64_t t) {
    auto it = std::lower_bound(q_.begin(), q_.end(), t,
                               [](const Entry& e, uint64_t v) { return e.ticket < v; });
    return it != q_.end() && it->ticket == t && !it->gone ? it : q_.end();
  }
  GrowingRing<Entry> q_;
};

class ObjectStore::Impl {
 public:
  explicit Impl(StoreOptions options)
      : opts_(std::move(options)),
        window_policy_(SpinPolicy::Options{
            static_cast<uint64_t>(absl::ToInt64Nanoseconds(opts_.group_commit_window)),
            static_cast<uint64_t>(absl::ToInt64Nanoseconds(opts_.group_commit_window)),
            opts_.adaptive_group_commit}) {}
  ~Impl();

  absl::Status Recover();  // file modes: lock the directory, scan segments, build the index
  void StartFlusher();     // kDurable only
  void StartIoPool();      // file modes with direct_write_streams > 1
  void StartCompactor();   // file modes with background_compaction
  absl::Status Compact();  // ObjectStore::Compact

  absl::StatusOr<uint64_t> Append(std::string_view oid, uint64_t off, const struct iovec* iov,
                                  int iovcnt, uint32_t payload_crc, uint32_t flags,
                                  uint32_t write_id, DurableCallback* done);
  void AbortWrite(std::string_view oid, uint32_t write_id);
  void AbortWriteLocked(std::string_view oid, uint32_t write_id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void WhenDurable(uint64_t ticket, DurableCallback done);
  absl::StatusOr<std::string> Read(std::string_view oid, uint64_t offset, uint64_t length);
  absl::StatusOr<uint64_t> Stat(std::string_view oid);
  bool Exists(std::string_view oid);
  std::vector<ObjectIndex::Listed> List(std::string_view prefix, std::string_view after,
                                        size_t max) const;
  std::vector<ObjectIndex::Written> ListWrittenSince(std::string_view prefix,
                                                     std::string_view after, uint64_t since,
                                                     size_t max) const;
  uint64_t NextSeq() const;
  StoreStats GetStats() const;

 private:
  struct Reservation {
    SegmentFile* seg = nullptr;  // null in kMemory mode
    uint64_t pos = 0;            // record start in seg
    uint64_t bytes = 0;          // record length incl. padding
    uint64_t pad = 0;            // zero bytes before pos (aligning a direct record)
    uint64_t seq = 0;
    bool direct = false;         // aligned layout, written with O_DIRECT
  };
  struct Unsynced {
    uint64_t seq;
    SegmentFile* seg;
    uint64_t bytes;  // payload
  };
  // The apply seqs of one object's records in one segment (live or not).
  struct SeqRange {
    uint64_t min = UINT64_MAX;
    uint64_t max = 0;
    void Add(uint64_t seq) {
      min = std::min(min, seq);
      max = std::max(max, seq);
    }
    bool Overlaps(uint64_t lo, uint64_t hi) const { return min <= hi && lo <= max; }
  };
  struct SegmentState {
    std::shared_ptr<SegmentFile> file;
    uint64_t used = 0;     // log bytes: records and padding (the active one: its tail)
    uint64_t max_seq = 0;  // highest seq reserved in it
    // A live payload here failed its crc when compaction copied it: the segment stays
    // (that extent still reads as DATA_LOSS) and is compacted again only once nothing in
    // it is live.
    bool pinned = false;
    bool unlinked = false;  // compaction deleted its file; forgotten once the dir is synced
    // When it stopped being the active segment (or the store opened): its age.
    absl::Time sealed_at = absl::InfiniteFuture();
    uint64_t sealed_at_bytes = 0;  // appended_bytes_ then
    // Every object with a record here, dead or alive, and the seqs those records apply
    // at: a delete (or the truncating write an object's state starts from) may be
    // dropped only when no older record of its object is left in another segment.
    absl::flat_hash_map<std::string, SeqRange> objects;
  };
  // What compacting one segment copies forward (object_store_compact.cc).
  struct CopyItem {
    std::string oid;
    Extent from;                       // as the index had it when planned
    std::shared_ptr<SegmentFile> seg;  // where its payload is
    uint32_t flags = 0;                // kTruncate: (a part of) the write at trunc_seq
    uint32_t write_id = 0;             // the write of several records it was a part of
  };
  struct CompactionPlan {
    uint64_t id = 0;
    std::shared_ptr<SegmentFile> file;
    uint64_t used = 0;
    uint64_t next_seq = 0;  // every write published before the plan has a lower seq
    std::vector<CopyItem> copies;
    // Deletes to write again at these seqs (an older record of the object is left in
    // another segment, and the record that carries the delete is in this one).
    std::vector<std::pair<std::string, uint64_t>> barriers;
  };
  enum class Compacted { kFreed, kNotNow, kKept };
  using Fired = absl::InlinedVector<std::pair<DurableCallback, absl::Status>, 4>;

  // `want_direct`: the payload qualifies for O_DIRECT; the reservation says whether the
  // segment can take it.
  // `apply_seq` != 0: a relocated record (compaction), which the capacity does not refuse
  // (it is there to free space) and which is noted at that seq in its segment.
  absl::StatusOr<Reservation> Reserve(std::string_view oid, uint64_t payload_len, bool want_direct,
                                      uint64_t apply_seq = 0);
  // `*fell_back`: a direct record (part) went through the buffered descriptor (EINVAL).
  // `apply_seq` != 0: written as a relocated record (kRecordRelocated) applying there.
  absl::Status WriteRecord(const Reservation& r, std::string_view oid, uint64_t off,
                           const struct iovec* iov, int iovcnt, uint64_t len,
                           uint32_t payload_crc, uint32_t flags, uint32_t write_id,
                           bool* fell_back, uint64_t apply_seq = 0);
  // Compaction's write: a relocated record of `len` bytes at `data` (crc checked by the
  // caller), applying at `apply_seq`. Not published in the index (the caller repoints once
  // it is durable). Returns its reservation (seq, segment, place).
  absl::StatusOr<Reservation> AppendRelocated(std::string_view oid, uint64_t off,
                                              const char* data, uint64_t len,
                                              uint32_t payload_crc, uint32_t flags,
                                              uint32_t write_id, uint64_t apply_seq);
  // Publishes a written record in the index: alone, or as a part of a write of several
  // records (`write_id`). Returns the payload bytes no longer referenced.
  uint64_t PublishLocked(std::string_view oid, Extent e, uint32_t flags, uint32_t write_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Best-effort fallocate of `seg` to segment_bytes (StoreOptions::preallocate).
  void PreallocateSegment(const SegmentFile& seg) const;
  absl::Status RollSegmentLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `client`: an append of a caller (counted in append_errors), not a compaction copy.
  void RollbackLocked(const Reservation& r, const absl::Status& why, bool client = true)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every seq below this one is durable (or failed and was never published).
  uint64_t DurableBelowLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return not_durable_.empty() ? next_seq_ : not_durable_.lowest();
  }
  // A ticket left not_durable_: wakes a compaction waiting for durability.
  void NotDurableShrankLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (durable_waiters_ > 0) durable_cv_.SignalAll();
  }

  // Compaction (object_store_compact.cc).
  void CompactorLoop();
  // Sealed segments worth compacting now, the emptiest first. `background`: one that is
  // still partly live only once it has aged (StoreOptions::compaction_min_age_*).
  std::vector<uint64_t> CandidatesLocked(bool background) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // nullopt: not now (not sealed or not all durable yet, open parts in it, a write of
  // several records to copy that is not durable yet).
  // `*sync_first`: a delete would be kept only for an older record in a segment already
  // unlinked: ForgetUnlinked, then plan again.
  std::optional<CompactionPlan> PlanLocked(uint64_t id, bool* sync_first) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Compacts segment `id` up to unlinking it (then adds it to unlinked_).
  absl::StatusOr<Compacted> CompactSegment(uint64_t id, bool background)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(compact_mu_);
  // fsyncs the directory once for the segments in unlinked_, then forgets them.
  absl::Status ForgetUnlinked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(compact_mu_);
  // Waits until every seq below `seq` is durable; false if the store stops or fails.
  bool WaitDurableBelow(uint64_t seq);
  void Hook(CompactionStep step, uint64_t id) const {
    if (opts_.compaction_hook) opts_.compaction_hook(step, id);
  }
  // Records a written append; returns callbacks to run (outside the lock).
  void CommitWrittenLocked(const Reservation& r, uint64_t payload_len, DurableCallback* done,
                           Fired* fire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDurableLocked(uint64_t seq, const absl::Status& s, Fired* fire)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlusherLoop(int index);  // `index` is also its SegmentFile::Sync stream
  // Zeroing ahead of the tail (StoreOptions::zero_ahead_bytes), by a flusher after a
  // round of `round_bytes`: claims the next chunk of the active segment, writes zeros
  // there and syncs them (unlocking mu_ meanwhile). Returns at once if none is due.
  void ZeroAheadLocked(int index, uint64_t round_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Waits while a record of `bytes` at the active tail would overlap the range being
  // zeroed (the zeros could land after the record and erase it). Lets go of mu_ while it
  // waits.
  void WaitZeroingLocked(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Descriptors a segment opens for syncing: one per flusher (durable mode only).
  int SyncStreams() const {
    return opts_.mode == Durability::kDurable ? std::max(1, opts_.flush_threads) : 1;
  }
  static void Fire(Fired* fire);

  const StoreOptions opts_;
  int lock_fd_ = -1;  // flock'ed LOCK file of the directory

  absl::Mutex compact_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Segments compaction unlinked whose directory entry's removal is not yet durable.
  std::vector<uint64_t> unlinked_ ABSL_GUARDED_BY(compact_mu_);
  mutable absl::Mutex mu_;
  std::map<uint64_t, SegmentState> segments_ ABSL_GUARDED_BY(mu_);
  SegmentFile* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t active_tail_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t appended_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // log bytes reserved since Open
  ObjectIndex index_ ABSL_GUARDED_BY(mu_);
  StoreStats stats_ ABSL_GUARDED_BY(mu_);
  LatencyHistogram flush_latency_{&kFlushLatencyDesc};  // lock-free
  // Tickets handed out (or in flight) that are not durable yet.
  PendingTickets not_durable_ ABSL_GUARDED_BY(mu_);
  // Written, waiting for the flusher (kDurable).
  std::vector<Unsynced> unsynced_ ABSL_GUARDED_BY(mu_);
  absl::Time first_unsynced_at_ ABSL_GUARDED_BY(mu_);
  // Group commit: whether a round waits the window, learned from the writes joining
  // unsynced_ (did each find others not yet durable?); rounds taken, not yet flushed.
  SpinPolicy window_policy_ ABSL_GUARDED_BY(mu_);
  int rounds_flushing_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t unsynced_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int direct_in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // O_DIRECT writes reserved, not done
  absl::Time last_direct_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // began or ended
  // By ticket; nearly always one callback each (inline: no allocation per write).
  absl::flat_hash_map<uint64_t, absl::InlinedVector<DurableCallback, 1>> waiters_
      ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  absl::Status sticky_error_ ABSL_GUARDED_BY(mu_);  // a failed fdatasync poisons the store
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar flush_cv_;
  int durable_waiters_ ABSL_GUARDED_BY(mu_) = 0;  // compactions in WaitDurableBelow
  absl::CondVar durable_cv_;
  absl::CondVar compact_cv_;  // wakes the compactor (a segment sealed, or stopping)
  // Zeroing ahead: the range of the active segment being zeroed (`seg` null: none), and
  // how far segment `zeroed_seg_id_` (the active one when last zeroed) is zeroed.
  struct Zeroing {
    std::shared_ptr<SegmentFile> seg;
    uint64_t begin = 0, end = 0;
  };
  Zeroing zeroing_ ABSL_GUARDED_BY(mu_);
  uint64_t zeroed_seg_id_ ABSL_GUARDED_BY(mu_) = 0;  // ids start at 1 and are not reused
  uint64_t zeroed_end_ ABSL_GUARDED_BY(mu_) = 0;
  bool zero_failed_ ABSL_GUARDED_BY(mu_) = false;  // a zeroing write failed: no more
  // Set by StartFlusher (the directory exists then), before the flushers that read it.
  bool zero_supported_ = false;
  absl::CondVar zero_cv_;                           // a zeroing write ended
  ThreadCpuGroup thread_cpu_;          // the flushers' and the compactor's CPU (GetStats)
  std::vector<std::thread> flushers_;  // flush_threads of them, kDurable only
  std::thread compactor_;              // background_compaction only
  std::unique_ptr<IoPool> io_pool_;  // direct_write_streams > 1 only
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_

// Private: the state behind ObjectStore. Split by topic across
//   object_store.cc         Open / recovery, Read, stats, the public facade
//   object_store_append.cc  space reservation, the pwritev data path, rollback on failure
//   object_store_commit.cc  group commit (flusher thread) and durability tracking
// Locking: one mutex `mu_` guards everything below it; no system call that touches
// the disk runs under it except creating a segment and rolling back a failed write.
#ifndef MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_
#define MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_

#include <atomic>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "osd_sim/store/io_pool.h"
#include "osd_sim/store/object_index.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/segment_file.h"

namespace msgr::store {

class ObjectStore::Impl {
 public:
  explicit Impl(StoreOptions options) : opts_(std::move(options)) {}
  ~Impl();

  absl::Status Recover();  // file modes: lock the directory, scan segments, build the index
  void StartFlusher();     // kDurable only
  void StartIoPool();      // file modes with direct_write_streams > 1

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
  using Fired = std::vector<std::pair<DurableCallback, absl::Status>>;

  // `want_direct`: the payload qualifies for O_DIRECT; the reservation says whether the
  // segment can take it.
  absl::StatusOr<Reservation> Reserve(std::string_view oid, uint64_t payload_len, bool want_direct);
  // `*fell_back`: a direct record (part) went through the buffered descriptor (EINVAL).
  absl::Status WriteRecord(const Reservation& r, std::string_view oid, uint64_t off,
                           const struct iovec* iov, int iovcnt, uint64_t len,
                           uint32_t payload_crc, uint32_t flags, uint32_t write_id,
                           bool* fell_back);
  // Publishes a written record in the index: alone, or as a part of a write of several
  // records (`write_id`). Returns the payload bytes no longer referenced.
  uint64_t PublishLocked(std::string_view oid, Extent e, uint32_t flags, uint32_t write_id)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Best-effort fallocate of `seg` to segment_bytes (StoreOptions::preallocate).
  void PreallocateSegment(const SegmentFile& seg) const;
  absl::Status RollSegmentLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RollbackLocked(const Reservation& r, const absl::Status& why)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records a written append; returns callbacks to run (outside the lock).
  void CommitWrittenLocked(const Reservation& r, uint64_t payload_len, DurableCallback* done,
                           Fired* fire) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MarkDurableLocked(uint64_t seq, const absl::Status& s, Fired* fire)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlusherLoop(int index);  // `index` is also its SegmentFile::Sync stream
  // Descriptors a segment opens for syncing: one per flusher (durable mode only).
  int SyncStreams() const {
    return opts_.mode == Durability::kDurable ? std::max(1, opts_.flush_threads) : 1;
  }
  static void Fire(Fired* fire);

  const StoreOptions opts_;
  int lock_fd_ = -1;  // flock'ed LOCK file of the directory

  mutable absl::Mutex mu_;
  std::map<uint64_t, std::unique_ptr<SegmentFile>> segments_ ABSL_GUARDED_BY(mu_);
  SegmentFile* active_ ABSL_GUARDED_BY(mu_) = nullptr;
  uint64_t active_tail_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  ObjectIndex index_ ABSL_GUARDED_BY(mu_);
  StoreStats stats_ ABSL_GUARDED_BY(mu_);
  // Tickets handed out (or in flight) that are not durable yet.
  std::set<uint64_t> not_durable_ ABSL_GUARDED_BY(mu_);
  // Written, waiting for the flusher (kDurable).
  std::vector<Unsynced> unsynced_ ABSL_GUARDED_BY(mu_);
  absl::Time first_unsynced_at_ ABSL_GUARDED_BY(mu_);
  uint64_t unsynced_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  int direct_in_flight_ ABSL_GUARDED_BY(mu_) = 0;  // O_DIRECT writes reserved, not done
  absl::Time last_direct_at_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();  // began or ended
  std::unordered_map<uint64_t, std::vector<DurableCallback>> waiters_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<uint64_t, absl::Status> failed_ ABSL_GUARDED_BY(mu_);
  absl::Status sticky_error_ ABSL_GUARDED_BY(mu_);  // a failed fdatasync poisons the store
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::CondVar flush_cv_;
  std::vector<std::thread> flushers_;  // flush_threads of them, kDurable only
  std::unique_ptr<IoPool> io_pool_;  // direct_write_streams > 1 only
  std::atomic<uint64_t> flusher_cpu_ns_{0};  // CPU time of the flushers
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_OBJECT_STORE_IMPL_H_

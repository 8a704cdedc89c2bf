// The OSD's object store: an append-only log of checksummed records in segment files,
// with an in-memory index (object id -> extents) rebuilt by scanning the log on Open.
//
// Data path: Append writes [header | oid | payload | pad] with one pwritev straight
// from the caller's buffers (a receive-ring slot); the store never copies the payload
// in user space (except in kMemory mode, where memory *is* the store). Large payloads
// in 4 KiB-aligned buffers go to the disk with O_DIRECT instead of through the page
// cache (StoreOptions::direct_io). Durability is
// reported per ticket: in kDurable mode a flusher thread group-commits: every write
// that has completed when a flush starts is covered by one fdatasync, and completions
// fire after it returns.
//
// Thread-safety: every method is thread-safe. Durability callbacks run on the flusher
// thread (kDurable) or on the calling thread (kBuffered, kMemory, or a ticket that is
// already durable); they must not block for long and may call back into the store.
//
// Crash consistency (kDurable): after kill -9 or power loss and Open, every write whose
// completion reported OK reads back byte-identical. A torn record at the log tail is
// discarded and the file truncated to the last valid record. A record that fails its
// checksum in the middle of the log is skipped and counted in Stats: the object then
// reads as its previous valid version (or NOT_FOUND if it had none). Data that fails its
// checksum when read at run time is never returned: Read gives DATA_LOSS.
#ifndef MSGR_OSD_SIM_STORE_OBJECT_STORE_H_
#define MSGR_OSD_SIM_STORE_OBJECT_STORE_H_

#include <sys/uio.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "osd_sim/store/object_index.h"
#include "osd_sim/store/record.h"
#include "osd_sim/store/store_stats.h"

namespace msgr::store {

enum class Durability {
  kDurable,   // completion after fdatasync (group-committed)
  kBuffered,  // completion after write() returned: survives kill -9, not power loss
  kMemory,    // no files; completion immediately; lost when the store is destroyed
};

// Points of compacting one segment, for StoreOptions::compaction_hook (tests: crash or
// stop there).
enum class CompactionStep {
  kPlanned,    // what to copy is decided, nothing written yet
  kCopied,     // copies written (not yet known durable), nothing repointed
  kDurable,    // copies durable, index not repointed yet
  kRepointed,  // index points at the copies, old segment still on disk
  kUnlinked,   // old segment unlinked, the directory not yet fsynced
  kFreed,      // directory fsynced: the segment is gone for good
};

struct StoreOptions {
  std::string dir;  // created if missing (one level); unused in kMemory mode
  Durability mode = Durability::kDurable;
  uint64_t capacity_bytes = 0;            // log bytes allowed; 0 = until the disk is full
  uint64_t segment_bytes = 256ull << 20;  // a new segment starts when this one would overflow
  // The flusher waits this long after the first waiting write for others to join its
  // fdatasync (it flushes sooner once max_batch writes wait). Zero: flush at once.
  absl::Duration group_commit_window = absl::Microseconds(200);
  // Wait the window only while writes come in groups: most recent writes found others
  // not yet durable when they arrived (msg/base/spin_policy.h's learned bet). A lone
  // writer (one op in flight) has nobody to wait for: each of its writes would pay the
  // window for nothing.
  bool adaptive_group_commit = true;
  size_t max_batch = 512;
  // Flusher threads. With more than one, a round can start while the previous one's
  // fdatasync is still running, so writes that arrive during a slow flush wait for less
  // than a whole extra flush.
  int flush_threads = 2;
  // Large records: while an O_DIRECT write is still in progress when the window ends,
  // the flusher holds the round for it to join, until group_commit_bytes of payload
  // wait or group_commit_max_hold has passed since the first waiting write. A flush
  // (journal commit + device cache flush) then covers several large records instead of
  // each one, and takes a small share of the disk's time. Small writes in a held round
  // wait with it (up to group_commit_max_hold); with no direct write about, never longer
  // than the window.
  uint64_t group_commit_bytes = 32 << 20;
  absl::Duration group_commit_max_hold = absl::Milliseconds(50);
  // Payloads of at least direct_min_bytes whose buffers are all kDirectAlign-aligned
  // (address and length) are written with O_DIRECT in the aligned record layout
  // (record.h): no page-cache copy, no writeback at fdatasync. Others, and everything on
  // a filesystem without O_DIRECT, take the buffered path.
  bool direct_io = true;
  uint64_t direct_min_bytes = 128 << 10;
  // A direct record of at least direct_split_bytes is written as this many parallel
  // pwritev of equal, aligned parts (the calling thread writes one, a pool of
  // direct_write_streams - 1 threads the others); 1 = one pwritev.
  int direct_write_streams = 2;
  uint64_t direct_split_bytes = 1 << 20;
  // fallocate each new segment to segment_bytes, so appends need no block allocation and
  // do not grow the file (best effort: skipped when the disk has no room for it).
  bool preallocate = true;
  // Durable mode: write zeros ahead of the active segment's tail (zero_ahead_bytes of
  // them at most; 0 = off) and fdatasync them, so the appends that land there later
  // overwrite written blocks. fallocate leaves *unwritten* extents; the first write into
  // one changes the file's extent map, so the fdatasync that makes it durable must also
  // commit the filesystem's journal -- on ext4 here a second device flush per group-commit
  // round (fio, 3 jobs of 4 KiB pwrite + fdatasync: 9,636-11,429 writes/s into fallocated
  // files, 19,007-20,140 into written ones). A flusher zeroes the next zero_chunk_bytes
  // after a round of at most zero_round_max_bytes of payload: zeroing writes every byte of
  // the log twice, which small records (whose rounds pay the journal commit per few KiB)
  // gain from and large ones (whose rounds are bound by the disk's bandwidth) do not.
  uint64_t zero_ahead_bytes = 8 << 20;
  uint64_t zero_chunk_bytes = 2 << 20;
  uint64_t zero_round_max_bytes = 128 << 10;
  // Tests only: called on the zeroing flusher before it writes a chunk [begin, end) of
  // segment `segment_id` (no store lock held).
  std::function<void(uint64_t segment_id, uint64_t begin, uint64_t end)> zero_hook;
  // Compaction (README "Compaction"): a sealed segment whose live records take less than
  // compact_live_ratio of its size (segment_bytes, or more for a larger record) has its
  // live records copied to the log's end and is deleted; one with nothing live is just
  // deleted. A background thread ("store-compact", nice 10) checks every
  // compaction_interval and when a segment is sealed, copying at most
  // compaction_bytes_per_sec (0: no limit); Compact() does it at once. Memory mode has no
  // segments (an overwritten payload is freed at once).
  // The background thread copies a partly live segment only once it has aged: the log
  // has grown by compaction_min_age_segments x segment_bytes since it was sealed, or
  // compaction_min_age has passed (or the log is past 80% of capacity_bytes). Under
  // overwrites most of a just-sealed segment's live records die by themselves meanwhile.
  bool background_compaction = true;
  double compact_live_ratio = 0.5;
  uint64_t compaction_bytes_per_sec = 64ull << 20;
  absl::Duration compaction_interval = absl::Milliseconds(200);
  double compaction_min_age_segments = 0.5;
  absl::Duration compaction_min_age = absl::Seconds(30);
  // Tests only: called at each CompactionStep of each segment compacted, on the thread
  // compacting it (with no store lock held).
  std::function<void(CompactionStep, uint64_t segment_id)> compaction_hook;
};

// Called once with OK when the write is durable per the mode, or with the error that
// made it impossible (a failed fdatasync).
using DurableCallback = absl::AnyInvocable<void(absl::Status)>;

class ObjectStore {
 public:
  // Opens (recovering) or creates the store. Only one process may open a directory.
  static absl::StatusOr<std::unique_ptr<ObjectStore>> Open(const StoreOptions& options);
  // Flushes outstanding durable writes, fires their callbacks, stops the flusher.
  ~ObjectStore();
  ObjectStore(const ObjectStore&) = delete;
  ObjectStore& operator=(const ObjectStore&) = delete;

  // Writes the `iovcnt` buffers of `iov` (together: the payload, whose crc32c the caller
  // has verified and passes as `payload_crc`) at byte `off` of object `oid`. The object's
  // size becomes max(size, off + len); with `flags & kTruncate` the write replaces the
  // object instead. The caller's buffers are only read during the call and may be reused
  // as soon as it returns. Returns a ticket for WhenDurable/WaitDurable.
  // Errors (nothing written, no ticket): kInvalidArgument for a bad oid / flags / size;
  // kResourceExhausted "store full: ..." on capacity_bytes or ENOSPC — earlier data stays
  // readable and smaller writes that fit still succeed.
  // REQUIRES: 1 <= oid.size() <= kMaxOidBytes, 0 <= iovcnt <= kMaxIovcnt.
  absl::StatusOr<uint64_t> Append(std::string_view oid, uint64_t off, const struct iovec* iov,
                                  int iovcnt, uint32_t payload_crc, uint32_t flags);
  // As Append, and `done` is called once the write is durable (never if Append fails).
  absl::StatusOr<uint64_t> Append(std::string_view oid, uint64_t off, const struct iovec* iov,
                                  int iovcnt, uint32_t payload_crc, uint32_t flags,
                                  DurableCallback done);

  // A write of several records, applied atomically: every part but the last has
  // kContinued; the first (which may have kTruncate) is appended with write_id 0 and the
  // write's id is WriteIdOf(its returned ticket) (record.h); the later parts pass that id.
  // No part is visible until the last one has been appended; then the whole write is,
  // as one write at the last part's place in the log. A write whose last part never
  // comes stays invisible (AbortWrite drops it at once; recovery drops it on Open).
  // Errors as Append, and kFailedPrecondition (nothing written) for a part whose write
  // is not open, or that does not start where the previous part ended (the write is then
  // dropped). Each part's `done` reports that part's durability only, and callbacks of
  // different flush rounds may fire out of order (a part in another segment may still be
  // syncing): a write is durable once *every* part's `done` reported OK -- the OSD acks
  // records in ring order, which waits for all of them. One thread appends a write's
  // parts (in offset order) and aborts it; different writes may go on in parallel.
  // Logs with writes of several records are not readable by builds before this API
  // (they skip those records as corrupt): no downgrade.
  absl::StatusOr<uint64_t> AppendPart(std::string_view oid, uint64_t off,
                                      const struct iovec* iov, int iovcnt,
                                      uint32_t payload_crc, uint32_t flags, uint32_t write_id,
                                      DurableCallback done);
  // Drops the parts appended so far of write `write_id` of `oid` (its writer is gone).
  void AbortWrite(std::string_view oid, uint32_t write_id);

  // Calls `done` once `ticket` is durable (immediately, on this thread, if it already is).
  // An unknown ticket gets kInvalidArgument.
  void WhenDurable(uint64_t ticket, DurableCallback done);
  // Blocks until `ticket` is durable; returns what the callback would have received.
  absl::Status WaitDurable(uint64_t ticket);
  // Blocks until each of `tickets` is durable (appends issued together share flushes);
  // the first error, if any.
  absl::Status WaitDurable(const std::vector<uint64_t>& tickets);

  // Returns the object's bytes (holes read as zeros). kNotFound if it was never written
  // (or was deleted); kDataLoss if any byte fails its checksum (nothing is returned then).
  absl::StatusOr<std::string> Read(std::string_view oid);
  // Bytes [offset, offset + length) of the object, cut at its end (empty at or past it).
  // Every write that overlaps the range is read whole, since its checksum covers all of it.
  absl::StatusOr<std::string> Read(std::string_view oid, uint64_t offset, uint64_t length);
  // The object's size; kNotFound as Read.
  absl::StatusOr<uint64_t> Stat(std::string_view oid);

  // Deletes the object: appends a delete record (kDelete), so that recovery replays it.
  // Returns a ticket for WhenDurable, as Append; kNotFound if the object does not exist
  // (nothing written). The deleted writes' payloads are freed at once in kMemory mode and
  // by compaction otherwise; compaction drops the delete record itself once no older
  // record of the object is left in the log.
  absl::StatusOr<uint64_t> Delete(std::string_view oid);

  // Compacts now, on the calling thread, every sealed segment under compact_live_ratio
  // (StoreOptions), without the background rate limit; returns when none is left that can
  // be compacted now (one still waiting for a write's durability is retried for a few
  // seconds, then left). Errors: the first I/O error (the segment stays; nothing
  // acknowledged is lost). A segment with a live payload that fails its crc is kept and
  // counted (compaction_crc_errors), the rest of it copied. For tests and the admin
  // socket; the background thread does the same by itself.
  absl::Status Compact();

  // One page of the objects whose id starts with `prefix`, after `after` in byte order
  // (ObjectIndex::List): pass the last id of a page to get the next one.
  std::vector<ObjectIndex::Listed> List(std::string_view prefix, std::string_view after,
                                        size_t max) const;

  // ObjectIndex::ListWrittenSince: objects (deleted ones too) whose current state was
  // written at a seq >= `since`, e.g. a NextSeq() taken earlier.
  std::vector<ObjectIndex::Written> ListWrittenSince(std::string_view prefix,
                                                     std::string_view after, uint64_t since,
                                                     size_t max) const;
  // The seq the next append will get, at least: every write and delete appended from now
  // on applies at a seq >= this. Seqs only grow within a run and across Open (recovery
  // continues after the highest seq in the log), so a value kept in a file still orders
  // the writes of later runs after it -- as long as the records it counted are in the log
  // (a torn tail discarded at Open gives its seqs out again).
  uint64_t NextSeq() const;

  StoreStats GetStats() const;

  static constexpr int kMaxIovcnt = 1000;  // plus header, oid and pad: below IOV_MAX

  class Impl;

 private:
  explicit ObjectStore(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_OBJECT_STORE_H_

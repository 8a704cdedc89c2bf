// One segment file of the object store's log: an owned file descriptor plus the
// positional I/O the store needs. RAII: the destructor closes the descriptor.
//
// Two descriptors on the same file: a buffered one (reads, small writes, fdatasync) and,
// where the filesystem allows it, an O_DIRECT one for large aligned writes, which then go
// from the caller's memory to the device without a page-cache copy or writeback. Either
// way the data is durable only after Sync (O_DIRECT skips the page cache, not the
// device's volatile write cache).
//
// Thread-safety: every method may be called from any thread concurrently; writes to
// disjoint ranges do not interfere (pwritev/pread are positional). The caller keeps
// `iov` buffers alive for the duration of WriteFull only: the bytes go from the
// caller's memory straight to the kernel, with no user-space copy.
#ifndef MSGR_OSD_SIM_STORE_SEGMENT_FILE_H_
#define MSGR_OSD_SIM_STORE_SEGMENT_FILE_H_

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace msgr::store {

class SegmentFile {
 public:
  // Opens (or, with `create`, creates exclusively) the segment at `path`.
  // `sync_streams`: how many threads may Sync at once (each gets its own descriptor).
  static absl::StatusOr<std::unique_ptr<SegmentFile>> Open(std::string path, uint64_t id,
                                                          bool create, int sync_streams = 1);
  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;

  // Writes all `iovcnt` buffers at `off`, retrying short writes. On a partial failure
  // some prefix may have reached the file. REQUIRES: iovcnt <= IOV_MAX.
  // With `direct` the write goes through the O_DIRECT descriptor; REQUIRES then
  // has_direct(), and `off` and every buffer's address and length are multiples of
  // kDirectAlign (record.h). If the kernel still refuses it (EINVAL) the same bytes are
  // written through the buffered descriptor instead, and `*fell_back` (if given) is set.
  absl::Status WriteFull(uint64_t off, const struct iovec* iov, int iovcnt, bool direct = false,
                         bool* fell_back = nullptr) const;
  // Reads exactly `len` bytes at `off`; kOutOfRange if the file ends first.
  absl::Status ReadFull(uint64_t off, void* dst, size_t len) const;
  // fdatasync: data and the size needed to read it back are on stable storage.
  // Linux reports a writeback error once per open file description: two flushers syncing
  // through one descriptor at the same time could each miss the error the other consumed
  // (a round would be told that its lost pages are durable). So each concurrent syncer
  // uses its own `stream`, 0 .. sync_streams-1 (0 = the main descriptor; the others were
  // opened with the file, so no sync needs a new descriptor or misses an earlier error),
  // and an error is sticky: once a sync failed, every later Sync of this file returns it
  // (the page cache no longer holds the lost pages, so a later sync "succeeds").
  absl::Status Sync(int stream = 0) const;
  absl::Status Truncate(uint64_t size) const;
  absl::StatusOr<uint64_t> Size() const;
  // Allocates (fallocate, mode 0) the file up to `size` bytes: the new space reads as
  // zeros, and later writes into it need no block allocation. Best effort: on failure
  // (no space, unsupported) the file keeps its old size and an error is returned.
  absl::Status Preallocate(uint64_t size) const;
  // The first offset >= `off` that holds data (SEEK_DATA; holes and unwritten extents
  // are skipped); `off` itself where the filesystem cannot tell; UINT64_MAX if only holes
  // follow.
  absl::StatusOr<uint64_t> SeekData(uint64_t off) const;
  // The first offset >= `off` in a hole (SEEK_HOLE); the file size if none follows or
  // the filesystem cannot tell. Together with SeekData: the data ranges to read.
  absl::StatusOr<uint64_t> SeekHole(uint64_t off) const;
  bool has_direct() const { return direct_fd_ >= 0; }

  uint64_t id() const { return id_; }
  const std::string& path() const { return path_; }

 private:
  SegmentFile(std::string path, uint64_t id, int fd, int direct_fd, std::vector<int> stream_fds)
      : path_(std::move(path)),
        id_(id),
        fd_(fd),
        direct_fd_(direct_fd),
        stream_fds_(std::move(stream_fds)) {}

  const std::string path_;
  const uint64_t id_;
  const int fd_;
  const int direct_fd_;  // -1: no O_DIRECT on this filesystem
  const std::vector<int> stream_fds_;  // [stream - 1]: streams 1..
  mutable absl::Mutex sync_mu_;
  mutable absl::Status sync_error_ ABSL_GUARDED_BY(sync_mu_);
};

// Tests only: every SegmentFile::Sync calls `fn` instead of fdatasync(2) (nullptr: the
// real one again), to show what the store does when the disk fails a flush.
void SetFdatasyncForTest(int (*fn)(int fd));

// "seg-<16 hex digits>.log"; ParseSegmentName returns false for any other name.
std::string SegmentName(uint64_t id);
bool ParseSegmentName(const std::string& name, uint64_t* id);

// fsyncs directory `dir` so entries created in it (new segments) survive a crash.
absl::Status SyncDir(const std::string& dir);

// Whether `dir`'s filesystem allocates with *unwritten* extents (ext2/3/4, XFS): space
// that fallocate reserved but nothing wrote, whose first write changes the extent map.
// Elsewhere (tmpfs, btrfs's copy-on-write) writing zeros ahead of the log gains nothing.
bool HasUnwrittenExtents(const std::string& dir);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_SEGMENT_FILE_H_

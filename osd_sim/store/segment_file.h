// One segment file of the object store's log: an owned file descriptor plus the
// positional I/O the store needs. RAII: the destructor closes the descriptor.
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

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace msgr::store {

class SegmentFile {
 public:
  // Opens (or, with `create`, creates exclusively) the segment at `path`.
  static absl::StatusOr<std::unique_ptr<SegmentFile>> Open(std::string path, uint64_t id,
                                                          bool create);
  ~SegmentFile();
  SegmentFile(const SegmentFile&) = delete;
  SegmentFile& operator=(const SegmentFile&) = delete;

  // Writes all `iovcnt` buffers at `off`, retrying short writes. On a partial failure
  // some prefix may have reached the file. REQUIRES: iovcnt <= IOV_MAX.
  absl::Status WriteFull(uint64_t off, const struct iovec* iov, int iovcnt) const;
  // Reads exactly `len` bytes at `off`; kOutOfRange if the file ends first.
  absl::Status ReadFull(uint64_t off, void* dst, size_t len) const;
  // fdatasync: data and the size needed to read it back are on stable storage.
  absl::Status Sync() const;
  absl::Status Truncate(uint64_t size) const;
  absl::StatusOr<uint64_t> Size() const;

  uint64_t id() const { return id_; }
  const std::string& path() const { return path_; }

 private:
  SegmentFile(std::string path, uint64_t id, int fd) : path_(std::move(path)), id_(id), fd_(fd) {}

  const std::string path_;
  const uint64_t id_;
  const int fd_;
};

// "seg-<16 hex digits>.log"; ParseSegmentName returns false for any other name.
std::string SegmentName(uint64_t id);
bool ParseSegmentName(const std::string& name, uint64_t* id);

// fsyncs directory `dir` so entries created in it (new segments) survive a crash.
absl::Status SyncDir(const std::string& dir);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_SEGMENT_FILE_H_

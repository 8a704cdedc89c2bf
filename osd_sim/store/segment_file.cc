#include "osd_sim/store/segment_file.h"

#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "osd_sim/store/posix_error.h"

namespace msgr::store {

absl::StatusOr<std::unique_ptr<SegmentFile>> SegmentFile::Open(std::string path, uint64_t id,
                                                               bool create, int sync_streams) {
  const int flags = O_RDWR | O_CLOEXEC | (create ? O_CREAT | O_EXCL : 0);
  const int fd = ::open(path.c_str(), flags, 0644);
  if (fd < 0) return PosixError(create ? "create segment" : "open segment", path, errno);
  // A second descriptor for O_DIRECT writes; filesystems without O_DIRECT refuse it.
  // No readahead: reads are explicit and sized, and readahead would pull never-written
  // (preallocated) space into the page cache, where SEEK_DATA then counts it as data.
  (void)::posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
  const int direct_fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_DIRECT);
  std::vector<int> stream_fds;
  for (int i = 1; i < sync_streams; ++i) {
    const int s = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);  // its own open file, not dup
    if (s < 0) {
      const int err = errno;
      for (int f : stream_fds) ::close(f);
      if (direct_fd >= 0) ::close(direct_fd);
      ::close(fd);
      return PosixError("open segment for a flusher", path, err);
    }
    stream_fds.push_back(s);
  }
  return std::unique_ptr<SegmentFile>(
      new SegmentFile(std::move(path), id, fd, direct_fd, std::move(stream_fds)));
}

SegmentFile::~SegmentFile() {
  for (int fd : stream_fds_) ::close(fd);
  if (direct_fd_ >= 0) ::close(direct_fd_);
  ::close(fd_);
}

absl::Status SegmentFile::WriteFull(uint64_t off, const struct iovec* iov, int iovcnt,
                                    bool direct, bool* fell_back) const {
  int fd = direct ? direct_fd_ : fd_;
  // pwritev may stop short (signal, file-size limit, disk filling up): advance and retry
  // on a private copy of the iovec array. The payload bytes themselves are never copied.
  absl::InlinedVector<struct iovec, 16> rest(iov, iov + iovcnt);
  size_t first = 0;
  while (first < rest.size()) {
    const ssize_t n = ::pwritev(fd, rest.data() + first, static_cast<int>(rest.size() - first),
                                static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EINVAL && fd != fd_) {  // alignment the device wants but we missed
        fd = fd_;
        if (fell_back != nullptr) *fell_back = true;
        continue;
      }
      return PosixError(absl::StrCat("pwritev at ", off), path_, errno);
    }
    if (n == 0) return PosixError(absl::StrCat("pwritev at ", off), path_, ENOSPC);
    off += static_cast<uint64_t>(n);
    size_t left = static_cast<size_t>(n);
    while (first < rest.size() && left >= rest[first].iov_len) {
      left -= rest[first].iov_len;
      ++first;
    }
    if (left > 0) {
      rest[first].iov_base = static_cast<char*>(rest[first].iov_base) + left;
      rest[first].iov_len -= left;
    }
  }
  return absl::OkStatus();
}

absl::Status SegmentFile::ReadFull(uint64_t off, void* dst, size_t len) const {
  char* p = static_cast<char*>(dst);
  while (len > 0) {
    const ssize_t n = ::pread(fd_, p, len, static_cast<off_t>(off));
    if (n < 0) {
      if (errno == EINTR) continue;
      return PosixError(absl::StrCat("pread at ", off), path_, errno);
    }
    if (n == 0) return absl::OutOfRangeError(absl::StrCat("pread at ", off, " ", path_, ": end of file"));
    p += n;
    off += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

namespace {
std::atomic<int (*)(int)> g_fdatasync_for_test{nullptr};
}  // namespace

void SetFdatasyncForTest(int (*fn)(int fd)) { g_fdatasync_for_test.store(fn); }

absl::Status SegmentFile::Sync(int stream) const {
  // A stream beyond those opened shares the main descriptor (callers pass their index).
  const int fd = stream > 0 && static_cast<size_t>(stream) <= stream_fds_.size()
                     ? stream_fds_[stream - 1]
                     : fd_;
  {
    absl::MutexLock l(&sync_mu_);
    if (!sync_error_.ok()) return sync_error_;
  }
  int (*const test_fn)(int) = g_fdatasync_for_test.load();
  const int rc = test_fn ? test_fn(fd) : ::fdatasync(fd);
  const int err = errno;
  absl::MutexLock l(&sync_mu_);
  if (rc != 0 && sync_error_.ok()) sync_error_ = PosixError("fdatasync", path_, err);
  return sync_error_;
}

absl::Status SegmentFile::Truncate(uint64_t size) const {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) {
    return PosixError(absl::StrCat("ftruncate to ", size), path_, errno);
  }
  return absl::OkStatus();
}

absl::Status SegmentFile::Preallocate(uint64_t size) const {
  absl::StatusOr<uint64_t> old = Size();
  if (!old.ok()) return old.status();
  if (*old >= size) return absl::OkStatus();
  if (::fallocate(fd_, 0, 0, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    // A failed fallocate may leave part of the range allocated (and the size grown):
    // cut back so nothing past the old end is left half-made.
    if (::ftruncate(fd_, static_cast<off_t>(*old)) != 0) {
      // Nothing more to do: the extra allocation past the end is harmless, only wasteful.
    }
    return PosixError(absl::StrCat("fallocate to ", size), path_, err);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SegmentFile::SeekData(uint64_t off) const {
  const off_t r = ::lseek(fd_, static_cast<off_t>(off), SEEK_DATA);
  if (r >= 0) return static_cast<uint64_t>(r);
  if (errno == ENXIO) return UINT64_MAX;
  if (errno == EINVAL || errno == EOPNOTSUPP) return off;
  return PosixError(absl::StrCat("lseek SEEK_DATA at ", off), path_, errno);
}

absl::StatusOr<uint64_t> SegmentFile::SeekHole(uint64_t off) const {
  const off_t r = ::lseek(fd_, static_cast<off_t>(off), SEEK_HOLE);
  if (r >= 0) return static_cast<uint64_t>(r);
  if (errno == ENXIO || errno == EINVAL || errno == EOPNOTSUPP) return Size();
  return PosixError(absl::StrCat("lseek SEEK_HOLE at ", off), path_, errno);
}

absl::StatusOr<uint64_t> SegmentFile::Size() const {
  struct stat st;
  if (::fstat(fd_, &st) != 0) return PosixError("fstat", path_, errno);
  return static_cast<uint64_t>(st.st_size);
}

std::string SegmentName(uint64_t id) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "seg-%016" PRIx64 ".log", id);
  return buf;
}

bool ParseSegmentName(const std::string& name, uint64_t* id) {
  if (name.size() != 24 || name.compare(0, 4, "seg-") != 0 || name.compare(20, 4, ".log") != 0) {
    return false;
  }
  uint64_t v = 0;
  for (size_t i = 4; i < 20; ++i) {
    const char c = name[i];
    int d;
    if (c >= '0' && c <= '9') {
      d = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      d = c - 'a' + 10;
    } else {
      return false;
    }
    v = v << 4 | static_cast<uint64_t>(d);
  }
  *id = v;
  return true;
}

absl::Status SyncDir(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return PosixError("open directory", dir, errno);
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return PosixError("fsync directory", dir, err);
  return absl::OkStatus();
}

bool HasUnwrittenExtents(const std::string& dir) {
  constexpr long kExt = 0xEF53;      // ext2, ext3, ext4 (EXT4_SUPER_MAGIC)
  constexpr long kXfs = 0x58465342;  // XFS_SUPER_MAGIC
  struct statfs fs {};
  if (::statfs(dir.c_str(), &fs) != 0) return false;
  return static_cast<long>(fs.f_type) == kExt || static_cast<long>(fs.f_type) == kXfs;
}

}  // namespace msgr::store

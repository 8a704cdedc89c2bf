#include "osd_sim/store/file_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "osd_sim/store/posix_error.h"
#include "osd_sim/store/segment_file.h"

namespace msgr::store {

absl::StatusOr<std::unique_ptr<FileStore>> FileStore::Open(const std::string& dir,
                                                           Durability mode) {
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError("mkdir", dir, errno);
  return std::unique_ptr<FileStore>(new FileStore(dir, mode));
}

absl::Status FileStore::Put(std::string_view oid, const struct iovec* iov, int iovcnt) {
  const std::string path = absl::StrCat(dir_, "/", Sv(oid));
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError("open", tmp, errno);
  size_t want = 0;
  for (int i = 0; i < iovcnt; ++i) want += iov[i].iov_len;
  const ssize_t n = ::pwritev(fd, iov, iovcnt, 0);
  absl::Status s;
  if (n < 0) {
    s = PosixError("pwritev", tmp, errno);
  } else if (static_cast<size_t>(n) != want) {
    s = PosixError("pwritev (short)", tmp, ENOSPC);
  } else if (mode_ == Durability::kDurable && ::fdatasync(fd) != 0) {
    s = PosixError("fdatasync", tmp, errno);
  }
  ::close(fd);
  if (!s.ok()) return s;
  if (::rename(tmp.c_str(), path.c_str()) != 0) return PosixError("rename", tmp, errno);
  if (mode_ == Durability::kDurable) return SyncDir(dir_);
  return absl::OkStatus();
}

absl::StatusOr<std::string> FileStore::Read(std::string_view oid) {
  const std::string path = absl::StrCat(dir_, "/", Sv(oid));
  absl::StatusOr<std::unique_ptr<SegmentFile>> f = SegmentFile::Open(path, 0, false);
  if (!f.ok()) return f.status();
  absl::StatusOr<uint64_t> size = (*f)->Size();
  if (!size.ok()) return size.status();
  std::string out(*size, '\0');
  if (absl::Status s = (*f)->ReadFull(0, out.data(), out.size()); !s.ok()) return s;
  return out;
}

}  // namespace msgr::store

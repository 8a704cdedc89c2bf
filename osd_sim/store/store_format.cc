#include "osd_sim/store/store_format.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "osd_sim/store/posix_error.h"
#include "osd_sim/store/segment_file.h"
#include "spdlog/spdlog.h"

namespace msgr::store {
namespace {

constexpr std::string_view kFormatPrefix = "msgr object store format ";
constexpr size_t kMaxFormatFileBytes = 256;

// "msgr object store format N" with an optional final newline; N decimal, 1..9 digits.
std::optional<uint32_t> ParseFormatLine(std::string_view text) {
  if (text.substr(0, kFormatPrefix.size()) != kFormatPrefix) return std::nullopt;
  text.remove_prefix(kFormatPrefix.size());
  if (!text.empty() && text.back() == '\n') text.remove_suffix(1);
  if (text.empty() || text.size() > 9) return std::nullopt;
  uint32_t v = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    v = v * 10 + static_cast<uint32_t>(c - '0');
  }
  return v;
}

}  // namespace

absl::StatusOr<std::optional<uint32_t>> ReadStoreFormat(const std::string& dir) {
  const std::string path = absl::StrCat(dir, "/", kFormatFileName);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return std::optional<uint32_t>();
    return PosixError("open", path, errno);
  }
  std::string text(kMaxFormatFileBytes + 1, '\0');
  size_t got = 0;
  while (got < text.size()) {
    const ssize_t n = ::read(fd, text.data() + got, text.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return PosixError("read", path, err);
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  text.resize(got);
  const std::optional<uint32_t> v = got <= kMaxFormatFileBytes ? ParseFormatLine(text) : std::nullopt;
  if (!v) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store in ", dir, " has an unreadable ", kFormatFileName, " file (want one line '",
        Sv(kFormatPrefix), "N'): not a store of this msgr, or damaged; use a new --data-dir"));
  }
  return v;
}

absl::Status WriteStoreFormat(const std::string& dir, uint32_t version) {
  const std::string path = absl::StrCat(dir, "/", kFormatFileName);
  const std::string tmp = path + ".tmp";
  const std::string text = absl::StrCat(Sv(kFormatPrefix), version, "\n");
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return PosixError("create", tmp, errno);
  size_t put = 0;
  while (put < text.size()) {
    const ssize_t n = ::write(fd, text.data() + put, text.size() - put);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      return PosixError("write", tmp, err);
    }
    put += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    return PosixError("fsync", tmp, err);
  }
  ::close(fd);
  if (::rename(tmp.c_str(), path.c_str()) != 0) return PosixError("rename", tmp, errno);
  return SyncDir(dir);
}

absl::Status CheckStoreFormat(const std::string& dir) {
  absl::StatusOr<std::optional<uint32_t>> v = ReadStoreFormat(dir);
  if (!v.ok()) return v.status();
  if (!v->has_value()) {
    // A new store, or one made before the FORMAT file existed (format 1 by definition).
    spdlog::info("store {}: no {} file, format {}: writing it", dir, kFormatFileName,
                 kStoreFormatVersion);
    return WriteStoreFormat(dir, kStoreFormatVersion);
  }
  if (**v < kOldestReadableStoreFormat || **v > kStoreFormatVersion) {
    return absl::FailedPreconditionError(absl::StrCat(
        "store in ", dir, " has format ", **v, ", this OSD reads formats ",
        kOldestReadableStoreFormat, " to ", kStoreFormatVersion,
        ": use a matching msgr build or a new --data-dir"));
  }
  if (**v < kStoreFormatVersion) {
    spdlog::info("store {}: format {} -> {} (an older build can no longer open it)", dir, **v,
                 kStoreFormatVersion);
    return WriteStoreFormat(dir, kStoreFormatVersion);
  }
  return absl::OkStatus();
}

}  // namespace msgr::store

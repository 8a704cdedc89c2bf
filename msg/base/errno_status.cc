#include "msg/base/errno_status.h"

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"

namespace msgr {

bool IsNoSpaceErrno(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

absl::Status ErrnoStatus(int err, absl::string_view what) {
  // std::strerror: glibc returns a static table entry for every known errno, which is
  // thread-safe in practice (strerror_r has two incompatible signatures).
  const std::string msg = absl::StrCat(what, ": ", std::strerror(err), " (errno ", err, ")");
  if (IsNoSpaceErrno(err)) return absl::ResourceExhaustedError(msg);
  switch (err) {
    case ENOMEM:
    case EMFILE:
    case ENFILE:
    case EAGAIN:  // == EWOULDBLOCK on Linux
      return absl::ResourceExhaustedError(msg);
    case EINVAL:
    case EOPNOTSUPP:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(msg);
    case ENOENT:
    case ENOTDIR:
    case ENODEV:
    case ENXIO:
      return absl::NotFoundError(msg);
    case EEXIST:
    case EADDRINUSE:
      return absl::AlreadyExistsError(msg);
    case EPERM:
    case EACCES:
    case EROFS:
      return absl::PermissionDeniedError(msg);
    case ECONNREFUSED:
    case ECONNRESET:
    case ECONNABORTED:
    case EPIPE:
    case ENOTCONN:
    case ENETUNREACH:
    case EHOSTUNREACH:
    case EBUSY:
    case EINTR:
      return absl::UnavailableError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace msgr

#include "msg/rdma/verbs/errno_status.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace msgr {
namespace verbs {

absl::Status ErrnoStatus(int err, absl::string_view what) {
  std::string msg = absl::StrCat(what, ": ", std::strerror(err), " (errno ", err, ")");
  switch (err) {
    case ENOMEM:
    case ENOSPC:
    case EMFILE:
    case ENFILE:
    case EAGAIN:
      return absl::ResourceExhaustedError(msg);
    case EINVAL:
    case EOPNOTSUPP:
      return absl::InvalidArgumentError(msg);
    case ENOENT:
    case ENODEV:
    case ENXIO:
      return absl::NotFoundError(msg);
    case EPERM:
    case EACCES:
      return absl::PermissionDeniedError(msg);
    case ECONNREFUSED:
    case ECONNRESET:
    case EPIPE:
    case ENOTCONN:
      return absl::UnavailableError(msg);
    case EBUSY:
      return absl::FailedPreconditionError(msg);
    case ETIMEDOUT:
      return absl::DeadlineExceededError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace verbs
}  // namespace msgr

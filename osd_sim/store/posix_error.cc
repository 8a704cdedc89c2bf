#include "osd_sim/store/posix_error.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace msgr::store {

bool IsNoSpaceErrno(int err) { return err == ENOSPC || err == EDQUOT || err == EFBIG; }

absl::Status PosixError(std::string_view op, std::string_view path, int err) {
  // strerror_r has two incompatible signatures; strerrordesc_np is glibc-only.
  // std::strerror is fine here: glibc returns a pointer to a static table entry
  // for every known errno, which is thread-safe in practice.
  const std::string msg = absl::StrCat(Sv(op), " ", Sv(path), ": ", std::strerror(err));
  if (IsNoSpaceErrno(err)) return absl::ResourceExhaustedError(absl::StrCat("store full: ", msg));
  switch (err) {
    case ENOENT:
      return absl::NotFoundError(msg);
    case EEXIST:
      return absl::AlreadyExistsError(msg);
    case EACCES:
    case EPERM:
      return absl::PermissionDeniedError(msg);
    case EINVAL:
    case ENAMETOOLONG:
      return absl::InvalidArgumentError(msg);
    case EAGAIN:  // == EWOULDBLOCK on Linux
    case EBUSY:
      return absl::UnavailableError(msg);
    default:
      return absl::InternalError(msg);
  }
}

}  // namespace msgr::store

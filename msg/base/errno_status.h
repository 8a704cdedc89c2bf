// errno -> absl::Status, in exactly one place for the whole tree (leveldb's PosixError).
//
// Every failing system call reports through ErrnoStatus, so the message always names
// the operation and the code is chosen the same way everywhere. Callers that need a
// domain word in front (the store's "store full: ...") wrap the result; they do not
// choose codes themselves. Thread-safe; no state.
#ifndef MSGR_MSG_BASE_ERRNO_STATUS_H_
#define MSGR_MSG_BASE_ERRNO_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace msgr {

// A Status for `what` failing with `err` (an errno value), "what: strerror (errno N)".
// Codes: out of memory, descriptors or space (ENOMEM, EMFILE, ENFILE, ENOSPC, EDQUOT,
// EFBIG, EAGAIN) -> ResourceExhausted; EINVAL, EOPNOTSUPP, ENAMETOOLONG ->
// InvalidArgument; ENOENT, ENOTDIR, ENODEV, ENXIO -> NotFound; EEXIST, EADDRINUSE ->
// AlreadyExists; EPERM, EACCES, EROFS -> PermissionDenied; connection refused/reset/
// broken, unreachable networks, EBUSY, EINTR -> Unavailable; ETIMEDOUT -> DeadlineExceeded; anything else -> Internal.
// REQUIRES: err != 0.
absl::Status ErrnoStatus(int err, absl::string_view what);

// True if `err` means a file system (or a file size limit) is full.
bool IsNoSpaceErrno(int err);

}  // namespace msgr

#endif  // MSGR_MSG_BASE_ERRNO_STATUS_H_

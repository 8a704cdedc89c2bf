// errno -> absl::Status, in one place for both verbs providers (leveldb's PosixError idea).
// Thread-safe; no state.
#ifndef MSGR_MSG_RDMA_VERBS_ERRNO_STATUS_H_
#define MSGR_MSG_RDMA_VERBS_ERRNO_STATUS_H_

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace msgr {
namespace verbs {

// A Status for `what` failing with `err` (an errno value): "what: strerror (errno N)",
// with a code that matches the errno (ENOMEM -> ResourceExhausted, EINVAL -> InvalidArgument,
// ENOENT/ENODEV -> NotFound, EPERM/EACCES -> PermissionDenied, ...).
absl::Status ErrnoStatus(int err, absl::string_view what);

}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_ERRNO_STATUS_H_

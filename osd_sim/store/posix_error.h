// The object store's system-call errors: msgr::ErrnoStatus (msg/base/errno_status.h, the
// one errno -> Status helper) with the path named and a full disk said in words.
//
// Every failing system call in osd_sim/store/ reports through PosixError so the message
// names the operation and the path, and ENOSPC / EDQUOT / EFBIG read "store full: ..."
// (kResourceExhausted) so callers can tell "disk full, retry later" from real I/O errors.
// Thread-safe; no state.
#ifndef MSGR_OSD_SIM_STORE_POSIX_ERROR_H_
#define MSGR_OSD_SIM_STORE_POSIX_ERROR_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "msg/base/errno_status.h"

namespace msgr::store {

// Returns a Status for system call `op` on `path` that failed with `err` (an errno
// value). REQUIRES: err != 0.
absl::Status PosixError(std::string_view op, std::string_view path, int err);

// Debian's Abseil is built with its own absl::string_view (not std::string_view):
// this bridges std::string_view into StrCat / Status messages.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

using msgr::IsNoSpaceErrno;

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_POSIX_ERROR_H_

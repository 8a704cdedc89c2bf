// errno -> absl::Status, in exactly one place for the object store.
//
// Every failing system call in osd_sim/store/ reports through PosixError so the
// message always names the operation and the path, and the status code is chosen
// consistently: ENOSPC / EDQUOT / EFBIG become kResourceExhausted ("store full: ...")
// so callers can tell "disk full, retry later" from real I/O errors.
// Thread-safe; no state.
#ifndef MSGR_OSD_SIM_STORE_POSIX_ERROR_H_
#define MSGR_OSD_SIM_STORE_POSIX_ERROR_H_

#include <string_view>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace msgr::store {

// Returns a Status for system call `op` on `path` that failed with `err` (an errno
// value). REQUIRES: err != 0.
absl::Status PosixError(std::string_view op, std::string_view path, int err);

// Debian's Abseil is built with its own absl::string_view (not std::string_view):
// this bridges std::string_view into StrCat / Status messages.
inline absl::string_view Sv(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Returns true if `err` means the file system (or a file size limit) is full.
bool IsNoSpaceErrno(int err);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_POSIX_ERROR_H_

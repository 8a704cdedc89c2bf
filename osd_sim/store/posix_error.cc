#include "osd_sim/store/posix_error.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace msgr::store {

absl::Status PosixError(std::string_view op, std::string_view path, int err) {
  absl::Status s = ErrnoStatus(err, absl::StrCat(Sv(op), " ", Sv(path)));
  if (!IsNoSpaceErrno(err)) return s;
  return absl::ResourceExhaustedError(absl::StrCat("store full: ", s.message()));
}

}  // namespace msgr::store

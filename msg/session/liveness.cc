#include "msg/session/liveness.h"

#include <string>

#include "absl/strings/str_cat.h"

namespace msgr::session {

absl::Status Liveness::Check(Clock::time_point now, absl::Duration timeout,
                             std::string_view who) const {
  const absl::Duration silent = absl::FromChrono(now - last_);
  if (silent <= timeout) return absl::OkStatus();
  return absl::DeadlineExceededError(
      absl::StrCat("keepalive timeout: nothing from ", std::string(who), " for ",
                   absl::FormatDuration(absl::Trunc(silent, absl::Milliseconds(1)))));
}

}  // namespace msgr::session

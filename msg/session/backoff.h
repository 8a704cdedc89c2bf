// How long the connecting side of a lossless session waits before its next attempt after
// a failed one (msg/PROTOCOL.md, "Sessions"): 5 ms after the first failure, doubling up to
// MessengerOptions::reconnect_backoff_max; an attempt that connects starts over. The one
// rule of both backends, sans-I/O. Not thread-safe: one owner (a strand, or its thread).
#ifndef MSGR_MSG_SESSION_BACKOFF_H_
#define MSGR_MSG_SESSION_BACKOFF_H_

#include <algorithm>

#include "absl/time/time.h"

namespace msgr::session {

class ReconnectBackoff {
 public:
  static constexpr absl::Duration kFirst = absl::Milliseconds(5);

  explicit ReconnectBackoff(absl::Duration max) : max_(max) {}

  // An attempt failed: how long to wait before the next one.
  absl::Duration Next() {
    last_ = last_ == absl::ZeroDuration() ? kFirst : last_ * 2;
    last_ = std::min(last_, max_);
    return last_;
  }
  // An attempt connected.
  void Reset() { last_ = absl::ZeroDuration(); }

 private:
  const absl::Duration max_;
  absl::Duration last_ = absl::ZeroDuration();
};

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_BACKOFF_H_

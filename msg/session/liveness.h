// When a silent peer counts as gone: the one keepalive rule of every backend, sans-I/O.
// The backend sends KEEPALIVE every keepalive_interval and calls Heard() whenever the
// peer shows life (tcp: any bytes read, even in the middle of a long frame; rdma: a
// KEEPALIVE_ACK on the side channel); Check() says when keepalive_timeout has passed
// without any. Thread-safety: none inside; one owner (a strand, or under a lock).
#ifndef MSGR_MSG_SESSION_LIVENESS_H_
#define MSGR_MSG_SESSION_LIVENESS_H_

#include <chrono>
#include <string_view>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace msgr::session {

class Liveness {
 public:
  using Clock = std::chrono::steady_clock;

  void Heard(Clock::time_point now) { last_ = now; }

  // OK while the peer was heard from within `timeout`; else DEADLINE_EXCEEDED
  // "keepalive timeout: nothing from WHO for D" (D: how long it has been silent).
  absl::Status Check(Clock::time_point now, absl::Duration timeout, std::string_view who) const;

 private:
  Clock::time_point last_{};
};

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_LIVENESS_H_

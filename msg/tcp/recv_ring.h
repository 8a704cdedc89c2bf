// TcpRecvRing: a receive ring in plain process memory (64-byte aligned, zeroed) with an
// eventfd that the TCP reader signals after publishing records -- only while the ring's
// poller sleeps (SetPollerSleeping): an awake poller looks at every TCP ring on each pass,
// so a signal then would only cost the reader a write and the poller a read and an epoll
// round. Until a poller says it is awake, every batch is signalled (a consumer that never
// calls SetPollerSleeping just blocks on wait_fd()). Nor is a poller signalled from its own
// thread: one that drives the messenger (Messenger::driven) reads the socket inside its
// sleep, and looks at the ring when that returns. Created by the accepting messenger
// for a peer that asked for a ring; handed to Dispatcher::OnRingAttached.
// base()/bytes()/wait_fd() are immutable after creation; Signal() and SetPollerSleeping()
// are thread-safe.
#ifndef MSGR_MSG_TCP_RECV_RING_H_
#define MSGR_MSG_TCP_RECV_RING_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>

#include "absl/status/statusor.h"
#include "msg/messenger.h"

namespace msgr::tcp {

class TcpRecvRing : public RecvRing {
 public:
  // REQUIRES: IsValidRingSize(bytes).
  static absl::StatusOr<std::shared_ptr<TcpRecvRing>> Create(size_t bytes);
  ~TcpRecvRing() override;

  uint8_t* base() override { return base_; }
  size_t bytes() const override { return bytes_; }
  int wait_fd() const override { return efd_; }

  // The poller's side of the handshake with Signal(): after SetPollerSleeping(true) it
  // looks at the ring once more before it blocks, and either that look finds the
  // records published before a Signal() that saw it awake, or Signal() sees it asleep.
  void SetPollerSleeping(bool sleeping) override;

  // Called after publishing records: wakes the poller if it sleeps (or may), unless this
  // is the poller's own thread. Returns whether it wrote the eventfd.
  bool Signal();

 private:
  TcpRecvRing(uint8_t* base, size_t bytes, int efd) : base_(base), bytes_(bytes), efd_(efd) {}
  uint8_t* base_;
  size_t bytes_;
  int efd_;
  std::atomic<bool> poller_awake_{false};
  std::atomic<std::thread::id> sleeper_{};  // the thread that last said it sleeps
};

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_RECV_RING_H_

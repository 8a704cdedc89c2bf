// TcpRecvRing: a receive ring in plain process memory (64-byte aligned, zeroed) with an
// eventfd that the TCP reader signals after publishing records. Created by the accepting
// messenger for a peer that asked for a ring; handed to Dispatcher::OnRingAttached.
// base()/bytes()/wait_fd() are immutable after creation; Signal() is thread-safe.
#ifndef MSGR_MSG_TCP_RECV_RING_H_
#define MSGR_MSG_TCP_RECV_RING_H_

#include <cstddef>
#include <cstdint>
#include <memory>

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

  // Wakes pollers blocked on wait_fd().
  void Signal();

 private:
  TcpRecvRing(uint8_t* base, size_t bytes, int efd) : base_(base), bytes_(bytes), efd_(efd) {}
  uint8_t* base_;
  size_t bytes_;
  int efd_;
};

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_RECV_RING_H_

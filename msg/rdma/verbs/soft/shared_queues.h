// Soft provider: a CQ and a QP's posted receives in memory shared with the peer process, so
// that a peer's RDMA WRITE_WITH_IMM completes at this QP without a message: the initiator's
// posting thread takes the oldest posted receive, appends the receive completion and, if the
// CQ's channel is armed, writes the CQ's eventfd itself -- as an HCA's responder completes a
// WRITE_WITH_IMM with no host CPU. No socket, no service thread, no acknowledgement back.
//
// Producers (this process's QPs and service thread, and peers' posting threads) serialize on
// a robust process-shared mutex in the shared page: a completion counts only once `tail`
// has moved past it, so a process that dies holding the lock leaves nothing half-published,
// and the next holder recovers the lock (EOWNERDEAD). The CQ's consumer (one polling thread
// of the owner) takes no lock.
//
// Trust: a peer that connected a QP can write these pages, as it can write the regions it
// has keys to. The owner keeps its own copy of every size and treats indices that make no
// sense as a CQ overrun (the CQ fails), never as memory to read.
//
// Thread/process-safety: as above; SharedRq's owner-side calls are serialized by the owning
// QP (its mutex), the peer side by the peer QP's posting lock.
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_SHARED_QUEUES_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_SHARED_QUEUES_H_

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace soft {

// A shared mapping of a memfd; closes and unmaps on destruction.
class SharedPage {
 public:
  SharedPage() = default;
  SharedPage(SharedPage&& o) noexcept;
  SharedPage& operator=(SharedPage&& o) noexcept;
  ~SharedPage();
  // A new zeroed memfd of `bytes` (owner) / a peer's memfd, which must hold `min_bytes`
  // (takes ownership of `fd`).
  static absl::StatusOr<SharedPage> Create(const char* name, size_t bytes);
  static absl::StatusOr<SharedPage> Attach(int fd, size_t min_bytes);
  uint8_t* data() const { return base_; }
  size_t bytes() const { return bytes_; }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  uint8_t* base_ = nullptr;
  size_t bytes_ = 0;
};

// A completion queue: owner creates it (with its eventfd), peers attach with both fds.
class SharedCq {
 public:
  static absl::StatusOr<SharedCq> Create(size_t capacity);
  // Peer: takes ownership of both fds.
  static absl::StatusOr<SharedCq> Attach(int mem_fd, int event_fd);
  SharedCq(SharedCq&&) noexcept;
  SharedCq& operator=(SharedCq&&) noexcept;
  ~SharedCq();

  // Any producer: appends `c` (a full queue is an overrun: the CQ fails) and writes the
  // eventfd if the channel was armed.
  void Push(const Completion& c);
  // The owner's consumer: up to `max` completions; -1 once the CQ has failed.
  int Poll(Completion* out, int max);
  // The owner's consumer: the next completion after this call writes the eventfd (at once
  // if one is queued already).
  void Arm();
  void ConsumeEvents();
  int mem_fd() const { return page_.fd(); }
  int event_fd() const { return efd_; }
  // Tests: takes the queue's lock and keeps it, as a producer that dies holding it.
  void AbandonLockForTest();

  struct Header;  // in the shared page

 private:
  SharedCq(SharedPage page, int efd, size_t capacity) noexcept;
  Header* header() const;
  Completion* slots() const;
  // REQUIRES the header's lock. Returns whether to write the eventfd.
  bool PushHeld(const Completion& c);
  void Wake();

  SharedPage page_;
  int efd_ = -1;
  size_t capacity_ = 0;
  bool overrun_logged_ = false;
  friend class SharedRq;
};

// A QP's posted receives, in order: the owner posts (wr_id and a slot index for the
// scatter list it keeps privately) and takes them for SENDs; the peer takes them for
// WRITE_WITH_IMM. Closed (for good) when the QP enters ERROR or is destroyed.
class SharedRq {
 public:
  static absl::StatusOr<SharedRq> Create(size_t capacity);
  static absl::StatusOr<SharedRq> Attach(int mem_fd);  // takes ownership
  SharedRq(SharedRq&&) noexcept = default;
  SharedRq& operator=(SharedRq&&) noexcept = default;

  int mem_fd() const { return page_.fd(); }
  size_t capacity() const { return capacity_; }

  // Owner. Post: the slot index the receive took, or -1 if the queue is full or closed.
  int Post(uint64_t wr_id);
  // Owner: the oldest receive (false if none or closed).
  bool Take(uint64_t* wr_id, size_t* slot);
  // Owner: closes the queue and returns the receives still posted, oldest first.
  std::vector<uint64_t> Close();

  // Peer: a WRITE_WITH_IMM of `byte_len` bytes carrying `imm` arrived for QP `qp_num`:
  // takes the oldest receive and completes it into `cq`, under this queue's lock (so a
  // concurrent Close() flushes after it, never before). kSuccess, kRnrRetryExceeded (no
  // receive posted) or kRetryExceeded (the QP is in error or gone).
  WcStatus DeliverWriteImm(SharedCq& cq, uint32_t qp_num, uint32_t byte_len, uint32_t imm);

  struct Header;

 private:
  SharedRq(SharedPage page, size_t capacity) noexcept;
  Header* header() const;
  uint64_t* slots() const;

  SharedPage page_;
  size_t capacity_ = 0;
};

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_SHARED_QUEUES_H_

// RdmaRecvRing: the OSD-side receive ring of one RDMA session. The ring is a registered
// region (kLocalWrite | kRemoteWrite) that the client fills with one-sided RDMA WRITEs; the
// OSD's pollers read records straight out of it (RingConsumer), so no CPU on this side ever
// copies a payload. The eventfd is signalled when the client rings the doorbell (the poller
// was asleep) or the session changes.
//
// Thread-safety: base()/bytes()/wait_fd() are immutable. SetPollerSleeping is called by the
// poller thread; it forwards to the owning connection, which publishes the poller's state
// into the client's control region (see RdmaConnection::SetPeerSleeping). The connection
// may be gone (weak reference): then it does nothing.
#ifndef MSGR_MSG_RDMA_RDMA_RECV_RING_H_
#define MSGR_MSG_RDMA_RDMA_RECV_RING_H_

#include <atomic>
#include <functional>
#include <memory>

#include "absl/status/statusor.h"
#include "msg/messenger.h"
#include "msg/rdma/registered_budget.h"
#include "msg/rdma/transport.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma {

class RdmaRecvRing : public RecvRing {
 public:
  // Allocates and registers a ring of `bytes` (REQUIRES: IsValidRingSize(bytes)), charged
  // to `budget` until the ring is destroyed (`peer` names it in a refusal). Its first
  // record has seq `first_seq` (a resized ring goes on with its session's seqs).
  static absl::StatusOr<std::shared_ptr<RdmaRecvRing>> Create(std::shared_ptr<DeviceContext> ctx,
                                                              size_t bytes,
                                                              RegisteredBudget* budget,
                                                              const std::string& peer,
                                                              uint64_t first_seq = 1);
  ~RdmaRecvRing() override;

  uint8_t* base() override { return mr_->data(); }
  size_t bytes() const override { return bytes_; }
  int wait_fd() const override { return event_fd_; }
  void SetPollerSleeping(bool sleeping) override;
  bool producer_signals() const override { return false; }  // one-sided WRITEs
  uint64_t first_seq() const override { return first_seq_; }
  RingNotifier* notifier() const override { return notifier_.load(std::memory_order_acquire); }
  bool announced() const override { return announced_.load(std::memory_order_acquire); }
  // The session's receives go to `n` (set at setup, before the ring reaches a poller);
  // `announced`: its client writes every record's seq WITH_IMM.
  void SetNotifier(RingNotifier* n, bool announced) {
    announced_.store(announced, std::memory_order_release);
    notifier_.store(n, std::memory_order_release);
  }

  const verbs::MemoryRegion& region() const { return *mr_; }
  // Wakes the poller (doorbell received, session event).
  void Signal();
  // Revokes the rkey (the session is over); memory stays mapped while this object lives.
  void Revoke();
  // New keys for the same ring (the session resumed on a new QP): the old rkey is dead,
  // the records in the ring stay. REQUIRES: no concurrent region() readers.
  absl::Status Reregister() { return mr_->Reregister(); }
  // Who to tell about the poller sleeping (set by the owning connection).
  void set_sleep_hook(std::function<void(bool)> hook);

 private:
  RdmaRecvRing(std::shared_ptr<DeviceContext> ctx, size_t bytes, uint64_t first_seq)
      : ctx_(std::move(ctx)), bytes_(bytes), first_seq_(first_seq) {}
  std::shared_ptr<DeviceContext> ctx_;  // outlives mr_
  size_t bytes_;
  uint64_t first_seq_;
  std::atomic<RingNotifier*> notifier_{nullptr};
  std::atomic<bool> announced_{false};
  ChargedRegion mr_;
  int event_fd_ = -1;
  absl::Mutex mu_;
  std::function<void(bool)> sleep_hook_ ABSL_GUARDED_BY(mu_);
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_RECV_RING_H_

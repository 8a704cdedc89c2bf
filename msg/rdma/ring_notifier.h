// RdmaRingNotifier: one OSD poller's completion source (msg/messenger.h RingNotifier;
// msg/PROTOCOL.md "Record notifications"). It owns a completion queue that takes the
// *receive* completions of every ring session placed on it (their QPs' recv_cq; send
// completions stay on each transport's own CQ, polled by the completion thread). A
// client that agreed to it at setup writes each record's seq word WITH_IMM, so the
// record's arrival is one completion here: Poll() re-posts that receive at once and
// reports the session's ring, and the poller drains that ring without looking at any
// other. Every other receive (a message, a credit wake-up request, a flushed receive of a
// faulted QP) is handed to its session as the completion thread would (Link::
// OnCompletions), on the poller's thread.
//
// The client may have at most `record_imm_credits` record imms unaccounted for. It learns
// which came back from a count the OSD writes into its control region next to the ring
// credit (kCtrlImmOffset): the receives Poll() re-posted for that link. The OSD writes the
// count with every credit, and at once when half the credits are waiting to be returned.
//
// Thread-safety: Poll/Arm/wait_fd on the owning poller's thread; Attach/SetLink/Reserve
// from any thread (a handshake). Lock order: this mutex is never held while a session's is
// taken (deliveries run after it is released).
#ifndef MSGR_MSG_RDMA_RING_NOTIFIER_H_
#define MSGR_MSG_RDMA_RING_NOTIFIER_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "msg/messenger.h"
#include "msg/rdma/transport.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma {

class Link;
class RdmaConnection;

// What one link of a session shares with its notifier: the record-imm receives re-posted
// (read by the connection when it writes the count to the client) and which of them were
// last written.
struct ImmCount {
  explicit ImmCount(uint32_t credits) : credits(credits) {}
  const uint32_t credits;  // the client's record-imm credits on this link
  std::atomic<uint64_t> reposted{0};
  std::atomic<uint64_t> written{0};
  // At least `parts` quarters of the credits wait to be returned: the count is worth
  // writing (with a ring credit from 2/4, on its own from 3/4; below, the client still
  // has half its credits and the writes would cost more than they return).
  bool lagging(uint32_t parts) const {
    return reposted.load(std::memory_order_relaxed) - written.load(std::memory_order_relaxed) >=
           std::max<uint64_t>(1, uint64_t{credits} * parts / 4);
  }
};

class RdmaRingNotifier : public RingNotifier,
                         public std::enable_shared_from_this<RdmaRingNotifier> {
 public:
  // A CQ of `depth` entries; sessions are admitted while each can have
  // `recv_per_session` receives outstanding twice over (a resumed session's old QP
  // flushes its receives here while the new one posts its own).
  static absl::StatusOr<std::shared_ptr<RdmaRingNotifier>> Create(
      std::shared_ptr<DeviceContext> ctx, int index, int depth, uint32_t recv_per_session);
  ~RdmaRingNotifier() override;

  int index() const override { return index_; }
  size_t Poll(RecvRing** out, size_t max) override;
  void Arm() override;
  int wait_fd() const override { return cq_->event_fd(); }
  void ClearWait() override { cq_->ConsumeEvents(); }

  verbs::CompletionQueue* cq() const { return cq_.get(); }
  // A session asks for a place; false when the CQ is full (it keeps its own CQ). The
  // place is given back when the returned token is destroyed.
  std::shared_ptr<void> Reserve();
  size_t sessions() const { return sessions_.load(std::memory_order_relaxed); }
  // QP `qp_num` of `tp` is about to connect: its receive completions come here. `ring`:
  // the session's ring if the client announces its records (else null: every receive
  // goes to the link). Until SetLink, receives other than record imms wait here.
  void Attach(uint32_t qp_num, std::weak_ptr<Transport> tp, RecvRing* ring,
              std::shared_ptr<ImmCount> count);
  // The link that owns QP `qp_num` from now on (its receives are delivered to it, those
  // that waited first, on the poller's thread).
  void SetLink(uint32_t qp_num, std::weak_ptr<Link> link);

  uint64_t record_imms() const { return record_imms_.load(std::memory_order_relaxed); }

 private:
  RdmaRingNotifier(std::shared_ptr<DeviceContext> ctx, int index, size_t max_sessions)
      : ctx_(std::move(ctx)), index_(index), max_sessions_(max_sessions) {}
  struct Entry {
    std::weak_ptr<Transport> tp;
    std::weak_ptr<Link> link;
    bool has_link = false;
    RecvRing* ring = nullptr;  // announced records (null: none)
    std::shared_ptr<ImmCount> count;
    std::vector<verbs::Completion> waiting;  // until SetLink
  };
  // REQUIRES mu_: drops entries whose transport is gone.
  void PruneLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::shared_ptr<DeviceContext> ctx_;
  const int index_;
  const size_t max_sessions_;
  std::unique_ptr<verbs::CompletionQueue> cq_;
  std::atomic<size_t> sessions_{0};
  std::atomic<uint64_t> record_imms_{0};
  std::atomic<bool> flush_waiting_{false};  // SetLink left receives to deliver
  bool failed_ = false;  // poller thread: the CQ overran (logged once)
  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Entry> entries_ ABSL_GUARDED_BY(mu_);
  // Poller thread: one Poll's deliveries, kept to reuse their capacity.
  struct Delivery {
    std::shared_ptr<Link> link;
    std::vector<verbs::Completion> wc;
  };
  std::vector<Delivery> deliveries_;
  size_t used_deliveries_ = 0;
  verbs::Completion wc_[32];  // one Poll's completions (not constructed per call)
  std::vector<std::shared_ptr<Link>> count_writes_;  // links whose count lags
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RING_NOTIFIER_H_

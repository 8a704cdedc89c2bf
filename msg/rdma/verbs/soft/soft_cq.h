// Soft provider: completion queue with an eventfd as its completion channel.
//
// Thread-safety: Push() from any thread or process (posters, the device service thread, a
// peer's posting thread); Poll(), RequestNotify() and ConsumeEvents() from one thread at a
// time (the consumer).
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_SOFT_CQ_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_SOFT_CQ_H_

#include <memory>

#include "absl/status/statusor.h"
#include "msg/rdma/verbs/device.h"
#include "msg/rdma/verbs/soft/shared_queues.h"

namespace msgr {
namespace verbs {
namespace soft {

// The state of a CQ, in shared memory (shared_queues.h): a peer's WRITE_WITH_IMM completes
// into it directly. QPs keep it alive while they may still complete into it.
class CqCore {
 public:
  static absl::StatusOr<std::shared_ptr<CqCore>> Create(int depth);

  // Appends a completion; wakes an armed channel. A full CQ is an overrun: the CQ fails.
  void Push(const Completion& c) { q_.Push(c); }
  int Poll(Completion* out, int max) { return q_.Poll(out, max); }
  int event_fd() const { return q_.event_fd(); }
  void Arm() { q_.Arm(); }
  void ConsumeEvents() { q_.ConsumeEvents(); }
  // What a peer maps to complete into this CQ (handed over when its QP connects).
  int mem_fd() const { return q_.mem_fd(); }

 private:
  explicit CqCore(SharedCq q) : q_(std::move(q)) {}
  SharedCq q_;
};

class SoftCq : public CompletionQueue {
 public:
  explicit SoftCq(std::shared_ptr<CqCore> core, int depth) : core_(std::move(core)) {
    depth_ = depth;
  }
  int Poll(Completion* out, int max) override { return core_->Poll(out, max); }
  int event_fd() const override { return core_->event_fd(); }
  absl::Status RequestNotify() override {
    core_->Arm();
    return absl::OkStatus();
  }
  void ConsumeEvents() override { core_->ConsumeEvents(); }

  const std::shared_ptr<CqCore>& core() const { return core_; }

 private:
  std::shared_ptr<CqCore> core_;
};

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_SOFT_CQ_H_

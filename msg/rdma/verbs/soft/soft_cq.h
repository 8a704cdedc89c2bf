// Soft provider: completion queue with an eventfd as its completion channel.
//
// Thread-safety: Push() from any thread (posters, the device service thread); Poll() from one
// thread at a time; RequestNotify()/ConsumeEvents() from the polling thread.
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_SOFT_CQ_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_SOFT_CQ_H_

#include <atomic>
#include <deque>
#include <memory>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace soft {

// The shared state of a CQ; QPs keep it alive while they may still complete into it.
class CqCore {
 public:
  static absl::StatusOr<std::shared_ptr<CqCore>> Create(int depth);
  ~CqCore();

  // Appends a completion; wakes an armed channel. A full CQ is an overrun: the CQ fails.
  void Push(const Completion& c);
  int Poll(Completion* out, int max);
  int event_fd() const { return efd_; }
  void Arm();
  void ConsumeEvents();

 private:
  CqCore(int efd, size_t capacity) : efd_(efd), capacity_(capacity) {}

  const int efd_;
  const size_t capacity_;
  std::atomic<size_t> size_{0};  // Lets an idle Poll() skip the lock.
  absl::Mutex mu_;
  std::deque<Completion> q_ ABSL_GUARDED_BY(mu_);
  bool armed_ ABSL_GUARDED_BY(mu_) = false;
  bool overrun_ ABSL_GUARDED_BY(mu_) = false;
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

#include "msg/rdma/verbs/soft/soft_cq.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>

#include "msg/base/errno_status.h"

namespace msgr {
namespace verbs {
namespace soft {

absl::StatusOr<std::shared_ptr<CqCore>> CqCore::Create(int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("soft: CQ depth must be positive");
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return ErrnoStatus(errno, "soft: eventfd");
  return std::shared_ptr<CqCore>(new CqCore(efd, static_cast<size_t>(depth)));
}

CqCore::~CqCore() { ::close(efd_); }

void CqCore::Push(const Completion& c) {
  bool wake = false;
  {
    absl::MutexLock l(&mu_);
    if (q_.size() >= capacity_) {
      if (!overrun_) {
        std::fprintf(stderr, "soft: CQ overrun (depth %zu): completion queue failed\n",
                     capacity_);
      }
      overrun_ = true;
      wake = armed_;
      armed_ = false;
    } else {
      q_.push_back(c);
      size_.store(q_.size(), std::memory_order_release);
      wake = armed_;
      armed_ = false;
    }
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t w = ::write(efd_, &one, sizeof(one));
    (void)w;  // EAGAIN only if the counter is saturated: already readable.
  }
}

int CqCore::Poll(Completion* out, int max) {
  if (size_.load(std::memory_order_acquire) == 0) {
    return 0;
  }
  absl::MutexLock l(&mu_);
  if (overrun_) return -1;
  int n = 0;
  while (n < max && !q_.empty()) {
    out[n++] = q_.front();
    q_.pop_front();
  }
  size_.store(q_.size(), std::memory_order_release);
  return n;
}

void CqCore::Arm() {
  bool wake = false;
  {
    absl::MutexLock l(&mu_);
    armed_ = true;
    // ibv_req_notify_cq only fires for completions arriving after arming; waking early when
    // entries are already queued is allowed and saves a lost-wakeup window.
    if (!q_.empty() || overrun_) {
      armed_ = false;
      wake = true;
    }
  }
  if (wake) {
    uint64_t one = 1;
    ssize_t w = ::write(efd_, &one, sizeof(one));
    (void)w;
  }
}

void CqCore::ConsumeEvents() {
  uint64_t v;
  while (::read(efd_, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) {
  }
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

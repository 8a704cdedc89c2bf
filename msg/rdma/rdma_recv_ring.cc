#include "msg/rdma/rdma_recv_ring.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "msg/rdma/side_channel.h"
#include "msg/ring/ring.h"

namespace msgr::rdma {

absl::StatusOr<std::shared_ptr<RdmaRecvRing>> RdmaRecvRing::Create(
    std::shared_ptr<DeviceContext> ctx, size_t bytes, RegisteredBudget* budget,
    const std::string& peer, uint64_t first_seq) {
  if (!IsValidRingSize(bytes)) {
    return absl::InvalidArgumentError("ring_bytes must be a power of two >= 64 KiB");
  }
  std::shared_ptr<RdmaRecvRing> r(new RdmaRecvRing(std::move(ctx), bytes, first_seq));
  auto mr = AllocCharged(*budget, *r->ctx_->pd, bytes, verbs::kLocalWrite | verbs::kRemoteWrite,
                         absl::StrCat("a ", bytes >> 10, " KiB receive ring for ", peer));
  if (!mr.ok()) return mr.status();
  r->mr_ = std::move(*mr);
  r->event_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (r->event_fd_ < 0) return ErrnoStatus(errno, "eventfd");
  return r;
}

RdmaRecvRing::~RdmaRecvRing() {
  if (event_fd_ >= 0) close(event_fd_);
  mr_.reset();
}

void RdmaRecvRing::SetPollerSleeping(bool sleeping) {
  std::function<void(bool)> hook;
  {
    absl::MutexLock l(&mu_);
    hook = sleep_hook_;
  }
  if (hook) hook(sleeping);
}

void RdmaRecvRing::Signal() {
  const uint64_t one = 1;
  (void)!write(event_fd_, &one, sizeof(one));
}

void RdmaRecvRing::Revoke() { (void)mr_->Deregister(); }

void RdmaRecvRing::set_sleep_hook(std::function<void(bool)> hook) {
  absl::MutexLock l(&mu_);
  sleep_hook_ = std::move(hook);
}

}  // namespace msgr::rdma

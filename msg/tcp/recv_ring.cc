#include "msg/tcp/recv_ring.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "msg/ring/ring.h"
#include "msg/base/errno_status.h"
#include "msg/tcp/error.h"

namespace msgr::tcp {

absl::StatusOr<std::shared_ptr<TcpRecvRing>> TcpRecvRing::Create(size_t bytes) {
  if (!IsValidRingSize(bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("ring_bytes ", bytes, " must be a power of two and at least ", kMinRingBytes));
  }
  // Anonymous pages: zeroed by the kernel when first touched, so accepting a session costs
  // no 32 MiB memset (which made 100 clients' 300 sessions take seconds to accept), and
  // page-aligned, so large records' payloads start kPayloadAlign-aligned (O_DIRECT-ready).
  static_assert(kPayloadAlign <= 4096, "mmap gives page alignment");
  void* mem = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mem == MAP_FAILED) {
    return ErrnoStatus(errno, absl::StrCat("mmap of a ", bytes, "-byte ring"));
  }
  auto* base = static_cast<uint8_t*>(mem);
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) {
    const int err = errno;
    munmap(base, bytes);
    return ErrnoStatus(err, "eventfd for a receive ring");
  }
  return std::shared_ptr<TcpRecvRing>(new TcpRecvRing(base, bytes, efd));
}

TcpRecvRing::~TcpRecvRing() {
  close(efd_);
  munmap(base_, bytes_);
}

void TcpRecvRing::SetPollerSleeping(bool sleeping) {
  if (sleeping) sleeper_.store(std::this_thread::get_id(), std::memory_order_relaxed);
  poller_awake_.store(!sleeping, std::memory_order_relaxed);
  // Going to sleep: orders the store before the poller's last look at the ring (Dekker,
  // with Signal's fence). Waking needs none: a signal it saves comes before a later
  // SetPollerSleeping(true), whose last look finds the records.
  if (sleeping) std::atomic_thread_fence(std::memory_order_seq_cst);
}

bool TcpRecvRing::Signal() {
  // Orders the caller's records before the load: if it reads "awake", the poller's look
  // after its SetPollerSleeping(true) is later and finds them.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (poller_awake_.load(std::memory_order_relaxed)) return false;
  // The poller itself, reading the socket inside its sleep (a driven messenger's WaitFor):
  // it looks at its rings when that returns.
  if (sleeper_.load(std::memory_order_relaxed) == std::this_thread::get_id()) return false;
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated: the poller is woken anyway.
  [[maybe_unused]] ssize_t n = write(efd_, &one, sizeof(one));
  return true;
}

}  // namespace msgr::tcp

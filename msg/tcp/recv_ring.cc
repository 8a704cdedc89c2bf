#include "msg/tcp/recv_ring.h"

#include <sys/eventfd.h>
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
  // kPayloadAlign: large records' payloads then start 4 KiB-aligned (O_DIRECT-ready).
  auto* base = static_cast<uint8_t*>(std::aligned_alloc(kPayloadAlign, bytes));
  if (base == nullptr) {
    return absl::ResourceExhaustedError(absl::StrCat("cannot allocate a ", bytes, "-byte ring"));
  }
  std::memset(base, 0, bytes);
  const int efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (efd < 0) {
    const int err = errno;
    std::free(base);
    return ErrnoStatus(err, "eventfd for a receive ring");
  }
  return std::shared_ptr<TcpRecvRing>(new TcpRecvRing(base, bytes, efd));
}

TcpRecvRing::~TcpRecvRing() {
  close(efd_);
  std::free(base_);
}

void TcpRecvRing::Signal() {
  const uint64_t one = 1;
  // EAGAIN means the counter is saturated: the poller is awake anyway.
  [[maybe_unused]] ssize_t n = write(efd_, &one, sizeof(one));
}

}  // namespace msgr::tcp

// Soft provider: the control messages two soft devices exchange over an abstract-namespace
// Unix stream socket, and the socket/memfd helpers behind them.
//
// Only control travels here (connect handshake, region and queue fds via SCM_RIGHTS, SEND
// payloads, ACK/NAK; WRITE_WITH_IMM notifications only while a SEND awaits its ACK): RDMA
// WRITE data never does. Every message is a
// fixed 32-byte WireHeader, optionally followed by `payload_len` bytes and carrying one fd.
//
// Thread-safety: the functions are reentrant; a socket direction must have one writer at a
// time (the caller serializes).
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_WIRE_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_WIRE_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace msgr {
namespace verbs {
namespace soft {

enum class MsgType : uint32_t {
  kHello = 1,     // a = target qp_num, b = source qp_num.
  kHelloOk,       // a = target pd id; carries the target device's region-table fd.
  kHelloErr,      // status = reason (1: no such QP).
  kSend,          // seq, a = payload_len, b = imm, c = 1 if has imm. Payload follows.
  kWriteImm,      // seq, a = byte_len written, b = imm.
  kAck,           // seq.
  kNak,           // seq, status = WcStatus for the initiator's WR.
  kRegionReq,     // a = rkey.
  kRegionRep,     // a = rkey, status = 0 ok, c = region uid; carries the region memfd.
  kAccessError,   // The initiator hit a remote access error: target QP goes to error.
  kInbox,         // After kHelloOk, three of them: a = 1 the target QP's receive queue
                  // memfd, 2 its receive CQ's memfd, 3 that CQ's eventfd (shared_queues.h).
};

struct WireHeader {
  uint32_t type = 0;
  uint32_t status = 0;
  uint64_t seq = 0;
  uint32_t a = 0;
  uint32_t b = 0;
  uint64_t c = 0;
};
static_assert(sizeof(WireHeader) == 32, "wire header is 32 bytes");

// Sends `hdr` then the `n` iovecs (may be 0), passing `pass_fd` if >= 0. Blocks until all
// is written. Never raises SIGPIPE.
absl::Status SendMessage(int sock, const WireHeader& hdr, const struct iovec* iov = nullptr,
                         int n = 0, int pass_fd = -1);
// Reads exactly one header; a received fd goes to *fd_out (else -1). EOF -> Unavailable.
absl::Status RecvHeader(int sock, WireHeader* hdr, int* fd_out);
// Reads exactly `len` bytes into `buf` (or discards them if buf is null).
absl::Status RecvExact(int sock, void* buf, size_t len);

// Abstract-namespace Unix stream sockets: `name` is the locator without the leading NUL.
absl::StatusOr<int> ListenAbstract(absl::string_view name);
absl::StatusOr<int> ConnectAbstract(absl::string_view name);

// Where a soft device can be reached from: this boot of this kernel and this network
// namespace (abstract Unix sockets are per namespace), e.g. "3f2a9c1d-4026531840". A
// device's locator is "msgr-soft.<scope>.<pid>.<n>.<random>"; two devices can talk only if
// their scopes are equal, i.e. between processes of one host.
std::string HostScope();
// The scope part of a locator made as above ("" if it has none: an older peer).
std::string LocatorScope(absl::string_view locator);

// A fresh memfd of `bytes` bytes (MFD_CLOEXEC; MFD_HUGETLB if `huge` and possible).
absl::StatusOr<int> CreateMemfd(const char* name, size_t bytes, bool huge);

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_WIRE_H_

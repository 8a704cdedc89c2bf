// The verbs-shaped device layer: the one contract the RDMA transport is written against.
//
// It is a narrow, C++ view of InfiniBand verbs (RC only): a Device (an HCA port), a
// ProtectionDomain, MemoryRegions (registered memory with lkey/rkey and access flags), a
// CompletionQueue (poll, or sleep on an fd until the next completion) and reliable-connected
// QueuePairs (RESET -> INIT -> RTR -> RTS, error state, SEND / RDMA WRITE / WRITE_WITH_IMM /
// RDMA READ, chains of work requests, receives). Two providers implement it:
//   * "ibverbs" (msg/rdma/verbs/ibverbs/): rdma-core, any real or Soft-RoCE device;
//   * "soft"    (msg/rdma/verbs/soft/): a software HCA in user space for processes on one host
//     (registered memory a peer may write lives in shared memory, so an RDMA WRITE is a memcpy
//     by the initiator straight into the target's region).
// Code above this layer never knows which one it runs on: both give the same completion
// statuses for the same mistakes (see WcStatus).
//
// Connecting two QPs: each side creates a QP (it starts in INIT), sends its
// `local_endpoint().Serialize()` to the peer over any side channel (TCP, gRPC, a pipe), and
// calls `Connect(peer_endpoint)` (= ModifyToRtr + ModifyToRts). Post receives before the peer
// may send: a SEND or WRITE_WITH_IMM that finds no posted receive is fatal for the connection
// (both providers behave as RC with rnr_retry exhausted: kRnrRetryExceeded on the sender).
//
// Errors: setup calls return absl::Status / absl::StatusOr. A data-path failure does not fail
// the post call: it arrives as a Completion whose status is not kSuccess, the QP moves to the
// error state, and every WR still outstanding or posted later completes with kWrFlushError.
//
// Lifetime: every object is RAII; destroying it releases the resource (Close()/Deregister()
// release it earlier and are idempotent). Children keep their parents' resources alive
// internally, so destruction order among the unique_ptrs handed out here cannot break the
// verbs rule that children are destroyed before their parents; still, destroying QPs before
// their CQs and regions before their PD is the expected order.
//
// Thread-safety: a Device, ProtectionDomain may be used from any thread. On a QueuePair,
// PostSend and PostRecv may run concurrently with each other and with Poll on its CQs (one
// thread posting sends, another posting receives, a third polling is the intended shape);
// several threads posting on the same QP concurrently is allowed but their WRs interleave
// in an unspecified order. CompletionQueue::Poll must be called by one thread at a time.
// Setup and state changes (ModifyTo*, Close) must not race with posts on the same QP.
#ifndef MSGR_MSG_RDMA_VERBS_DEVICE_H_
#define MSGR_MSG_RDMA_VERBS_DEVICE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace msgr {
namespace verbs {

class CompletionQueue;

// ---------------------------------------------------------------------------------------
// Memory access. A region always allows local reads (gathering SEND/WRITE sources).
enum Access : uint32_t {
  kLocalWrite = 1u << 0,   // HCA may write it locally (receive buffers, READ targets).
  kRemoteWrite = 1u << 1,  // A peer may RDMA WRITE into it (requires kLocalWrite).
  kRemoteRead = 1u << 2,   // A peer may RDMA READ from it.
};
constexpr uint32_t kAllAccess = kLocalWrite | kRemoteWrite | kRemoteRead;

// ---------------------------------------------------------------------------------------
// Work requests.
enum class WrOpcode : uint8_t {
  kSend,
  kSendWithImm,
  kRdmaWrite,
  kRdmaWriteWithImm,
  kRdmaRead,
};

enum WrFlags : uint32_t {
  kSignaled = 1u << 0,  // Generate a completion on success (errors always complete).
  kInline = 1u << 1,    // Copy the payload at post time (total <= max_inline_data); the
                        // buffers may be reused when PostSend returns and lkey is ignored.
};

// One scatter/gather element: `length` bytes at `addr` inside the region with key `lkey`.
struct Sge {
  uint64_t addr = 0;
  uint32_t length = 0;
  uint32_t lkey = 0;
};

// A send-queue work request. The SGE array must stay valid until PostSend returns; the
// memory it points to (unless kInline) must stay valid and unchanged until the WR completes
// (or until a later signalled WR on the same QP completes).
struct SendWr {
  uint64_t wr_id = 0;
  WrOpcode opcode = WrOpcode::kSend;
  uint32_t flags = 0;  // WrFlags
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
  uint32_t imm_data = 0;     // Host byte order; for k*WithImm.
  uint64_t remote_addr = 0;  // Peer virtual address (region addr() + offset); RDMA ops only.
  uint32_t rkey = 0;         // Peer region rkey; RDMA ops only.
};

// A receive work request: where an incoming SEND lands. WRITE_WITH_IMM consumes one too
// (its SGEs are not written; num_sge may be 0).
struct RecvWr {
  uint64_t wr_id = 0;
  const Sge* sg_list = nullptr;
  uint32_t num_sge = 0;
};

// ---------------------------------------------------------------------------------------
// Completions. Mirrors ibv_wc_status for the cases that matter to a transport.
enum class WcStatus : uint8_t {
  kSuccess,
  kLocalLengthError,       // Receive buffer too small for the incoming SEND.
  kLocalQpOperationError,  // Malformed WR (e.g. too many SGEs, inline too large).
  kLocalProtectionError,   // An SGE is outside its lkey's region or lacks kLocalWrite.
  kWrFlushError,           // The QP was in (or entered) the error state before this WR ran.
  kRemoteInvalidRequest,   // Peer rejected the request (e.g. its receive buffer too small).
  kRemoteAccessError,      // Bad rkey, range outside the region, access not allowed, or the
                           // region was deregistered.
  kRemoteOperationError,
  kRetryExceeded,          // Transport retries exhausted: the peer is gone.
  kRnrRetryExceeded,       // SEND / WRITE_WITH_IMM found no posted receive at the peer.
  kGeneralError,
};
const char* WcStatusName(WcStatus status);

enum class WcOpcode : uint8_t {
  kSend,
  kRdmaWrite,
  kRdmaRead,
  kRecv,             // An incoming SEND (with or without immediate).
  kRecvRdmaWithImm,  // An incoming WRITE_WITH_IMM (no data in the receive buffer).
};
const char* WcOpcodeName(WcOpcode opcode);

struct Completion {
  uint64_t wr_id = 0;
  WcStatus status = WcStatus::kGeneralError;
  // Valid when status == kSuccess (real HCAs leave it undefined on error).
  WcOpcode opcode = WcOpcode::kSend;
  uint32_t byte_len = 0;  // Receives: bytes received (WRITE_WITH_IMM: bytes written).
  uint32_t imm_data = 0;  // Host byte order; valid when has_imm.
  bool has_imm = false;
  uint32_t qp_num = 0;
  uint32_t vendor_err = 0;
};

// ---------------------------------------------------------------------------------------
// Asynchronous events (ibv_get_async_event): what happened to a QP or the port outside any
// work request. The one a transport must act on is kQpAccessError: the *responder* of an
// RDMA access its memory protection refused (bad rkey, range outside the region, access not
// allowed) learns it this way -- the requester sees kRemoteAccessError on its WR, and both
// QPs are in ERROR. Flushed receives alone cannot tell that from a peer that merely died.
enum class AsyncEventType : uint8_t {
  kQpFatal,         // IBV_EVENT_QP_FATAL: the QP failed in a way no WR reports.
  kQpRequestError,  // IBV_EVENT_QP_REQ_ERR: the peer sent an invalid request.
  kQpAccessError,   // IBV_EVENT_QP_ACCESS_ERR: the peer broke our memory protection.
  kPortActive,
  kPortError,
  kDeviceFatal,
  kOther,
};
const char* AsyncEventName(AsyncEventType type);

struct AsyncEvent {
  AsyncEventType type = AsyncEventType::kOther;
  uint32_t qp_num = 0;  // QP events only.
};

// ---------------------------------------------------------------------------------------
// Devices, ports and endpoints.
using Gid = std::array<uint8_t, 16>;

struct DeviceAttr {
  std::string name;      // "soft", "mlx5_0", "rxe0", ...
  std::string provider;  // "soft" or "ibverbs"
  uint64_t max_mr_size = 0;
  uint32_t max_qp = 0;
  uint32_t max_qp_wr = 0;
  uint32_t max_sge = 0;
  uint32_t max_cqe = 0;
  uint32_t max_mr = 0;
};

struct PortAttr {
  uint8_t port_num = 1;
  uint16_t lid = 0;
  uint32_t active_mtu = 1024;  // Bytes: 256, 512, 1024, 2048 or 4096.
  bool ethernet = false;       // RoCE (GID-routed) rather than InfiniBand (LID-routed).
  int gid_index = 0;
  Gid gid{};
};

struct DeviceOptions {
  uint8_t port_num = 1;
  // GID table index (RoCE). -1: env MSGR_RDMA_GID_INDEX if set, else the first RoCEv2
  // IPv4-mapped GID, else the first routable RoCEv2 GID, else a link-local one, else the
  // first entry; a forced index must name a populated entry (ibverbs/gid_select.h has
  // the rules). Ignored by "soft".
  int gid_index = -1;
  // "soft" only, for tests: QP asynchronous events are queued this long after the
  // completions they explain (as on HCAs that raise them from a kernel work queue).
  // Zero (default): the event comes first.
  absl::Duration soft_async_event_delay = absl::ZeroDuration();
};

// What the peer needs to connect its QP to ours; exchanged by the caller over a side channel.
struct QpEndpoint {
  uint32_t qp_num = 0;
  uint32_t psn = 0;  // 24-bit initial packet sequence number.
  Gid gid{};
  uint16_t lid = 0;
  uint32_t mtu = 1024;  // Bytes; the path MTU is the smaller of both sides.
  std::string locator;  // Soft provider: where its device listens. Empty for ibverbs.

  // A compact little-endian byte string (stable across processes of this build).
  std::string Serialize() const;
  static absl::StatusOr<QpEndpoint> Parse(absl::string_view bytes);
  std::string DebugString() const;
};

// ---------------------------------------------------------------------------------------
// Registered memory. Accessors are cheap and safe from any thread.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  void* addr() const { return addr_; }
  uint8_t* data() const { return static_cast<uint8_t*>(addr_); }
  size_t length() const { return length_; }
  uint32_t lkey() const { return lkey_; }
  uint32_t rkey() const { return rkey_; }
  uint32_t access() const { return access_; }
  // True when the memory was allocated by AllocRegion (and is freed with this object).
  bool owns_memory() const { return owns_memory_; }

  // An SGE covering [offset, offset + len) of this region.
  Sge Slice(size_t offset, uint32_t len) const {
    return Sge{reinterpret_cast<uint64_t>(addr_) + offset, len, lkey_};
  }

  // Revokes lkey and rkey: later accesses through them fail (peers see kRemoteAccessError).
  // Memory owned by the region stays mapped until the object is destroyed. Idempotent.
  // soft: a remote WRITE that checked the key just before the revocation may still copy
  // its bytes after this returns (the check and the copy are not one step as in an HCA);
  // what comes later is refused. The rdma transport's one revocation with live memory
  // (the ring, on a reconnect) tolerates that: such a late write carries the bytes the
  // client rewrites into the same slot on the new QP. Memory reused at once for other
  // data would not.
  virtual absl::Status Deregister() = 0;
  virtual bool registered() const = 0;
  // Registers the same memory again under new keys and revokes the old ones (what a
  // connection does when it is re-established: writes still in flight from the old QP,
  // or a stale peer, find the old rkey dead). The contents are untouched. REQUIRES: not
  // called concurrently with lkey()/rkey() readers.
  virtual absl::Status Reregister() = 0;

 protected:
  MemoryRegion() = default;
  void* addr_ = nullptr;
  size_t length_ = 0;
  uint32_t lkey_ = 0;
  uint32_t rkey_ = 0;
  uint32_t access_ = 0;
  bool owns_memory_ = false;
};

// ---------------------------------------------------------------------------------------
// A completion queue with a completion channel: Poll() never blocks; to sleep, call
// RequestNotify(), poll once more (to close the race), then wait for event_fd() to become
// readable and call ConsumeEvents(). WaitForCompletion() does exactly that.
class CompletionQueue {
 public:
  virtual ~CompletionQueue() = default;
  CompletionQueue(const CompletionQueue&) = delete;
  CompletionQueue& operator=(const CompletionQueue&) = delete;

  // Moves up to `max` completions into `out`; returns how many (0 if none), or a negative
  // number if the CQ itself failed (overrun). REQUIRES: one polling thread at a time.
  virtual int Poll(Completion* out, int max) = 0;

  // The completion channel: readable after RequestNotify() once a completion arrives.
  virtual int event_fd() const = 0;
  // Arms the channel for the next completion (one-shot).
  virtual absl::Status RequestNotify() = 0;
  // Clears a readable event_fd() (and acknowledges the events). Never blocks.
  virtual void ConsumeEvents() = 0;

  // Polls; if nothing is there, sleeps on the channel up to `timeout` and polls again.
  // Returns the number of completions (0 on timeout) or an error.
  absl::StatusOr<int> WaitForCompletion(Completion* out, int max, absl::Duration timeout);

  int depth() const { return depth_; }

 protected:
  CompletionQueue() = default;
  int depth_ = 0;
};

// ---------------------------------------------------------------------------------------
// A reliable-connected queue pair.
enum class QpState : uint8_t { kReset, kInit, kRtr, kRts, kError };
const char* QpStateName(QpState state);

struct QpConfig {
  CompletionQueue* send_cq = nullptr;  // REQUIRES: from the same Device; outlives nothing.
  CompletionQueue* recv_cq = nullptr;
  uint32_t max_send_wr = 256;
  uint32_t max_recv_wr = 256;
  uint32_t max_send_sge = 4;
  uint32_t max_recv_sge = 4;
  uint32_t max_inline_data = 64;  // Requested; the QP reports what it got.
  bool signal_all = false;        // Every send WR completes, regardless of kSignaled.
  // RC transport knobs (ibverbs; the soft provider behaves as these defaults).
  uint8_t rnr_retry = 0;  // 0: no retry; the transport above never relies on RNR.
  // Transport retries before kRetryExceeded (0..7). Not 7: Soft-RoCE (Linux rxe_comp.c)
  // treats retry_cnt 7 like rnr_retry 7, as "retry forever", so a dead peer would never
  // fail the QP there; on HCAs 6 costs one retry of `timeout`.
  uint8_t retry_cnt = 6;
  uint8_t timeout = 14;   // 4.096 us * 2^timeout.
  uint8_t min_rnr_timer = 12;
  uint8_t max_rd_atomic = 1;
};

class QueuePair {
 public:
  virtual ~QueuePair() = default;
  QueuePair(const QueuePair&) = delete;
  QueuePair& operator=(const QueuePair&) = delete;

  uint32_t qp_num() const { return qp_num_; }
  uint32_t max_inline_data() const { return max_inline_data_; }
  // What the peer passes to its Connect().
  virtual QpEndpoint local_endpoint() const = 0;

  // INIT -> RTR (knows the peer) -> RTS (may send). Connect() does both.
  virtual absl::Status ModifyToRtr(const QpEndpoint& remote) = 0;
  virtual absl::Status ModifyToRts() = 0;
  absl::Status Connect(const QpEndpoint& remote);
  // Any state -> ERROR: outstanding and later WRs complete with kWrFlushError.
  virtual absl::Status ModifyToError() = 0;
  virtual QpState state() const = 0;

  // Posts a chain of send WRs, executed in order. Returns an error (and posts nothing from
  // the offending WR on; `*posted` tells how many were posted) if a WR is malformed, the
  // send queue is full or the QP is not yet RTS. In the error state WRs are accepted and
  // complete with kWrFlushError. Thread: any (see header comment).
  virtual absl::Status PostSend(absl::Span<const SendWr> wrs, size_t* posted = nullptr) = 0;
  // Posts receives (allowed from INIT on; in the error state they complete flushed).
  virtual absl::Status PostRecv(absl::Span<const RecvWr> wrs, size_t* posted = nullptr) = 0;

  // Destroys the QP now, discarding its outstanding WRs without completions. Idempotent.
  // The peer's QP fails: at once on "soft" (socket EOF), on its next operation on
  // "ibverbs" (kRetryExceeded).
  virtual absl::Status Close() = 0;

 protected:
  QueuePair() = default;
  uint32_t qp_num_ = 0;
  uint32_t max_inline_data_ = 0;
};

// ---------------------------------------------------------------------------------------
class ProtectionDomain {
 public:
  virtual ~ProtectionDomain() = default;
  ProtectionDomain(const ProtectionDomain&) = delete;
  ProtectionDomain& operator=(const ProtectionDomain&) = delete;

  // Allocates and registers `bytes` (rounded up to a page) of zeroed memory a peer may
  // access according to `access`. Memory a peer may write MUST come from here: ibverbs gives
  // page-aligned memory (hugepages if asked and available); soft gives shared memory (memfd)
  // the peer process maps. The region owns the memory.
  virtual absl::StatusOr<std::unique_ptr<MemoryRegion>> AllocRegion(
      size_t bytes, uint32_t access, bool huge_pages = false) = 0;

  // Registers caller memory, which must outlive the region. The soft provider only allows
  // local access here (kLocalWrite or 0): remote access needs AllocRegion.
  virtual absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t len,
                                                                       uint32_t access) = 0;

  // Creates an RC QP in the INIT state (receives may be posted right away).
  virtual absl::StatusOr<std::unique_ptr<QueuePair>> CreateQp(const QpConfig& config) = 0;

 protected:
  ProtectionDomain() = default;
};

class Device {
 public:
  virtual ~Device() = default;
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  virtual const DeviceAttr& attr() const = 0;
  virtual const PortAttr& port() const = 0;
  virtual absl::StatusOr<std::unique_ptr<ProtectionDomain>> CreatePd() = 0;
  // A CQ holding at least `depth` completions, with its own completion channel.
  virtual absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) = 0;

  // Asynchronous events: async_fd() is readable while events are queued (put it in your
  // epoll set); PollAsyncEvents() moves up to `max` of them into `out` without blocking and
  // returns how many (0 if none). REQUIRES: one polling thread at a time.
  virtual int async_fd() const = 0;
  virtual int PollAsyncEvents(AsyncEvent* out, int max) = 0;

 protected:
  Device() = default;
};

// Opens a device by name:
//   ""        auto: the first ibverbs device if any, else "soft";
//   "soft"    the software provider;
//   "ibverbs" the first ibverbs device (NotFound if there is none);
//   other     the ibverbs device of that name (e.g. "rxe0", "mlx5_0").
// Defined in //msg/rdma/verbs:device (which links both providers).
absl::StatusOr<std::unique_ptr<Device>> OpenDevice(absl::string_view name,
                                                   const DeviceOptions& options = {});

// Names of the ibverbs devices on this host (empty here without RDMA hardware/kernel).
std::vector<std::string> ListIbverbsDevices();

}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_DEVICE_H_

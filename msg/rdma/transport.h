// Transport: the verbs resources of one QP incarnation of an RDMA connection -- its
// completion queue, RC queue pair, the pool of receive buffers (SEND/RECV path), the pool of
// registered send buffers, and a scratch region for 8-byte words when the QP has no inline
// data. A connection gets a new Transport on every (re)connect; session state (sequence
// numbers, rings, queues) lives in RdmaConnection and survives it.
//
// Work requests are numbered 1, 2, 3 ... in post order (the wr_id of a send WR is its
// number; receives carry kRecvWrBit | buffer index). Selective signalling: a WR is
// signalled when the caller asks or every `signal_every`-th WR, so the send queue never holds
// more than sq_depth WRs and a completion for WR n retires every WR <= n (RC completes in
// order). Send buffers are returned to the pool when the WR that used them is retired.
//
// Thread-safety: Post*/TakeSendBuffer/Kill take mu_ and may be called from any thread
// (the connection serializes the ones whose order matters). OnSendCompleted is called by
// the completion thread. Accessors are immutable after Create.
#ifndef MSGR_MSG_RDMA_TRANSPORT_H_
#define MSGR_MSG_RDMA_TRANSPORT_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "msg/rdma/registered_budget.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma {

// The device and PD a messenger opened; transports and rings keep it alive.
struct DeviceContext {
  std::unique_ptr<verbs::Device> device;
  std::unique_ptr<verbs::ProtectionDomain> pd;
  ~DeviceContext() {
    pd.reset();  // children before the device
    device.reset();
  }
};

struct TransportConfig {
  uint32_t recv_buffers = 32;      // receives kept posted (the peer's send credits)
  // Each send/receive buffer (header + fragment). 16 KiB: both pools of a session take
  // 1 MiB registered (with 64 KiB, 4 MiB: most of what a session at low load holds);
  // messages are small but for read replies, which go as fragments of this size.
  uint32_t buffer_bytes = 16 << 10;
  uint32_t send_buffers = 32;
  uint32_t sq_depth = 256;
  uint32_t signal_every = 16;
};

inline constexpr uint64_t kRecvWrBit = 1ull << 63;

// One work request as the connection describes it.
struct WrSpec {
  verbs::WrOpcode opcode = verbs::WrOpcode::kRdmaWrite;
  verbs::Sge sge{};        // data (SEND, WRITE); ignored when `word`
  bool word = false;       // an 8-byte write of `value` (inline, or via the scratch region)
  uint64_t value = 0;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  bool signal = false;
  int send_buffer = -1;    // pool buffer to recycle when this WR retires
  uint32_t imm = 0;        // kRdmaWriteWithImm / kSendWithImm
};

class Transport {
 public:
  // Registers the pools after charging them to `budget` (for `peer`, named in a refusal).
  // `recv_cq` (with `recv_cq_owner`, which keeps it alive): where the QP's receive
  // completions go instead of the transport's own CQ.
  static absl::StatusOr<std::shared_ptr<Transport>> Create(
      std::shared_ptr<DeviceContext> ctx, const TransportConfig& config,
      RegisteredBudget* budget, const std::string& peer,
      verbs::CompletionQueue* recv_cq = nullptr, std::shared_ptr<void> recv_cq_owner = nullptr);
  ~Transport();

  verbs::QueuePair* qp() const { return qp_.get(); }
  // Send completions, and receive completions unless Create was given a recv_cq (an OSD
  // session on a poller's notifier, msg/rdma/ring_notifier.h): then those go there.
  verbs::CompletionQueue* cq() const { return cq_.get(); }
  bool own_recv_cq() const { return recv_cq_owner_ == nullptr; }
  const TransportConfig& config() const { return config_; }
  size_t registered_bytes() const { return registered_bytes_; }
  uint32_t fragment_bytes() const;  // body bytes one SEND carries

  // Posts every receive buffer (once, before the peer may send).
  absl::Status PostAllRecvs();
  // Re-posts receive buffer `index` after its contents were consumed.
  absl::Status RepostRecv(uint32_t index);
  const uint8_t* recv_buffer(uint32_t index) const;

  // A free send buffer (index, memory), or -1 when all are in flight.
  int TakeSendBuffer();
  uint8_t* send_buffer(int index) const;
  verbs::Sge SendBufferSge(int index, uint32_t len) const;
  int free_send_buffers() const;
  // Gives back a buffer from TakeSendBuffer that was not posted.
  void ReturnSendBuffer(int index);

  // Posts `wrs` as one chain, in order. kResourceExhausted when the send queue has no room
  // for all of them (nothing posted), kUnavailable after Kill(). Returns the number of the
  // last WR.
  absl::StatusOr<uint64_t> Post(absl::Span<const WrSpec> wrs);
  // Waits until the send queue has room for `n` WRs (false on deadline or Kill()).
  bool WaitForRoom(size_t n, absl::Time deadline);
  // Waits until WR number `wr` has retired (false on deadline or Kill()).
  bool WaitRetired(uint64_t wr, absl::Time deadline);

  // The completion thread retires WRs <= wr.
  void OnSendCompleted(uint64_t wr);
  uint64_t retired() const;
  uint64_t posted() const;  // number of the last WR posted

  // Moves the QP to the error state: later posts fail, outstanding WRs flush. Idempotent.
  void Kill();
  bool dead() const;

 private:
  Transport(std::shared_ptr<DeviceContext> ctx, const TransportConfig& config)
      : ctx_(std::move(ctx)), config_(config) {}

  std::shared_ptr<DeviceContext> ctx_;
  TransportConfig config_;
  size_t registered_bytes_ = 0;
  // Creation order; destroyed in reverse (QP first, CQs last). Regions hold their budget share.
  std::shared_ptr<void> recv_cq_owner_;  // keeps a shared receive CQ alive (or null)
  std::unique_ptr<verbs::CompletionQueue> cq_;
  ChargedRegion recv_mr_;
  ChargedRegion send_mr_;
  ChargedRegion scratch_mr_;  // 8-byte word sources, one per SQ slot
  std::unique_ptr<verbs::QueuePair> qp_;

  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  // Written under mu_ (whose waiters test them); read without it by dead() and retired(),
  // which the completion thread and writers ask on every op.
  std::atomic<bool> dead_{false};
  uint64_t posted_ ABSL_GUARDED_BY(mu_) = 0;
  std::atomic<uint64_t> retired_{0};
  std::vector<int> free_send_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<uint64_t, int>> busy_send_ ABSL_GUARDED_BY(mu_);  // (wr, buffer)
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_TRANSPORT_H_

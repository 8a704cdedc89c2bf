// Soft provider: an RC queue pair.
//
// Send path (user thread, serialized by post_mu_): RDMA WRITE/READ check the peer's region
// table (key, range, access, PD, still registered) and memcpy straight between local memory
// and the peer's shared region. WRITE_WITH_IMM then takes the peer QP's oldest posted
// receive and completes it into the peer's CQ itself, through the queues the peer shared
// when we connected (shared_queues.h): no message, no peer thread. SEND sends a control
// message and completes when the peer's service thread ACKs (after consuming a posted
// receive) or NAKs; while one awaits its ACK, a WRITE_WITH_IMM goes the same way (so the
// peer consumes its receives in post order). Completions are delivered in post order (a
// WRITE behind an un-ACKed SEND waits).
//
// Receive path: the posted receives live in a shared queue (SharedRq); SENDs are scattered
// by this device's service thread (OnRequest), WRITE_WITH_IMMs completed by the peer.
//
// Errors: the first failing WR completes with its status, the QP enters ERROR, every later
// WR (outstanding or posted afterwards) and every posted receive completes kWrFlushError.
//
// Where it differs from an HCA (none of it matters to a transport that follows the rules):
//   * a WRITE lands when posted; one posted after an un-ACKed SEND may land before the peer
//     has consumed that SEND (completions are still reported in order);
//   * after an error, a later WRITE whose bytes already landed is still reported flushed;
//   * PSN, MTU, retry counts and timeouts are carried but have no effect;
//   * SEND payloads cross a socket and are scattered by the peer's service thread;
//   * a WRITE_WITH_IMM completes at the initiator when its receive completion is queued at
//     the target, and one sent just before the target process dies may look delivered.
//
// Thread-safety: PostSend (any thread; callers serialized by post_mu_), PostRecv, the
// service-thread callbacks and state() may run concurrently; mu_ guards the queues and state.
// ModifyTo*/Close must not race with PostSend.
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_SOFT_QP_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_SOFT_QP_H_

#include <deque>
#include <memory>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "msg/rdma/verbs/device.h"
#include "msg/rdma/verbs/soft/region_table.h"
#include "msg/rdma/verbs/soft/shared_queues.h"
#include "msg/rdma/verbs/soft/soft_cq.h"
#include "msg/rdma/verbs/soft/soft_device.h"
#include "msg/rdma/verbs/soft/wire.h"

namespace msgr {
namespace verbs {
namespace soft {

// What an initiator knows about the peer it is connected to.
struct RemotePeer {
  ~RemotePeer();
  std::shared_ptr<Conn> link;  // Our outgoing connection.
  RegionTable table;           // The peer device's region table (read-only).
  uint32_t pd_id = 0;          // PD of the peer QP: regions of other PDs are refused.
  uint32_t qp_num = 0;         // The peer QP.
  // The peer QP's posted receives and its receive CQ (WRITE_WITH_IMM without a message).
  std::unique_ptr<SharedRq> rq;
  std::unique_ptr<SharedCq> cq;

  struct Mapping {
    uint32_t key = 0;
    uint8_t* base = nullptr;
    size_t bytes = 0;
  };
  std::unordered_map<uint64_t, Mapping> mappings;  // By region uid; under QpCore::post_mu_.

  // Rendezvous for kRegionRep, filled by the service thread.
  absl::Mutex reply_mu;
  bool reply_ready ABSL_GUARDED_BY(reply_mu) = false;
  bool gone ABSL_GUARDED_BY(reply_mu) = false;
  WireHeader reply ABSL_GUARDED_BY(reply_mu);
  int reply_fd ABSL_GUARDED_BY(reply_mu) = -1;
};

class QpCore : public std::enable_shared_from_this<QpCore> {
 public:
  QpCore(std::shared_ptr<PdCore> pd, std::shared_ptr<CqCore> send_cq,
         std::shared_ptr<CqCore> recv_cq, SharedRq rq, const QpConfig& config,
         uint32_t qp_num, uint32_t psn);

  uint32_t qp_num() const { return qp_num_; }
  uint32_t pd_id() const { return pd_->id; }
  uint32_t max_inline_data() const;
  QpEndpoint LocalEndpoint() const;

  absl::Status ModifyToRtr(const QpEndpoint& remote);
  absl::Status ModifyToRts();
  absl::Status ModifyToError();
  QpState state() const;
  void Close();

  absl::Status PostSend(absl::Span<const SendWr> wrs, size_t* posted);
  absl::Status PostRecv(absl::Span<const RecvWr> wrs, size_t* posted);

  // Service thread: a request from the peer on an incoming conn; false drops the conn.
  bool OnRequest(const std::shared_ptr<Conn>& conn, const WireHeader& hdr, int fd);
  // Service thread: a response on our outgoing link.
  void OnResponse(const WireHeader& hdr, int fd);
  // Service thread: a connection of ours reached EOF (peer process died or closed its QP).
  void OnPeerGone();
  void AddIncoming(const std::shared_ptr<Conn>& conn);
  // Service thread: hands a connecting peer our receive queue and receive CQ (kInbox).
  bool SendInbox(const std::shared_ptr<Conn>& conn);

 private:
  struct SqEntry {
    uint64_t seq = 0;
    uint64_t wr_id = 0;
    WcOpcode opcode = WcOpcode::kSend;
    uint32_t byte_len = 0;
    bool signaled = false;
    bool done = false;
    WcStatus status = WcStatus::kSuccess;
  };
  // Datapath helpers (soft_qp_datapath.cc).
  absl::Status ValidateSendWr(const SendWr& wr) const;
  WcStatus ExecuteSend(const SendWr& wr, uint64_t seq, uint32_t total);
  WcStatus ExecuteRdma(const SendWr& wr, uint32_t total);
  WcStatus CheckLocalSges(const Sge* sges, uint32_t n, bool need_write) const;
  // Finds (or fetches from the peer) the mapping of a live remote region.
  WcStatus MapRemote(const RegionView& view, RemotePeer::Mapping** out);
  void NotifyPeer(MsgType type);

  // Queue/state helpers. REQUIRES mu_.
  SqEntry* FindSqLocked(uint64_t seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DrainSqLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // WR `seq` failed with `status`: QP -> ERROR, later WRs flushed.
  void FailWrLocked(uint64_t seq, WcStatus status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // QP -> ERROR: the oldest unfinished WR gets `first`, the rest kWrFlushError.
  void FailAllLocked(WcStatus first) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FlushRecvLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True while a WR that completes on the peer's ACK (a SEND) has not completed.
  bool AwaitingAckLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PushRecvCompletion(uint64_t wr_id, WcStatus status, WcOpcode opcode, uint32_t byte_len,
                          uint32_t imm, bool has_imm);
  // Target side.
  // A SEND or WRITE_WITH_IMM arrived: takes the oldest posted receive (true), or sets
  // `rep`'s NAK status to what the requester's WR completes with (false): no answer from a
  // QP in ERROR (its retries run out), receiver not ready without one.
  bool TakeRecvLocked(WireHeader* rep, uint64_t* wr_id, size_t* slot)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool HandleSend(const std::shared_ptr<Conn>& conn, const WireHeader& hdr);
  void HandleWriteImm(const std::shared_ptr<Conn>& conn, const WireHeader& hdr);
  void HandleRegionReq(const std::shared_ptr<Conn>& conn, const WireHeader& hdr);
  void Reply(const std::shared_ptr<Conn>& conn, const WireHeader& hdr, int pass_fd = -1);

  const std::shared_ptr<PdCore> pd_;
  const std::shared_ptr<CqCore> send_cq_;
  const std::shared_ptr<CqCore> recv_cq_;
  const QpConfig config_;
  const uint32_t qp_num_;
  const uint32_t psn_;

  absl::Mutex post_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Set once in ModifyToRtr; read with std::atomic_load (the service thread reads it too).
  std::shared_ptr<RemotePeer> remote_;

  mutable absl::Mutex mu_;
  QpState state_ ABSL_GUARDED_BY(mu_) = QpState::kInit;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  std::deque<SqEntry> sq_ ABSL_GUARDED_BY(mu_);
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint32_t sq_used_ ABSL_GUARDED_BY(mu_) = 0;  // Slots held until a later completion.
  uint32_t unsignaled_retired_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t awaiting_ack_wr_ ABSL_GUARDED_BY(mu_) = 0;  // seq of the last WR awaiting an ACK
  // Posted receives: the queue is shared with the peer; their scatter lists stay here, by
  // the queue's slot (written by PostRecv, read by HandleSend, both under mu_).
  SharedRq rq_;
  std::vector<std::vector<Sge>> rq_sges_ ABSL_GUARDED_BY(mu_);
  std::vector<std::weak_ptr<Conn>> incoming_ ABSL_GUARDED_BY(mu_);
};

class SoftQp : public QueuePair {
 public:
  explicit SoftQp(std::shared_ptr<QpCore> core);
  ~SoftQp() override;
  QpEndpoint local_endpoint() const override { return core_->LocalEndpoint(); }
  absl::Status ModifyToRtr(const QpEndpoint& remote) override {
    return core_->ModifyToRtr(remote);
  }
  absl::Status ModifyToRts() override { return core_->ModifyToRts(); }
  absl::Status ModifyToError() override { return core_->ModifyToError(); }
  QpState state() const override { return core_->state(); }
  absl::Status PostSend(absl::Span<const SendWr> wrs, size_t* posted) override {
    return core_->PostSend(wrs, posted);
  }
  absl::Status PostRecv(absl::Span<const RecvWr> wrs, size_t* posted) override {
    return core_->PostRecv(wrs, posted);
  }
  absl::Status Close() override;

 private:
  std::shared_ptr<QpCore> core_;
};

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_SOFT_QP_H_

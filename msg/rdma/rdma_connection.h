// RdmaConnection: one session with a peer over the "rdma" backend.
//
// A session outlives its transports: each (re)connect builds a Link -- a TCP side channel
// plus a Transport (QP, CQ, buffer pools) -- and a fault retires it. The connecting side
// reconnects lossless sessions and resumes them (messages by seq/ack, ring records from the
// ring's next expected seq); the accepting side keeps the session until the client comes
// back. Lossy sessions reset on any fault.
//
// Files: rdma_connection.cc (API, queues, faults), rdma_connection_setup.cc (handshake and
// RDMA setup, both sides), rdma_datapath.cc (completions, messages: SEND/RECV),
// rdma_record_writer.cc (client: ring records, credits read, resizes asked, doorbells rung),
// rdma_ring_owner.cc (OSD: the ring, its release as credit, the sleep word).
//
// Threads: public methods from any thread. The completion thread (EventLoop) runs
// OnCompletions/OnSideReadable; Dispatcher callbacks run on shared_->workers, in order per
// connection. Lock order: record_mu_ before ack_mu_ before mu_ before Transport's lock.
#ifndef MSGR_MSG_RDMA_RDMA_CONNECTION_H_
#define MSGR_MSG_RDMA_RDMA_CONNECTION_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/inlined_vector.h"
#include "absl/synchronization/mutex.h"
#include "msg/base/growing_ring.h"
#include "msg/handshake.h"
#include "msg/messenger.h"
#include "msg/session/backoff.h"
#include "msg/session/record_acks.h"
#include "msg/rdma/event_loop.h"
#include "msg/rdma/rdma_recv_ring.h"
#include "msg/rdma/ring_notifier.h"
#include "msg/rdma/rdma_shared.h"
#include "msg/rdma/rdma_wire.h"
#include "msg/rdma/side_channel.h"
#include "msg/rdma/transport.h"
#include "msg/ring/ring.h"
#include "msg/session/delivery.h"
#include "msg/session/liveness.h"

namespace msgr::rdma {

class RdmaConnection;

// How many of a session's latest QPs an asynchronous event is matched against.
inline constexpr size_t kRecentQps = 4;
// WRs one ring record takes at most: PAD header + its seq word, record (head from the
// mirror, payload from the caller's memory when zero copy), seq word.
inline constexpr size_t kMaxRecordWrs = 5;
// After a resize that was given up (records stayed in flight) or that the server answered
// with the same size, the client waits this long before it asks again.
inline constexpr absl::Duration kRingResizeBackoff = absl::Seconds(10);

// One incarnation: side channel + transport + what the peer told us at setup.
class Link : public LoopClient {
 public:
  Link(std::weak_ptr<RdmaConnection> conn, std::shared_ptr<Transport> tp,
       std::unique_ptr<SideChannel> ch)
      : conn_(std::move(conn)), tp(std::move(tp)), ch(std::move(ch)) {}
  verbs::CompletionQueue* loop_cq() override { return tp->cq(); }
  int loop_side_fd() override { return ch->fd(); }
  bool OnCompletions(const verbs::Completion* wc, int n) override;
  void OnCqError() override;
  void OnSideReadable() override;
  bool OnPoll() override;
  bool awaiting() const override;
  bool ArmWakeup() override;

  std::weak_ptr<RdmaConnection> conn_;
  std::shared_ptr<Transport> tp;
  std::unique_ptr<SideChannel> ch;
  // Peer geometry from setup.
  uint32_t peer_recv_buffers = 0;
  uint32_t frag_bytes = 0;           // message bytes per SEND
  uint64_t ctrl_addr = 0;            // accepting side: the client's control region
  uint32_t ctrl_rkey = 0;
  uint64_t ring_addr = 0;            // connecting side: the peer's ring
  uint32_t ring_rkey = 0;
  uint64_t ring_bytes = 0;
  // Record notifications (PROTOCOL.md): of the peer's receives, how many the client may
  // spend on record imms on this link (0: it sends none). Client: the imms it sent on it
  // (under the connection's mu_). OSD: the count its notifier keeps for the link.
  uint32_t record_imm_credits = 0;
  uint64_t imms_sent = 0;
  std::shared_ptr<ImmCount> imm_count;
  // OSD: the notifier wants the count written now (half the client's credits wait).
  void WriteImmCount();
};

class RdmaConnection : public Connection, public std::enable_shared_from_this<RdmaConnection> {
 public:
  // Connecting side (starts no thread; RdmaMessenger calls StartConnecting()).
  RdmaConnection(std::shared_ptr<RdmaShared> shared, std::string addr,
                 const ConnectOptions& options);
  // Accepting side, for a peer that passed authentication.
  RdmaConnection(std::shared_ptr<RdmaShared> shared, EntityName peer, std::string addr,
                 bool lossless, bool want_ring, uint64_t cookie);
  ~RdmaConnection() override;

  // --- Connection ---
  EntityName peer_name() const override;
  std::string peer_addr() const override { return addr_; }
  bool is_connected() const override;
  absl::Status Send(Message m) override;
  absl::Status TrySend(Message m) override;
  // A payload inside a registered record buffer (AllocRecordBuffer) is written straight from
  // it; other payloads of at least rdma_zero_copy_min_bytes (default 256 KiB) straight from
  // the caller's memory, registered in place for as long as the record is unacknowledged;
  // smaller ones are staged (copied) in the registered mirror of the ring.
  absl::Status WriteRecordShared(const RecordDesc& desc, std::string_view payload,
                                 std::shared_ptr<const void> owner,
                                 absl::Duration timeout) override;
  absl::Status WriteRecord(const RecordDesc& desc, std::string_view payload,
                           absl::Duration timeout) override;
  size_t max_record_payload() const override;
  void ReleaseRing(uint64_t position, absl::Span<const RecordAck> failed) override;
  void MarkDown() override;

  // --- backend internals ---
  // Messenger::DumpSessions' view of this session (any thread; takes mu_ briefly, then
  // walks the headers of the records published in the ring without it).
  SessionInfo Info() const ABSL_LOCKS_EXCLUDED(mu_);
  // Connecting side: connects, then resumes and reconnects until closed, all on the
  // completion thread (rdma_connection_setup.cc): an attempt is a state machine fed by its
  // socket (Dialer); keepalives, ring resizes and the backoff between attempts run on the
  // loop's timers. No thread of its own.
  void StartConnecting();
  // Accepting side: the rest of the handshake for a peer whose AUTH passed, in three
  // steps driven by the messenger's accept state machine on the completion thread
  // (rdma_messenger.cc) as the client's frames arrive; no step waits for the peer.
  // AcceptBegin (`resumed`: an existing session) prepares the transport and the ring and
  // writes READY; AcceptSetup takes the client's setup frame, connects the QP and writes
  // the server's; AcceptFinish takes the client's "ready" frame and installs the link. A
  // step that fails has told the peer why (CLOSE), ended a new session and returns false.
  struct AcceptState {
    AuthReply auth;
    bool resumed = false;
    bool ring_resized = false;
    absl::Time deadline;  // for the writes
    std::shared_ptr<Transport> tp;
    ServerSetup ss;
    ClientSetup cs;
    std::shared_ptr<ImmCount> imm_count;  // the link's, when on a notifier
  };
  bool AcceptBegin(SideChannel& ch, const AuthReply& auth, bool resumed, AcceptState* st);
  bool AcceptSetup(SideChannel& ch, const DecodedFrame& f, AcceptState* st);
  void AcceptFinish(std::unique_ptr<SideChannel> ch, const DecodedFrame& f, AcceptState* st);
  // A step of the above failed (or the handshake timed out): logged, CLOSE with `s`, and a
  // new session reset.
  void FailAccept(SideChannel* ch, const AcceptState& st, const absl::Status& s);
  // The client messenger's incarnation (its AUTH), for fencing; 0 on the client side.
  uint64_t peer_instance() const { return peer_instance_.load(); }
  void set_peer_instance(uint64_t instance) { peer_instance_.store(instance); }
  // Ends the session for good: OnReset(why) (unless the messenger is stopping).
  void Reset(const absl::Status& why, bool send_close);
  // Server side of a lossless session: ends it (Reset) if its peer has been gone for
  // longer than session_reconnect_timeout. Called periodically by the messenger.
  void ExpireIfGone(absl::Time now);
  // An asynchronous event for QP `ev.qp_num`; false if none of this session's recent QPs
  // has that number. QP_ACCESS_ERR -- the peer made an RDMA access our keys refuse, e.g. a
  // write outside the ring it was given -- cuts the session off for good (Reset, the ring
  // revoked and freed); other QP errors fault the link (lossless sessions resume).
  bool OnQpEvent(const verbs::AsyncEvent& ev);
  // Messenger shutdown: close without callbacks.
  void Stop();
  bool closed() const;
  bool lossless() const { return lossless_; }
  uint64_t cookie() const { return cookie_; }
  uint64_t id() const { return id_; }

  // Link callbacks (completion thread).
  void HandleCompletions(Link* link, const verbs::Completion* wc, int n);
  // OSD: posts the record-imm count word for `link` (RdmaRingNotifier asks when it lags).
  void WriteImmCount(Link* link) ABSL_LOCKS_EXCLUDED(mu_);
  void HandleSideReadable(Link* link);
  void Fault(Link* link, const absl::Status& why);
  // Client side of the ring: looks at the credit word the OSD writes into our control
  // region and delivers the acknowledgements it implies (msg/record_acks.h) on the calling
  // thread. Cheap when nothing changed (one load, no lock); never waits for a lock.
  // Returns true if it applied a new credit.
  bool PollAcks() ABSL_LOCKS_EXCLUDED(mu_, ack_mu_);
  // True while the application calls Messenger::Poll (the last call is less than
  // rdma_app_poll_window_us old, default 200): the
  // completion thread then leaves acknowledgements to it instead of competing for this
  // connection's lock and a core.
  bool app_polling() const;
  // True while records are written and not acknowledged (the completion loop keeps
  // polling their credit word).
  bool awaiting_acks() const { return awaiting_acks_.load(std::memory_order_relaxed); }
  // Client side of the ring, for a completion thread about to sleep while it awaits acks:
  // asks the OSD (a control SEND, once per wait) to write the next credit WITH_IMM, which
  // completes on this connection's CQ. False if it cannot ask now (no link, no send
  // credit to spare): then the thread keeps napping.
  bool ArmCreditWakeup() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct OutMsg {
    uint64_t seq = 0;
    uint16_t type = 0;
    std::string payload;
    size_t sent = 0;  // bytes already posted (fragments)
    bool ever_sent = false;  // a fragment was posted, on this link or an earlier one
  };
  struct SentRecord {  // a record the OSD has not released yet (client side)
    uint64_t seq = 0;
    size_t offset = 0;
    uint32_t bytes = 0;  // header + oid + payload (what is written)
    bool has_pad = false;
    uint64_t pad_seq = 0;
    size_t pad_offset = 0;
    uint64_t end_position = 0;
    // Zero copy: the payload stays in the caller's memory (kept alive by `owner`, registered
    // as `payload_mr`, destroyed first); the mirror holds only header, gap and oid, the
    // first `head_bytes` of the record.
    std::shared_ptr<const void> owner;
    std::shared_ptr<verbs::MemoryRegion> payload_mr;  // declared after owner: dies first
    size_t payload_mr_offset = 0;  // where the payload starts in it
    uint32_t head_bytes = 0;
    // Where its WRs were last posted (zero copy only): the HCA may read the payload until
    // WR `posted_wr` of `posted_tp` completes (a signalled one: the seq word).
    std::weak_ptr<Transport> posted_tp;
    uint64_t posted_wr = 0;
  };
  // A zero-copy payload whose record is acknowledged (or whose session ended), kept
  // registered until the HCA can no longer read it: the record's last WR `after_wr` on
  // `tp` has completed (the requester's ACK may trail the peer's credit, and a
  // retransmission reads the source again), or `tp` is dead or gone.
  struct Unpin {
    std::weak_ptr<Transport> tp;
    uint64_t after_wr = 0;
    std::shared_ptr<const void> owner;
    std::shared_ptr<verbs::MemoryRegion> payload_mr;
  };

  absl::Status Enqueue(Message m, bool block);
  void EnqueueLocked(Message m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands acknowledgements gathered under mu_ to the dispatcher, in order (outside mu_),
  // after releasing the payloads the HCA is done with (ReleaseUnpinned).
  void DeliverAcks() ABSL_LOCKS_EXCLUDED(mu_, ack_mu_);
  // DeliverAcks without ReleaseUnpinned, for a caller that just took them under mu_.
  void DeliverGatheredAcks() ABSL_LOCKS_EXCLUDED(mu_, ack_mu_);
  // The two halves of a delivery: take the gathered acks into acks_taken_ (under both
  // locks), then hand them to the dispatcher (under ack_mu_ only, which keeps deliveries
  // in order). The two vectors trade places and keep their capacity: no allocation per
  // delivery.
  void TakeAcksLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ack_mu_, mu_);
  void HandOverAcks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ack_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Both halves again while acks are pending, a few times: an ack callback's own write
  // (an objecter chaining its next write) gathers acks but leaves them to the delivery
  // it runs in, which could not take ack_mu_ a second time.
  void HandOverPendingAcks() ABSL_EXCLUSIVE_LOCKS_REQUIRED(ack_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // Connecting side (rdma_connection_setup.cc). Dial: one attempt, unless one is running
  // or the session is connected or closed (loop thread). DialFailed: the attempt failed:
  // OnConnectRefused, then a lossless session dials again after a backoff, a lossy one
  // ends. PrepareClientSetup: the control region, the staging mirror for a ring of
  // `ring_bytes` (in `*new_mirror` until FinishDial installs it), the receives posted and
  // our setup frame's fields. FinishDial: the server's setup arrived: connects the QP,
  // installs the link, resumes (the setup thread: RdmaShared::setup).
  class Dialer;
  void Dial();
  void DialFailed(const absl::Status& s) ABSL_LOCKS_EXCLUDED(mu_);
  absl::StatusOr<ClientSetup> PrepareClientSetup(SideChannel& ch, Transport& tp,
                                                 uint64_t ring_bytes, ChargedRegion* new_mirror);
  absl::Status FinishDial(Dialer& d);
  // Loop timer while `link` is the link: keepalives, liveness, ring resizes.
  void Housekeep(const std::weak_ptr<Link>& link) ABSL_LOCKS_EXCLUDED(mu_);
  absl::Status InstallLink(std::shared_ptr<Link> link) ABSL_LOCKS_EXCLUDED(mu_);
  void FaultLocked(Link* link, const absl::Status& why, std::shared_ptr<Link>* retired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Retire(std::shared_ptr<Link> link);  // outside mu_: loop removal, teardown
  void Dispatch(std::function<void(const ConnectionRef&)> fn);

  // Data path (rdma_datapath.cc: messages; rdma_record_writer.cc: client records;
  // rdma_ring_owner.cc: the OSD's ring).
  void FlushLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool PostControlLocked(uint8_t flags, uint64_t seq = 0) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A doorbell or a credit wake-up request on its own: a zero-length WRITE_WITH_IMM into
  // the ring carrying `imm` (rdma_wire.h kImm*). It takes a send credit. False if it could
  // not be posted now.
  bool PostImmLocked(uint32_t imm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The zero-length WRITE_WITH_IMM into the ring, no credit taken (callers count it).
  bool PostEmptyImmLocked(uint32_t imm) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void OnRecvLocked(Link* link, const verbs::Completion& wc, std::shared_ptr<Link>* retired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Posts receive buffer `idx` again and owes the peer the credit (faults the link if the
  // post fails).
  void RepostRecvLocked(Link* link, uint32_t idx, std::shared_ptr<Link>* retired)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void AckLocked(uint64_t ack_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RequeueLocked(uint64_t peer_in_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropQueuesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ApplyCreditLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckDoorbellLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status PostRecordLocked(const SentRecord& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A record WriteRecordShared has a ring slot for: what staging and posting it need.
  struct ReservedRecord {
    RingPlacement slot;
    uint64_t epoch = 0;           // the session the slot belongs to
    uint16_t writer_depth = 0;    // RecordHeader::writer_depth
    uint8_t* mirror = nullptr;    // mirror_mr_'s memory, read with record_mu_ held
    std::shared_ptr<verbs::MemoryRegion> payload_mr;  // zero-copy: the HCA reads it there
    size_t payload_mr_offset = 0;
    bool from_buffer = false;     // payload_mr is a record buffer's (AllocRecordBuffer)
  };
  // Reserves a ring slot for `desc`'s record of `payload_bytes` (`record_bytes` in the
  // ring): OK and true (r->slot and r->writer_depth set, the record counted in
  // sent_records_: it must be posted), OK and false (no room or credit yet, or a resize is
  // under way: wait), or the error the write fails with.
  absl::StatusOr<bool> ReserveRecordLocked(const RecordDesc& desc, size_t payload_bytes,
                                           size_t record_bytes, ReservedRecord* r)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The rest of WriteRecordShared once `r` is reserved: stages the record in the mirror
  // (the client-side copy, unless zero-copy) and posts it.
  absl::Status StageAndPostRecord(const RecordDesc& desc, std::string_view payload,
                                  std::shared_ptr<const void> owner, ReservedRecord reserved,
                                  absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // `payload` registered in place for the HCA to read (null if that failed: copy it).
  std::shared_ptr<verbs::MemoryRegion> RegisterPayload(std::string_view payload);
  // Posts `r`, waiting (without mu_) for send-queue room until `deadline`.
  absl::Status PostRecordWaiting(const SentRecord& r, absl::Time deadline)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_) ABSL_LOCKS_EXCLUDED(mu_);
  // After a resume: rewrites every unreleased record from `from_seq` on into its slot.
  void ResendRecords(uint64_t from_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(record_mu_)
      ABSL_LOCKS_EXCLUDED(mu_);
  void RetireDeferred() ABSL_LOCKS_EXCLUDED(mu_);
  // Records leave records_ (acknowledged, or the session is over): their zero-copy
  // payloads go to unpin_.
  void UnpinLocked(SentRecord* r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Releases the unpin_ entries the HCA is done with (deregistration and the caller's
  // buffer outside mu_: a deregistration may take long, the owner is caller code).
  void ReleaseUnpinned() ABSL_LOCKS_EXCLUDED(mu_);
  using UnpinList = absl::InlinedVector<Unpin, 16>;
  // ReleaseUnpinned's step under mu_: moves the entries the HCA is done with to `*done`
  // (destroyed by the caller after it unlocked).
  void TakeUnpinnedLocked(UnpinList* done) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PostCreditLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accepting side (rdma_ring_owner.cc): a new ring of `bytes` becomes ring_.
  absl::Status NewRingLocked(size_t bytes, uint64_t first_seq) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The position after the records published past released_pos_ (`*next_seq`: the seq
  // the next one will carry). REQUIRES: ring_.
  uint64_t PublishedEndLocked(uint64_t* next_seq) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The same walk over the headers of `ring` from (`from_pos`, `from_seq`), counting the
  // write records in `*writes`. Safe without mu_ on a ring kept alive by the caller: the
  // client may be writing past the end meanwhile (a record whose seq word is not there
  // yet ends the walk), so the result is a lower bound of a moving value.
  static uint64_t ScanPublished(RdmaRecvRing& ring, uint64_t from_pos, uint64_t from_seq,
                                uint64_t* next_seq, uint64_t* writes);
  // Nothing published is unreleased and no credit is held back: the ring may be replaced.
  bool RingDrainedLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SetPeerSleeping(bool sleeping);
  // REQUIRES link_: fills `w` with the count word's WRITE if at least `parts` quarters of
  // the client's credits wait (ImmCount::lagging); `value`: what it publishes (marked
  // written once posted).
  bool ImmCountWrLocked(WrSpec* w, uint64_t* value, uint32_t parts)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Client: the record-imm credits left on the current link.
  uint32_t ImmCreditsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Client: a record went without its imm (no credit): announce the newest one now if a
  // credit came back and it is not released yet.
  void PostOwedImmLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CountFrameLocked(std::shared_ptr<Link>* retired) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::shared_ptr<RdmaShared> shared_;
  const uint64_t id_;
  const bool outgoing_;
  const std::string addr_;
  const bool lossless_;
  const bool want_ring_;
  const std::optional<EntityName> expect_peer_;  // ConnectOptions::peer (outgoing only)
  const uint64_t cookie_;
  std::atomic<uint64_t> peer_instance_{0};

  // Staging and posting of records (not the wait for credit); the mirror region only
  // changes under it.
  absl::Mutex record_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  // Serializes OnRecordsAcked deliveries so they arrive in order.
  absl::Mutex ack_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  absl::CondVar cv_;
  EntityName peer_name_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<Link> link_ ABSL_GUARDED_BY(mu_);  // null while disconnected
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool had_session_ ABSL_GUARDED_BY(mu_) = false;
  absl::Time link_lost_at_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();  // server side
  bool accepted_ ABSL_GUARDED_BY(mu_) = false;  // OnAccept delivered
  uint64_t frames_sent_ ABSL_GUARDED_BY(mu_) = 0;  // for inject_socket_failures
  session::Liveness liveness_ ABSL_GUARDED_BY(mu_);  // connecting side: keepalive acks
  absl::Time next_keepalive_ ABSL_GUARDED_BY(mu_);    // connecting side
  bool dialing_ ABSL_GUARDED_BY(mu_) = false;         // a Dialer runs
  session::ReconnectBackoff backoff_ ABSL_GUARDED_BY(mu_){
      shared_->options.reconnect_backoff_max};
  std::shared_ptr<Link> retire_ ABSL_GUARDED_BY(mu_);  // faulted under mu_; see RetireDeferred
  // Transports of this session's latest links: an asynchronous event may arrive after its
  // link was retired, even after the peer reconnected (retired transports linger
  // kRetiredTransportLinger; a destroyed one matches nothing, so a reused QP number
  // cannot point at this session).
  std::deque<std::weak_ptr<Transport>> recent_tps_ ABSL_GUARDED_BY(mu_);
  void AttachLinkLocked(std::shared_ptr<Link> link) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Messages.
  uint64_t out_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::deque<OutMsg> unsent_ ABSL_GUARDED_BY(mu_);
  session::SendWindow<OutMsg> unacked_ ABSL_GUARDED_BY(mu_);
  session::FlowWindow flow_ ABSL_GUARDED_BY(mu_);  // messages queued or unacked
  uint64_t in_seq_ ABSL_GUARDED_BY(mu_) = 0;
  std::string reasm_ ABSL_GUARDED_BY(mu_);
  bool reasm_active_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t reasm_seq_ ABSL_GUARDED_BY(mu_) = 0;
  uint16_t reasm_type_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t send_credits_ ABSL_GUARDED_BY(mu_) = 0;
  uint32_t credits_owed_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t ack_sent_ ABSL_GUARDED_BY(mu_) = 0;
  // A nack arrived and its ack has not gone out: acked at once even on a lossy session
  // (the sender's ring credit waits for it).
  bool nack_ack_owed_ ABSL_GUARDED_BY(mu_) = false;
  bool doorbell_pending_ ABSL_GUARDED_BY(mu_) = false;
  // Credit wake-ups (PROTOCOL.md): the client asked for one and it has not come; the OSD
  // owes one (its next credit write goes WITH_IMM).
  bool wakeup_asked_ ABSL_GUARDED_BY(mu_) = false;
  bool credit_wakeup_wanted_ ABSL_GUARDED_BY(mu_) = false;

  // Ring, connecting side (each region with its share of the registered-memory budget).
  ChargedRegion ctrl_mr_;    // set by the first handshake
  ChargedRegion mirror_mr_ ABSL_GUARDED_BY(mu_);  // staging
  std::optional<RingProducer> producer_ ABSL_GUARDED_BY(mu_);
  GrowingRing<SentRecord> records_ ABSL_GUARDED_BY(mu_);  // in seq order
  uint64_t session_epoch_ ABSL_GUARDED_BY(mu_) = 0;      // bumped when the peer restarts
  uint64_t posted_seq_ ABSL_GUARDED_BY(mu_) = 0;       // highest record seq posted
  uint64_t doorbelled_word_ ABSL_GUARDED_BY(mu_) = 0;  // sleep word of the last doorbell
  // Written under mu_; read without it by max_record_payload() (asked before every write).
  std::atomic<size_t> max_record_payload_{0};
  // Ring size, connecting side (PROTOCOL.md "Ring sizes"): what the next AUTH asks for
  // (0: the server's initial size); writers hold off while a resize drains the ring
  // for a resize; a writer that found the ring full or too small for its record leaves
  // the record's bytes as a hint to grow.
  uint64_t ring_request_ ABSL_GUARDED_BY(mu_) = 0;
  bool resizing_ ABSL_GUARDED_BY(mu_) = false;
  bool resize_faulting_ ABSL_GUARDED_BY(mu_) = false;  // drained: its link is being faulted
  size_t grow_hint_ ABSL_GUARDED_BY(mu_) = 0;
  bool ring_at_max_ ABSL_GUARDED_BY(mu_) = false;  // a grow got the same size back
  absl::Time resize_not_before_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
  // Where the ring's produced position was when housekeeping last saw it move, and when.
  uint64_t idle_produced_ ABSL_GUARDED_BY(mu_) = ~uint64_t{0};
  absl::Time idle_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  // The ring size to ask for now (0: none). ResizeIfWantedLocked starts a resize to it:
  // writers hold off, and CheckResizeDrainLocked (again every kResizeDrainCheck, until
  // `deadline`) faults the link once nothing is in flight, so that it resumes asking for
  // the new size, or gives the resize up for a while if records stay in flight.
  uint64_t RingResizeWantedLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResizeIfWantedLocked(const std::shared_ptr<Link>& link, absl::Time now)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void CheckResizeDrainLocked(const std::shared_ptr<Link>& link, uint64_t to,
                              absl::Time deadline) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static constexpr absl::Duration kResizeDrainCheck = absl::Milliseconds(2);
  void WantGrowLocked(size_t record_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t ring_initial_bytes_ ABSL_GUARDED_BY(mu_) = 0;  // the session's first ring size
  SentRecords sent_records_ ABSL_GUARDED_BY(mu_);         // written, not acknowledged
  std::vector<RecordAck> acks_ready_ ABSL_GUARDED_BY(mu_);  // for DeliverAcks
  std::vector<RecordAck> acks_taken_ ABSL_GUARDED_BY(ack_mu_);  // being handed over
  GrowingRing<Unpin> unpin_ ABSL_GUARDED_BY(mu_);          // in order of after_wr per tp
  std::atomic<bool> unpin_pending_{false};               // !unpin_.empty(), lock-free
  // !acks_ready_.empty(), readable without mu_: DeliverAcks (called after every write)
  // takes no lock when there is nothing to deliver.
  std::atomic<bool> acks_pending_{false};
  std::atomic<uint64_t> credit_seen_{0};   // last credit word value applied
  std::atomic<bool> awaiting_acks_{false};

  // Ring, accepting side.
  std::shared_ptr<RdmaRecvRing> ring_ ABSL_GUARDED_BY(mu_);
  uint64_t released_pos_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t released_seq_ ABSL_GUARDED_BY(mu_) = 1;  // seq of the record at released_pos_
  uint64_t writes_released_ ABSL_GUARDED_BY(mu_) = 0;  // write records released, all rings
  const absl::Time created_ = absl::Now();  // for Info()
  bool credit_dirty_ ABSL_GUARDED_BY(mu_) = false;
  NackBarrier nack_barrier_ ABSL_GUARDED_BY(mu_);  // credit held behind unacked nacks
  uint64_t sleep_word_ ABSL_GUARDED_BY(mu_) = 0;    // odd: the poller sleeps
  // The poller's notifier this session's receives go to (chosen at its first accept,
  // kept for every link), and its place there.
  std::shared_ptr<RdmaRingNotifier> notifier_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<void> notifier_place_ ABSL_GUARDED_BY(mu_);
  // Client: a record was posted without its imm for want of a credit (PROTOCOL.md).
  // Written under mu_; read without it by PollAcks, which then also looks at the count
  // word (`imm_word_seen_`: its value when the credits were last counted).
  std::atomic<bool> imm_owed_{false};
  mutable std::atomic<uint64_t> imm_word_seen_{0};

  friend class RdmaMessenger;
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_CONNECTION_H_

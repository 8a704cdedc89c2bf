// RdmaConnection: connection setup over the TCP side channel, both sides.
//
//   client                                        server
//   HELLO / CHALLENGE / AUTH / READY   (msg/session/handshake_steps.h, as the TCP backend)
//   kSetupClient: QP endpoint, control region, receive pool  -->
//                                    (posts receives, connects its QP: RTR/RTS)
//                                <-- kSetupServer: QP endpoint, ring (addr, rkey, size,
//                                    next expected seq/position), receive pool
//   (posts receives, connects its QP)
//   kSetupReady                                   -->  (both sides may post now)
//
// The side channel then stays open: EOF on it is a fault, CLOSE ends the session.
#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "msg/rdma/rdma_connection.h"
#include "msg/session/backoff.h"
#include "msg/session/handshake_steps.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {
namespace {

absl::Status Expect(const DecodedFrame& f, FrameType type, uint16_t msg_type, const char* what) {
  if (f.header.type == FrameType::kClose) {
    return session::RefusalFromClose(f.header, f.payload, "peer");
  }
  if (f.header.type != type || (type == FrameType::kMessage && f.header.msg_type != msg_type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("expected ", what, ", got ", FrameTypeName(f.header.type), " frame"));
  }
  return absl::OkStatus();
}

FrameHeader Header(FrameType t, uint16_t msg_type = 0) {
  FrameHeader h;
  h.type = t;
  h.msg_type = msg_type;
  if (t == FrameType::kMessage) h.seq = 1;  // setup frames are never resent; the decoder
                                             // wants seq > 0 on MESSAGE frames
  return h;
}

}  // namespace

// ---------------------------------------------------------------- connecting side

// One connect attempt, on the completion thread: the socket's connect, HELLO /
// CHALLENGE / AUTH / READY (msg/session's state machine, as on the TCP backend), then
// the RDMA setup exchange, one step per event; no step waits for the peer. The last step
// (FinishDial) runs on the messenger's setup thread: resending a resumed session's records
// may wait for send-queue room, which only the completion thread frees.
class RdmaConnection::Dialer : public LoopClient,
                               public std::enable_shared_from_this<RdmaConnection::Dialer> {
 public:
  Dialer(std::shared_ptr<RdmaConnection> conn, std::unique_ptr<SideChannel> ch, bool connected)
      : ch_(std::move(ch)),
        conn_(std::move(conn)),
        fd_(ch_->fd()),
        deadline_(absl::Now() + conn_->shared_->options.handshake_timeout),
        hs_(conn_->shared_->options.name, conn_->shared_->options.auth, conn_->addr_,
            WireMode::kCrc, conn_->expect_peer_),
        step_(connected ? Step::kHello : Step::kConnect) {}

  verbs::CompletionQueue* loop_cq() override { return nullptr; }
  int loop_side_fd() override { return fd_; }
  bool OnCompletions(const verbs::Completion*, int) override { return false; }
  void OnCqError() override {}
  bool side_connecting() const override { return step_ == Step::kConnect; }
  void OnSideReadable() override;
  // Right after the loop took it: a socket that connected at once sends HELLO.
  void Begin() {
    if (step_ == Step::kHello) SendHello();
  }
  // The deadline timer: an attempt still running fails.
  void Expire();
  absl::Time deadline() const { return deadline_; }

  // For FinishDial.
  std::unique_ptr<SideChannel> ch_;
  std::shared_ptr<Transport> tp_;
  Ready ready_;
  ServerSetup ss_;
  ChargedRegion new_mirror_;   // the staging mirror, when it had to be (re)registered
  uint32_t frag_buffer_bytes_ = 0;  // our receive buffers' size
  EntityName peer() const { return hs_.peer(); }

 private:
  enum class Step { kConnect, kHello, kChallenge, kReady, kSetup, kDone };
  void SendHello();
  bool OnChallenge(const DecodedFrame& f);
  bool OnReady(const DecodedFrame& f);
  void OnServerSetup(const DecodedFrame& f);
  // The handshake failed as hs_.last_error() says: counted, CLOSE if due, logged.
  void FailHandshake();
  void Fail(const absl::Status& s);
  // Leaves the loop (the channel closes with this object unless FinishDial takes it).
  void Done();

  const std::shared_ptr<RdmaConnection> conn_;
  const int fd_;
  const absl::Time deadline_;
  session::ClientHandshake hs_;
  Step step_;
};

void RdmaConnection::Dialer::OnSideReadable() {
  if (step_ == Step::kDone) return;
  if (conn_->closed() || conn_->shared_->stopping) return Done();  // quietly: it is over
  if (step_ == Step::kConnect) {
    if (absl::Status s = ch_->FinishConnect(); !s.ok()) return Fail(s);
    conn_->shared_->loop->SideConnected(this);
    step_ = Step::kHello;
    return SendHello();
  }
  const absl::Status error = ch_->DrainFrames([this](const DecodedFrame& f) {
    switch (step_) {
      case Step::kChallenge:
        if (!OnChallenge(f)) return false;
        step_ = Step::kReady;
        return true;
      case Step::kReady:
        if (!OnReady(f)) return false;
        step_ = Step::kSetup;
        return true;
      case Step::kSetup:
        OnServerSetup(f);
        return false;
      default:
        return false;
    }
  });
  if (error.ok() || step_ == Step::kDone) return;
  if (step_ == Step::kSetup) return Fail(error);
  (void)hs_.OnReadError(error);
  FailHandshake();
}

void RdmaConnection::Dialer::SendHello() {
  if (absl::Status s = ch_->WriteEncoded(hs_.HelloFrame(), deadline_); !s.ok()) return Fail(s);
  step_ = Step::kChallenge;
}

bool RdmaConnection::Dialer::OnChallenge(const DecodedFrame& f) {
  RdmaConnection& c = *conn_;
  AuthReply resume;
  resume.cookie = c.cookie_;
  resume.instance = c.shared_->options.instance;
  {
    absl::MutexLock l(&c.mu_);
    resume.in_seq = c.in_seq_;
    resume.flags = (c.want_ring_ ? kAuthWantRing : 0) | (c.lossless_ ? kAuthLossless : 0) |
                   (c.had_session_ ? kAuthHadSession : 0);
    // A lossy session cannot resize (a reconnect ends it): it asks for the largest ring.
    resume.ring_bytes = c.lossless_ ? c.ring_request_ : c.shared_->options.ring_bytes;
  }
  auto auth = hs_.OnChallenge(f.header, f.payload, resume);
  if (!auth.ok()) return FailHandshake(), false;
  if (auto s = ch_->WriteEncoded(*auth, deadline_); !s.ok()) return Fail(s), false;
  auto tp = Transport::Create(c.shared_->ctx, c.shared_->transport, c.shared_->budget.get(),
                              c.addr_);
  if (!tp.ok()) return Fail(tp.status()), false;
  tp_ = *tp;
  return true;
}

bool RdmaConnection::Dialer::OnReady(const DecodedFrame& f) {
  auto ready = hs_.OnReady(f.header, f.payload, conn_->want_ring_);
  if (!ready.ok()) return FailHandshake(), false;
  ready_ = *ready;
  auto cs = conn_->PrepareClientSetup(*ch_, *tp_, ready_.ring_bytes, &new_mirror_);
  if (!cs.ok()) return Fail(cs.status()), false;
  frag_buffer_bytes_ = cs->buffer_bytes;
  if (auto s = ch_->WriteFrame(Header(FrameType::kMessage, kSetupClient),
                               EncodeClientSetup(*cs), deadline_);
      !s.ok()) {
    return Fail(s), false;
  }
  return true;
}

void RdmaConnection::Dialer::OnServerSetup(const DecodedFrame& f) {
  if (auto s = Expect(f, FrameType::kMessage, kSetupServer, "RDMA setup"); !s.ok()) {
    return Fail(s);
  }
  auto ss = DecodeServerSetup(f.payload);
  if (!ss.ok()) return Fail(ss.status());
  ss_ = std::move(*ss);
  // The channel becomes the link's: this attempt leaves the loop first (the link
  // registers the same socket).
  Done();
  auto self = std::enable_shared_from_this<Dialer>::shared_from_this();
  conn_->shared_->setup->Post(conn_->id_, [self] {
    RdmaConnection& c = *self->conn_;
    if (absl::Status s = c.FinishDial(*self); !s.ok()) c.DialFailed(s);
  });
}

void RdmaConnection::Dialer::FailHandshake() {
  const session::HandshakeError& e = hs_.last_error();
  session::CountFailure(e, &conn_->shared_->counters);
  if (e.send_close) (void)ch_->WriteEncoded(session::CloseFrame(e), deadline_);
  if (e.blame == session::Blame::kAuth) {
    spdlog::warn("msgr rdma: handshake with {} refused: {}", hs_.who(), e.why.ToString());
  }
  Fail(e.why);
}

void RdmaConnection::Dialer::Fail(const absl::Status& s) {
  Done();
  conn_->DialFailed(s);
}

void RdmaConnection::Dialer::Expire() {
  switch (step_) {
    case Step::kDone:
      return;
    case Step::kConnect:
      return Fail(absl::DeadlineExceededError(
          absl::StrCat("connect to ", conn_->addr_, " timed out")));
    case Step::kSetup:
      return Fail(absl::DeadlineExceededError(absl::StrCat(
          "RDMA setup with ", conn_->addr_, " did not finish within ",
          absl::FormatDuration(conn_->shared_->options.handshake_timeout))));
    default:
      (void)hs_.OnTimeout(conn_->shared_->options.handshake_timeout);
      return FailHandshake();
  }
}

void RdmaConnection::Dialer::Done() {
  if (step_ == Step::kDone) return;
  step_ = Step::kDone;
  conn_->shared_->loop->Remove(this);  // the loop's handler still holds a reference
}

void RdmaConnection::StartConnecting() {
  shared_->loop->RunAt(absl::Now(), [w = weak_from_this()] {
    if (auto c = w.lock()) c->Dial();
  });
}

void RdmaConnection::Dial() {
  {
    absl::MutexLock l(&mu_);
    if (closed_ || shared_->stopping || link_ != nullptr || dialing_) return;
    dialing_ = true;
  }
  bool connected = false;
  auto ch = SideChannel::StartConnect(addr_, &connected);
  if (!ch.ok()) return DialFailed(ch.status());
  auto d = std::make_shared<Dialer>(shared_from_this(), std::move(*ch), connected);
  if (absl::Status s = shared_->loop->Add(d); !s.ok()) return DialFailed(s);
  shared_->loop->RunAt(d->deadline(), [w = std::weak_ptr<Dialer>(d)] {
    if (auto d = w.lock()) d->Expire();
  });
  d->Begin();
}

void RdmaConnection::DialFailed(const absl::Status& s) {
  absl::Duration wait;
  {
    absl::MutexLock l(&mu_);
    dialing_ = false;
    if (closed_ || shared_->stopping) return;
    wait = backoff_.Next();
  }
  spdlog::info("msgr rdma: connecting to {} failed: {}", addr_, s.ToString());
  Dispatch([s](const ConnectionRef& c) {
    static_cast<RdmaConnection*>(c.get())->shared_->dispatcher->OnConnectRefused(c, s);
  });
  if (!lossless_) {
    Reset(s, /*send_close=*/false);
    return;
  }
  shared_->loop->RunAt(absl::Now() + wait, [w = weak_from_this()] {
    if (auto c = w.lock()) c->Dial();
  });
}

absl::StatusOr<ClientSetup> RdmaConnection::PrepareClientSetup(SideChannel& ch, Transport& tp,
                                                               uint64_t ring_bytes,
                                                               ChargedRegion* new_mirror) {
  // What we cannot set up is refused here, before the peer sets anything up for this
  // attempt and before the session's state changes: CLOSE with the code tells it why.
  auto refuse = [&](const absl::Status& s) {
    (void)ch.WriteClose(s, absl::Now() + absl::Milliseconds(200));
    return s;
  };
  // The control region (kept for the connection's life) and the staging mirror (READY
  // gave the ring's size): registered here, outside mu_ (a refusal writes to the peer),
  // and installed once setup succeeded. A mirror that must grow is charged while the old
  // one still is: a tight budget may refuse what freeing first would have allowed.
  ChargedRegion new_ctrl;
  if (want_ring_) {
    bool need_ctrl, need_mirror;
    {
      absl::MutexLock l(&mu_);
      need_ctrl = !ctrl_mr_;
      // A mirror of another size is replaced (the ring was resized: nothing is staged).
      need_mirror = !mirror_mr_ || mirror_mr_->length() != ring_bytes;
    }
    if (need_ctrl) {
      auto ctrl = AllocCharged(*shared_->budget, *shared_->ctx->pd, kCtrlRegionBytes,
                               verbs::kLocalWrite | verbs::kRemoteWrite,
                               absl::StrCat("the control region for ", addr_));
      if (!ctrl.ok()) return refuse(ctrl.status());
      new_ctrl = std::move(*ctrl);
    }
    if (need_mirror) {
      auto mirror = AllocCharged(*shared_->budget, *shared_->ctx->pd, ring_bytes,
                                 verbs::kLocalWrite,
                                 absl::StrCat("the staging mirror of ", addr_, "'s ring"));
      if (!mirror.ok()) return refuse(mirror.status());
      *new_mirror = std::move(*mirror);
    }
  }
  ClientSetup cs;
  {
    absl::MutexLock l(&mu_);
    if (new_ctrl) ctrl_mr_ = std::move(new_ctrl);  // nobody reads it before this setup
    if (ctrl_mr_) {
      cs.ctrl_addr = reinterpret_cast<uint64_t>(ctrl_mr_->addr());
      cs.ctrl_rkey = ctrl_mr_->rkey();
      cs.ctrl_bytes = static_cast<uint32_t>(ctrl_mr_->length());
    }
  }
  if (auto s = tp.PostAllRecvs(); !s.ok()) return s;
  cs.endpoint = tp.qp()->local_endpoint().Serialize();
  cs.recv_buffers = tp.config().recv_buffers;
  cs.buffer_bytes = tp.config().buffer_bytes;
  cs.want_record_imm = want_ring_ && shared_->record_imm;
  return cs;
}

absl::Status RdmaConnection::FinishDial(Dialer& d) {
  if (absl::Now() > d.deadline()) {
    return absl::DeadlineExceededError(absl::StrCat(
        "RDMA setup with ", addr_, " did not finish within ",
        absl::FormatDuration(shared_->options.handshake_timeout)));
  }
  const Ready* ready = &d.ready_;
  const ServerSetup* ss = &d.ss_;
  std::shared_ptr<Transport> tp = d.tp_;
  auto refuse = [&](const absl::Status& s) {
    (void)d.ch_->WriteClose(s, absl::Now() + absl::Milliseconds(200));
    return s;
  };
  if (want_ring_ && ss->ring_bytes != ready->ring_bytes) {
    return absl::InvalidArgumentError(absl::StrCat("peer ", addr_, " announced a ring of ",
                                                   ready->ring_bytes, " bytes, then of ",
                                                   ss->ring_bytes));
  }
  auto ep = verbs::QpEndpoint::Parse(ss->endpoint);
  if (!ep.ok()) return ep.status();
  if (auto s = tp->qp()->Connect(*ep); !s.ok()) return s;
  const bool resumed = (ready->flags & kReadyResumed) != 0;
  bool new_ring = false;  // a new ring (new session, or resized): positions start at 0
  if (want_ring_) {
    {
      absl::MutexLock l(&mu_);
      new_ring = !producer_ || producer_->ring_bytes() != ss->ring_bytes ||
                 (!resumed && had_session_);
      if (new_ring && resumed && !records_.empty()) {
        // The server only resizes a drained ring, and we only ask with nothing in flight.
        shared_->counters.protocol_errors++;
        return refuse(absl::InvalidArgumentError(absl::StrCat(
            "peer ", addr_, " resized the ring with ", records_.size(), " records in flight")));
      }
    }
    // The poller's current sleep word, and the credit of a new ring, before the peer may
    // write newer ones: it writes ours only once it has our kSetupReady.
    __atomic_store_n(reinterpret_cast<uint64_t*>(ctrl_mr_->data() + kCtrlSleepOffset),
                     ss->sleep_word, __ATOMIC_RELEASE);
    // The record-imm count is the new link's (the old QP is dead: nothing more lands).
    __atomic_store_n(reinterpret_cast<uint64_t*>(ctrl_mr_->data() + kCtrlImmOffset),
                     uint64_t{0}, __ATOMIC_RELEASE);
    if (new_ring) {
      __atomic_store_n(reinterpret_cast<uint64_t*>(ctrl_mr_->data() + kCtrlCreditOffset),
                       uint64_t{0}, __ATOMIC_RELEASE);
      credit_seen_.store(0, std::memory_order_relaxed);
    }
  }
  if (auto s = d.ch_->WriteFrame(Header(FrameType::kMessage, kSetupReady), "",
                                 d.deadline());
      !s.ok()) {
    return s;
  }

  auto link = std::make_shared<Link>(weak_from_this(), tp, std::move(d.ch_));
  link->peer_recv_buffers = ss->recv_buffers;
  link->frag_bytes = std::min(ss->buffer_bytes, d.frag_buffer_bytes_) -
                     static_cast<uint32_t>(kSendHeaderBytes);
  link->ring_addr = ss->ring_addr;
  link->ring_rkey = ss->ring_rkey;
  link->ring_bytes = ss->ring_bytes;
  link->record_imm_credits = want_ring_ && shared_->record_imm ? ss->record_imm_credits : 0;

  bool remote_reset = false;
  {  // record_mu_ until the records are resent; the acks are delivered without it
    absl::MutexLock rl(&record_mu_);
    {
      absl::MutexLock l(&mu_);
      if (closed_ || shared_->stopping) return absl::CancelledError("connection closed");
      remote_reset = !resumed && had_session_;
      peer_name_ = d.peer();
      if (remote_reset) {
        // The peer lost the session: what the old one sent is gone on its side, and the
        // owner resends it (OnRemoteReset); messages never sent go in the new session,
        // numbered from 1 (msg/session/delivery.h). Under mu_ (clang cannot follow the
        // lambda).
        unacked_.DropForNewSession(
            &unsent_, [](const OutMsg& m) { return !m.ever_sent; },
            [&](const OutMsg& m) ABSL_NO_THREAD_SAFETY_ANALYSIS {
              flow_.Release(m.payload.size(), &shared_->bytes_in_flight);
            });
        out_seq_ = 0;
        for (auto& m : unsent_) m.seq = ++out_seq_;
        in_seq_ = 0;
        for (SentRecord& r : records_) UnpinLocked(&r);
        records_.clear();
        sent_records_.Clear();
        producer_.reset();
        ++session_epoch_;
      }
      if (want_ring_) {
        if (new_ring) {
          if (producer_ && resumed) {
            shared_->counters.ring_resizes++;
            spdlog::info("msgr rdma: connection {} to {}: ring resized from {} KiB to {} KiB",
                         id_, addr_, producer_->ring_bytes() >> 10, ss->ring_bytes >> 10);
          }
          if (!producer_ || !resumed) ring_initial_bytes_ = ss->ring_bytes;
          ring_at_max_ = false;
          producer_.emplace(ss->ring_bytes, ss->ring_next_seq);
          for (SentRecord& r : records_) UnpinLocked(&r);
          records_.clear();
          sent_records_.Clear();
          posted_seq_ = 0;
        } else if (resizing_) {
          // Asked for another size, got the same: the server's limit (or budget) for now.
          if (ring_request_ > ss->ring_bytes) ring_at_max_ = true;
          resize_not_before_ = absl::Now() + kRingResizeBackoff;
        }
        resizing_ = false;
        resize_faulting_ = false;
        grow_hint_ = 0;
        ring_request_ = ss->ring_bytes;
        if (d.new_mirror_) mirror_mr_ = std::move(d.new_mirror_);
        producer_->OnCredit(ready->ring_credit);
        sent_records_.OnCredit(ready->ring_credit, &acks_ready_);
        acks_pending_.store(!acks_ready_.empty(), std::memory_order_release);
        doorbelled_word_ = 0;  // a doorbell sent on the old link may have been lost with it
        max_record_payload_.store(std::min<size_t>(MaxRecordPayload(ss->ring_bytes),
                                                   shared_->options.max_message_bytes),
                                  std::memory_order_release);
      }
      // The server keeps the record imms' share of its receives apart (PROTOCOL.md).
      send_credits_ = ss->recv_buffers - ss->record_imm_credits;
      imm_owed_.store(false, std::memory_order_relaxed);
      credits_owed_ = 0;
      ack_sent_ = in_seq_;
      if (resumed) {
        if (absl::Status s = session::CheckPeerInSeq(ready->in_seq, out_seq_); !s.ok()) {
          shared_->counters.protocol_errors++;
          return s;
        }
        RequeueLocked(ready->in_seq);
      }
      AttachLinkLocked(link);
      shared_->counters.connections_open++;
      if (had_session_) shared_->counters.reconnects++;
      had_session_ = true;
      if (auto s = shared_->loop->Add(link); !s.ok()) {
        // Never driven: undone, and the attempt fails (OnConnectRefused, then a backoff).
        link_.reset();
        shared_->counters.connections_open--;
        tp->Kill();
        return s;
      }
      dialing_ = false;
      backoff_.Reset();
      // Keepalives and ring resizes from now on, on the completion thread's timers.
      liveness_.Heard(session::Liveness::Clock::now());
      next_keepalive_ = absl::Now() + shared_->options.keepalive_interval;
      shared_->loop->RunAt(next_keepalive_, [w = weak_from_this(), l = std::weak_ptr<Link>(link)] {
        if (auto c = w.lock()) c->Housekeep(l);
      });
      FlushLocked();
      cv_.SignalAll();
      spdlog::info(
          "msgr rdma: connection {} to {} ({}) {} on {}: registered {} KiB (transport {} KiB: "
          "{}x{} B receive + send pools; ctrl {} B; staging mirror {} KiB), ring {} KiB",
          id_, addr_, peer_name_.ToString(), resumed ? "resumed" : "established",
          shared_->ctx->device->attr().name,
          (tp->registered_bytes() + (ctrl_mr_ ? ctrl_mr_->length() : 0) +
           (mirror_mr_ ? mirror_mr_->length() : 0)) >> 10,
          tp->registered_bytes() >> 10, tp->config().recv_buffers, tp->config().buffer_bytes,
          ctrl_mr_ ? ctrl_mr_->length() : 0, mirror_mr_ ? mirror_mr_->length() >> 10 : 0,
          ss->ring_bytes >> 10);
    }
    if (want_ring_ && resumed) ResendRecords(ss->ring_next_seq);
  }
  RetireDeferred();
  DeliverAcks();
  if (remote_reset) Dispatch([](const ConnectionRef& c) {
    auto* self = static_cast<RdmaConnection*>(c.get());
    self->shared_->dispatcher->OnRemoteReset(c);
  });
  return absl::OkStatus();
}

// Connecting side, the completion thread's timer: keepalives (a peer that stops
// answering them -- its dispatcher is stuck, or it hangs -- is reset) and ring resizes
// (idle rings shrink on a check at least every few seconds), while `weak` is the link.
void RdmaConnection::Housekeep(const std::weak_ptr<Link>& weak) {
  const MessengerOptions& o = shared_->options;
  std::shared_ptr<Link> link = weak.lock();
  absl::Status why;
  bool keepalive = false;
  {
    absl::MutexLock l(&mu_);
    if (!link || link_ != link || closed_ || shared_->stopping) return;  // its fault redials
    const absl::Time now = absl::Now();
    ResizeIfWantedLocked(link, now);
    if (now >= next_keepalive_) {
      next_keepalive_ = now + o.keepalive_interval;
      why = liveness_.Check(session::Liveness::Clock::now(), o.keepalive_timeout,
                            absl::StrCat(peer_name_.ToString(), " at ", addr_));
      keepalive = why.ok();
    }
    if (why.ok()) {
      shared_->loop->RunAt(std::min(next_keepalive_, now + absl::Seconds(5)),
                           [w = weak_from_this(), weak] {
                             if (auto c = w.lock()) c->Housekeep(weak);
                           });
    }
  }
  if (!why.ok()) {
    if (!lossless_) return Reset(why, /*send_close=*/true);
    return Fault(link.get(), why);  // lossless: reconnect and resume
  }
  if (keepalive) {
    FrameHeader h;
    h.type = FrameType::kKeepalive;
    if (link->ch->WriteFrame(h, "", absl::Now() + absl::Milliseconds(100)).ok()) {
      shared_->counters.keepalives_sent++;
    }
  }
}

void RdmaConnection::FailAccept(SideChannel* ch, const AcceptState& st, const absl::Status& s) {
  spdlog::warn("msgr rdma: setup with {} at {} failed: {}", peer_name().ToString(),
               ch ? ch->peer() : addr_, s.ToString());
  // Tell the client why, with the code (it would otherwise see the channel close only).
  if (ch && !s.ok()) (void)ch->WriteClose(s, absl::Now() + absl::Milliseconds(200));
  if (!st.resumed) Reset(s, /*send_close=*/false);
}

bool RdmaConnection::AcceptBegin(SideChannel& ch, const AuthReply& auth, bool resumed,
                                 AcceptState* st) {
  st->auth = auth;
  st->resumed = resumed;
  st->deadline = absl::Now() + shared_->options.handshake_timeout;
  if (resumed) {
    absl::Status s;
    {
      absl::MutexLock l(&mu_);
      s = session::CheckPeerInSeq(auth.in_seq, out_seq_);
    }
    if (!s.ok()) {
      shared_->counters.protocol_errors++;
      FailAccept(&ch, *st, s);
      return false;
    }
  }
  // A ring session's receives go to one of the pollers' notifiers (PROTOCOL.md "Record
  // notifications"): the least loaded at its first accept, the same for every link after.
  std::shared_ptr<RdmaRingNotifier> notifier;
  std::shared_ptr<void> place;
  {
    absl::MutexLock l(&mu_);
    if (want_ring_ && !notifier_ && !shared_->notifiers.empty()) {
      const size_t n = shared_->notifiers.size();
      const size_t start = shared_->next_notifier.fetch_add(1);
      for (size_t i = 0; i < n; ++i) {
        const auto& cand = shared_->notifiers[(start + i) % n];
        if (notifier_ && cand->sessions() >= notifier_->sessions()) continue;
        if (auto p = cand->Reserve()) {
          notifier_ = cand;
          notifier_place_ = std::move(p);  // the previous pick's place is given back
        }
      }
    }
    notifier = notifier_;
    place = notifier_place_;
  }
  auto tp_or = Transport::Create(shared_->ctx, shared_->transport, shared_->budget.get(),
                                 peer_name().ToString(), notifier ? notifier->cq() : nullptr,
                                 place);
  if (!tp_or.ok()) {
    FailAccept(&ch, *st, tp_or.status());
    return false;
  }
  st->tp = *tp_or;

  Ready ready;
  ServerSetup& ss = st->ss;
  absl::Status ring_error;  // handled after mu_ is released: FailAccept takes it
  {
    std::shared_ptr<Link> old;
    {
      absl::MutexLock l(&mu_);
      if (closed_) return false;
      if (link_) FaultLocked(link_.get(), absl::AbortedError("peer reconnected"), &old);
      const size_t ring_size = shared_->RingSizeFor(auth.ring_bytes);
      if (!ring_ && want_ring_) {
        ring_error = NewRingLocked(ring_size, /*first_seq=*/1);
      } else if (ring_ && resumed && ring_size != ring_->bytes() && RingDrainedLocked()) {
        // The client asks for another size with nothing in flight (PROTOCOL.md, "Ring
        // sizes"): a new ring that goes on with the session's seqs from position 0. The
        // old one is revoked (its QP is gone) and freed once the poller lets go of it.
        std::shared_ptr<RdmaRecvRing> old = ring_;
        if (absl::Status s = NewRingLocked(ring_size, released_seq_); s.ok()) {
          old->Revoke();
          released_pos_ = 0;
          st->ring_resized = true;
          shared_->counters.ring_resizes++;
          spdlog::info("msgr rdma: session {} with {}: ring resized from {} KiB to {} KiB", id_,
                       peer_name_.ToString(), old->bytes() >> 10, ring_size >> 10);
        } else {
          spdlog::info("msgr rdma: session {} with {}: ring stays at {} KiB ({})", id_,
                       peer_name_.ToString(), old->bytes() >> 10, s.ToString());
          ring_error = ring_->Reregister();
        }
      } else if (ring_ && resumed) {
        // A new QP gets a new key: anything still in flight from the old one, or a stale
        // copy of the key, now finds the ring closed (PROTOCOL.md, "Faults").
        ring_error = ring_->Reregister();
        if (ring_error.ok()) shared_->counters.ring_reregistrations++;
      }
      ready.flags = resumed ? kReadyResumed : 0;
      ready.in_seq = in_seq_;
      ready.ring_bytes = ring_ ? ring_->bytes() : 0;
      ready.ring_credit = nack_barrier_.Clamp(released_pos_);
      if (ring_) {
        ss.ring_addr = reinterpret_cast<uint64_t>(ring_->region().addr());
        ss.ring_rkey = ring_->region().rkey();
        ss.ring_bytes = ring_->bytes();
        // Records published after the released position stay; the client rewrites the
        // rest into the same slots.
        ss.ring_next_pos = PublishedEndLocked(&ss.ring_next_seq);
      }
      ss.sleep_word = sleep_word_;
    }
    Retire(std::move(old));
  }
  if (!ring_error.ok()) {
    FailAccept(&ch, *st, ring_error);
    return false;
  }
  if (auto s = ch.WriteFrame(Header(FrameType::kReady), EncodeReady(ready), st->deadline);
      !s.ok()) {
    FailAccept(&ch, *st, s);
    return false;
  }
  return true;
}

bool RdmaConnection::AcceptSetup(SideChannel& ch, const DecodedFrame& f, AcceptState* st) {
  auto fail = [&](const absl::Status& s) {
    FailAccept(&ch, *st, s);
    return false;
  };
  if (auto s = Expect(f, FrameType::kMessage, kSetupClient, "RDMA setup"); !s.ok()) {
    return fail(s);
  }
  auto cs = DecodeClientSetup(f.payload);
  if (!cs.ok()) return fail(cs.status());
  if (want_ring_ && cs->ctrl_bytes < kCtrlRegionBytes) {
    return fail(absl::InvalidArgumentError("client control region too small"));
  }
  if (cs->recv_buffers < 4 || cs->buffer_bytes <= kSendHeaderBytes) {
    return fail(absl::InvalidArgumentError("client receive pool too small"));
  }
  st->cs = *cs;
  auto ep = verbs::QpEndpoint::Parse(cs->endpoint);
  if (!ep.ok()) return fail(ep.status());
  Transport& tp = *st->tp;
  ServerSetup& ss = st->ss;
  std::shared_ptr<RdmaRingNotifier> notifier;
  std::shared_ptr<RdmaRecvRing> ring;
  {
    absl::MutexLock l(&mu_);
    notifier = notifier_;
    ring = ring_;
  }
  if (notifier && !tp.own_recv_cq()) {
    // Before the QP can receive: its receive completions are the notifier's from the
    // first one on. Half the receives may carry record imms if the client announces.
    const bool announced = ring && cs->want_record_imm;
    ss.record_imm_credits = announced ? tp.config().recv_buffers / 2 : 0;
    st->imm_count = std::make_shared<ImmCount>(ss.record_imm_credits);
    if (ring) ring->SetNotifier(notifier.get(), announced);
    notifier->Attach(tp.qp()->qp_num(), st->tp, announced ? ring.get() : nullptr,
                     st->imm_count);
  }
  if (auto s = tp.PostAllRecvs(); !s.ok()) return fail(s);
  if (auto s = tp.qp()->Connect(*ep); !s.ok()) return fail(s);
  ss.endpoint = tp.qp()->local_endpoint().Serialize();
  ss.recv_buffers = tp.config().recv_buffers;
  ss.buffer_bytes = tp.config().buffer_bytes;
  if (auto s = ch.WriteFrame(Header(FrameType::kMessage, kSetupServer), EncodeServerSetup(ss),
                             st->deadline);
      !s.ok()) {
    return fail(s);
  }
  return true;
}

void RdmaConnection::AcceptFinish(std::unique_ptr<SideChannel> ch, const DecodedFrame& f,
                                  AcceptState* st) {
  if (auto s = Expect(f, FrameType::kMessage, kSetupReady, "RDMA ready"); !s.ok()) {
    return FailAccept(ch.get(), *st, s);
  }
  const bool resumed = st->resumed;
  const ClientSetup& cs = st->cs;
  std::shared_ptr<Transport> tp = st->tp;
  auto link = std::make_shared<Link>(weak_from_this(), tp, std::move(ch));
  link->peer_recv_buffers = cs.recv_buffers;
  link->frag_bytes = std::min(cs.buffer_bytes, tp->config().buffer_bytes) -
                     static_cast<uint32_t>(kSendHeaderBytes);
  link->ctrl_addr = cs.ctrl_addr;
  link->ctrl_rkey = cs.ctrl_rkey;
  link->record_imm_credits = st->ss.record_imm_credits;
  link->imm_count = st->imm_count;
  std::shared_ptr<RdmaRecvRing> ring;
  {
    absl::MutexLock l(&mu_);
    if (closed_ || shared_->stopping) return;
    send_credits_ = cs.recv_buffers;
    credits_owed_ = 0;
    ack_sent_ = in_seq_;
    if (resumed) RequeueLocked(st->auth.in_seq);  // in_seq checked on arrival
    AttachLinkLocked(link);
    if (link->imm_count) notifier_->SetLink(tp->qp()->qp_num(), link);
    shared_->counters.connections_open++;
    if (resumed) shared_->counters.reconnects++;
    if (auto s = shared_->loop->Add(link); !s.ok()) {
      std::shared_ptr<Link> retired;
      FaultLocked(link.get(), s, &retired);
      return;
    }
    FlushLocked();
    // Publish the credit on the new link: RequeueLocked may just have lifted a nack hold
    // after READY carried the held-back value, and nothing else might post it.
    credit_dirty_ = true;
    PostCreditLocked();
    ring = ring_;
    spdlog::info("msgr rdma: session {} with {} at {} {} on {}: registered {} KiB "
                 "(transport {} KiB: {}x{} B receive + send pools; ring {} KiB)",
                 id_, peer_name_.ToString(), addr_, resumed ? "resumed" : "accepted",
                 shared_->ctx->device->attr().name,
                 (tp->registered_bytes() + (ring_ ? ring_->bytes() : 0)) >> 10,
                 tp->registered_bytes() >> 10, tp->config().recv_buffers,
                 tp->config().buffer_bytes, ring_ ? ring_->bytes() >> 10 : 0);
    const bool first = !accepted_;
    accepted_ = true;
    if (!first && st->ring_resized) {
      Dispatch([ring](const ConnectionRef& c) {
        static_cast<RdmaConnection*>(c.get())->shared_->dispatcher->OnRingAttached(c, ring);
      });
      return;
    }
    if (!first) {
      if (ring_) ring_->Signal();
      return;
    }
  }
  Dispatch([ring](const ConnectionRef& c) {
    Dispatcher* d = static_cast<RdmaConnection*>(c.get())->shared_->dispatcher;
    d->OnAccept(c);
    if (ring) d->OnRingAttached(c, ring);
  });
}

}  // namespace msgr::rdma

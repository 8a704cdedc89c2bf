// RdmaConnection: public API, message queues and flow control, faults and resets.
#include "msg/rdma/rdma_connection.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {

// ---------------------------------------------------------------- Link (loop thread)

bool Link::OnCompletions(const verbs::Completion* wc, int n) {
  auto c = conn_.lock();
  if (!c) return false;
  c->HandleCompletions(this, wc, n);
  for (int i = 0; i < n; ++i) {
    if ((wc[i].wr_id & kRecvWrBit) != 0) return true;
  }
  // A completed record write brings its acknowledgement soon: worth a spin, unless the
  // application polls for it itself.
  return c->awaiting_acks() && !c->app_polling();
}

void Link::OnCqError() {
  if (auto c = conn_.lock()) c->Fault(this, absl::InternalError("RDMA completion queue overrun"));
}

bool Link::OnPoll() {
  auto c = conn_.lock();
  // awaiting_acks() first: one load, where app_polling() reads the clock on every spin.
  return c && c->awaiting_acks() && !c->app_polling() && c->PollAcks();
}

bool Link::awaiting() const {
  auto c = conn_.lock();
  return c && c->awaiting_acks();
}

bool Link::ArmWakeup() {
  auto c = conn_.lock();
  return c && c->ArmCreditWakeup();
}

void Link::OnSideReadable() {
  if (auto c = conn_.lock()) {
    c->HandleSideReadable(this);
  }
}

// ---------------------------------------------------------------- construction

RdmaConnection::RdmaConnection(std::shared_ptr<RdmaShared> shared, std::string addr,
                               const ConnectOptions& options)
    : shared_(std::move(shared)),
      id_(shared_->next_conn_id++),
      outgoing_(true),
      addr_(std::move(addr)),
      lossless_(options.policy.lossless),
      want_ring_(options.want_ring),
      expect_peer_(options.peer),
      cookie_(NewCookie()) {}

RdmaConnection::RdmaConnection(std::shared_ptr<RdmaShared> shared, EntityName peer,
                               std::string addr, bool lossless, bool want_ring, uint64_t cookie)
    : shared_(std::move(shared)),
      id_(shared_->next_conn_id++),
      outgoing_(false),
      addr_(std::move(addr)),
      lossless_(lossless),
      want_ring_(want_ring),
      cookie_(cookie) {
  peer_name_ = peer;
}

RdmaConnection::~RdmaConnection() {
  absl::MutexLock l(&mu_);
  flow_.Clear(&shared_->bytes_in_flight);
}

EntityName RdmaConnection::peer_name() const {
  absl::MutexLock l(&mu_);
  return peer_name_;
}

bool RdmaConnection::is_connected() const {
  absl::MutexLock l(&mu_);
  return link_ != nullptr && !closed_;
}

SessionInfo RdmaConnection::Info() const {
  SessionInfo info;
  info.instance = cookie_;
  info.peer_instance = peer_instance_.load();
  info.backend = "rdma";
  info.peer_addr = addr_;
  info.outgoing = outgoing_;
  info.lossless = lossless_;
  info.age = absl::Now() - created_;
  std::shared_ptr<RdmaRecvRing> ring;
  uint64_t from_pos = 0, from_seq = 0;
  {
    absl::MutexLock l(&mu_);
    info.peer = peer_name_;
    if (closed_) {
      info.state = "closed";
    } else if (link_ != nullptr) {
      info.state = "connected";
    } else {
      info.state = outgoing_ ? "connecting" : "standby";
    }
    ring = ring_;
    from_pos = released_pos_;
    from_seq = released_seq_;
    info.records_received = writes_released_;
  }
  if (ring) {
    // Records reach the ring with no CPU here (one-sided WRITEs): what is in use is what
    // the headers past the released position say is published.
    uint64_t next_seq = 0, writes = 0;
    info.ring_bytes = ring->bytes();
    info.ring_used_bytes = ScanPublished(*ring, from_pos, from_seq, &next_seq, &writes) - from_pos;
    info.records_received += writes;
  }
  return info;
}

bool RdmaConnection::closed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

size_t RdmaConnection::max_record_payload() const {
  return max_record_payload_.load(std::memory_order_acquire);
}

void RdmaConnection::Dispatch(std::function<void(const ConnectionRef&)> fn) {
  if (shared_->stopping) return;
  shared_->workers->Post(id_, [self = shared_from_this(), fn = std::move(fn)] {
    if (self->shared_->stopping) return;
    fn(self);
  });
}

// ---------------------------------------------------------------- messages

absl::Status RdmaConnection::Send(Message m) { return Enqueue(std::move(m), true); }
absl::Status RdmaConnection::TrySend(Message m) { return Enqueue(std::move(m), false); }

absl::Status RdmaConnection::Enqueue(Message m, bool block) {
  const MessengerOptions& o = shared_->options;
  if (absl::Status s = session::CheckOutgoingMessage(m, o); !s.ok()) return s;
  absl::MutexLock l(&mu_);
  bool waited = false;
  for (;;) {
    if (closed_ || shared_->stopping) {
      return session::ClosedError(addr_);
    }
    if (flow_.Admits(m.payload.size(), shared_->bytes_in_flight.load(), o)) break;
    if (!block) return flow_.Refusal(addr_, o);
    if (!waited) shared_->counters.throttle_waits++;
    waited = true;
    cv_.WaitWithTimeout(&mu_, absl::Milliseconds(50));  // messenger-wide limit: re-check
  }
  EnqueueLocked(std::move(m));
  FlushLocked();
  return absl::OkStatus();
}

void RdmaConnection::EnqueueLocked(Message m) {
  OutMsg out;
  out.seq = ++out_seq_;
  out.type = m.type;
  out.payload = std::move(m.payload);
  flow_.Add(out.payload.size(), &shared_->bytes_in_flight);
  unsent_.push_back(std::move(out));
}

void RdmaConnection::AckLocked(uint64_t ack_seq) {
  bool lifted = false;
  // The callback runs inside Ack, under mu_ (held here): clang cannot follow a lambda.
  const size_t freed = unacked_.Ack(ack_seq, [&](const OutMsg& m) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (m.type == kRecordNackType) lifted |= nack_barrier_.LiftOldest();
    flow_.Release(m.payload.size(), &shared_->bytes_in_flight);
  });
  if (freed > 0) cv_.SignalAll();
  if (lifted) {
    credit_dirty_ = true;
    PostCreditLocked();
  }
}

void RdmaConnection::RequeueLocked(uint64_t peer_in_seq) {
  AckLocked(peer_in_seq);
  // Messages the peer never got go first again, in order, from their first fragment.
  shared_->counters.resends += unacked_.RequeueInto(&unsent_);
  for (auto& m : unsent_) m.sent = 0;
}

void RdmaConnection::DropQueuesLocked() {
  flow_.Clear(&shared_->bytes_in_flight);
  unsent_.clear();
  unacked_.Clear();
  for (SentRecord& r : records_) UnpinLocked(&r);  // released once the QP is dead
  records_.clear();
  cv_.SignalAll();
}

// ---------------------------------------------------------------- faults

void RdmaConnection::Fault(Link* link, const absl::Status& why) {
  std::shared_ptr<Link> retired;
  {
    absl::MutexLock l(&mu_);
    FaultLocked(link, why, &retired);
  }
  Retire(std::move(retired));
}

void RdmaConnection::FaultLocked(Link* link, const absl::Status& why,
                                 std::shared_ptr<Link>* retired) {
  if (link_.get() != link || link == nullptr) return;  // an old incarnation
  *retired = std::move(link_);
  link_.reset();
  (*retired)->tp->Kill();
  shared_->counters.qp_faults++;
  shared_->counters.connections_open--;
  reasm_active_ = false;
  reasm_.clear();
  cv_.SignalAll();
  if (closed_) return;
  if (!outgoing_) link_lost_at_ = absl::Now();
  spdlog::info("msgr rdma: connection {} to {} ({}) faulted: {}", id_, addr_,
               peer_name_.ToString(), why.ToString());
  if (outgoing_ && resizing_ && !resize_faulting_) {
    // A resize was draining the ring: given up for a while (writers go on once resumed).
    resizing_ = false;
    grow_hint_ = 0;
    resize_not_before_ = absl::Now() + kRingResizeBackoff;
  }
  if (lossless_ && outgoing_) {
    // Reconnect and resume (the server keeps the session for session_reconnect_timeout).
    shared_->loop->RunAt(absl::Now(), [w = weak_from_this()] {
      if (auto c = w.lock()) c->Dial();
    });
  }
  if (!lossless_) {
    // Lossy: the session is over.
    closed_ = true;
    DropQueuesLocked();
    shared_->counters.resets++;
    if (ring_) ring_->Revoke();
    auto self = shared_from_this();
    shared_->workers->Post(id_, [self, why] {
      if (!self->shared_->stopping) self->shared_->dispatcher->OnReset(self, why);
    });
  }
}

void RdmaConnection::Retire(std::shared_ptr<Link> link) {
  ReleaseUnpinned();
  if (!link) return;
  link->ch->Shutdown();
  if (shared_->loop) shared_->loop->Remove(link.get());
  shared_->Linger(link->tp, weak_from_this());  // its QP's async events stay readable
  if (!outgoing_ && closed()) {
    absl::MutexLock h(&shared_->hooks_mu);
    if (shared_->forget_session) shared_->forget_session(this);
  }
}

void RdmaConnection::Reset(const absl::Status& why, bool send_close) {
  std::shared_ptr<Link> retired;
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    DropQueuesLocked();
    if (link_) {
      retired = std::move(link_);  // nobody posts on it any more
      link_.reset();
      shared_->counters.connections_open--;
    }
    if (ring_) ring_->Revoke();
    shared_->counters.resets++;
    spdlog::info("msgr rdma: connection {} to {} ({}) reset: {}", id_, addr_,
                 peer_name_.ToString(), why.ToString());
  }
  if (retired) {
    // Outside mu_ (a peer that does not read may hold it up to 200 ms), and before the QP
    // fails: the peer reads the CLOSE before it would fault on its own QP.
    if (send_close) {
      FrameHeader h;
      h.type = FrameType::kClose;
      (void)retired->ch->WriteFrame(h, std::string(why.message()),
                                    absl::Now() + absl::Milliseconds(200));
    }
    retired->tp->Kill();
  }
  Retire(std::move(retired));
  {
    absl::MutexLock h(&shared_->hooks_mu);
    if (shared_->forget_session) shared_->forget_session(this);
  }
  auto self = shared_from_this();
  if (!shared_->stopping) {
    shared_->workers->Post(id_, [self, why] {
      if (!self->shared_->stopping) self->shared_->dispatcher->OnReset(self, why);
    });
  }
}

void RdmaConnection::ExpireIfGone(absl::Time now) {
  const absl::Duration timeout = shared_->options.session_reconnect_timeout;
  {
    absl::MutexLock l(&mu_);
    if (outgoing_ || !lossless_ || closed_ || link_ || now - link_lost_at_ < timeout) return;
  }
  // A resume that attaches a link right now loses it here: the peer then finds the
  // session ended, as it would have a moment later.
  Reset(session::ReconnectTimeoutError(absl::StrCat(peer_name().ToString(), " at ", addr_),
                                      timeout),
        /*send_close=*/false);
}

void RdmaConnection::AttachLinkLocked(std::shared_ptr<Link> link) {
  recent_tps_.push_back(link->tp);
  if (recent_tps_.size() > kRecentQps) recent_tps_.pop_front();
  link_ = std::move(link);
  // A wake-up asked for (or owed) on the old link died with it.
  wakeup_asked_ = false;
  credit_wakeup_wanted_ = false;
}

bool RdmaConnection::OnQpEvent(const verbs::AsyncEvent& ev) {
  std::shared_ptr<Link> current;
  bool closed = false;
  {
    absl::MutexLock l(&mu_);
    const bool ours = std::any_of(recent_tps_.begin(), recent_tps_.end(), [&](const auto& w) {
      auto tp = w.lock();
      return tp && tp->qp()->qp_num() == ev.qp_num;
    });
    if (!ours) return false;
    closed = closed_;
    if (link_ && link_->tp->qp()->qp_num() == ev.qp_num) current = link_;
  }
  if (ev.type == verbs::AsyncEventType::kQpAccessError) {
    shared_->counters.peer_access_violations++;
    shared_->counters.protocol_errors++;
    const absl::Status why = absl::PermissionDeniedError(absl::StrCat(
        peer_name().ToString(), " at ", addr_,
        " made an RDMA access outside the memory it was given (QP ", ev.qp_num, ": ",
        verbs::AsyncEventName(ev.type), "); session cut off"));
    spdlog::error("msgr rdma: connection {}: {}{}", id_, why.ToString(),
                  closed ? " (the session had already ended)" : "");
    if (!outgoing_) shared_->Ban(peer_name());  // an OSD does not serve it for a while
    if (closed) return true;
    // Here and now, so that the failed completions that follow cannot fault the session
    // into a resume first.
    Reset(why, /*send_close=*/true);
  } else if (closed) {
    return true;
  } else if (current) {
    Fault(current.get(), absl::InternalError(absl::StrCat(
                             "QP ", ev.qp_num, ": ", verbs::AsyncEventName(ev.type))));
  }
  return true;
}

void RdmaConnection::MarkDown() {
  Reset(session::MarkedDownError(addr_), /*send_close=*/true);
}

void RdmaConnection::Stop() {
  std::shared_ptr<Link> retired;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
    DropQueuesLocked();
    if (link_) {
      retired = std::move(link_);
      link_.reset();
      retired->tp->Kill();
      shared_->counters.connections_open--;
    }
    if (ring_) ring_->Revoke();
  }
  Retire(std::move(retired));
}

void RdmaConnection::HandleSideReadable(Link* link) {
  const absl::Status error = link->ch->DrainFrames([&](const DecodedFrame& f) {
    if (f.header.type == FrameType::kClose) {
      {
        absl::MutexLock l(&mu_);
        if (link_.get() != link) return false;
      }
      Reset(absl::UnavailableError(
                absl::StrCat("peer ", addr_, " closed the session: ", f.payload)),
            /*send_close=*/false);
      return false;
    }
    if (f.header.type == FrameType::kKeepalive) {
      // Answered from the dispatch worker: a peer whose dispatcher is stuck stops answering.
      std::weak_ptr<Link> weak;
      {
        absl::MutexLock l(&mu_);
        if (link_.get() != link) return false;
        weak = link_;
      }
      Dispatch([weak](const ConnectionRef&) {
        if (auto l = weak.lock()) {
          FrameHeader h;
          h.type = FrameType::kKeepaliveAck;
          (void)l->ch->WriteFrame(h, "", absl::Now() + absl::Milliseconds(100));
        }
      });
      return true;
    }
    if (f.header.type == FrameType::kKeepaliveAck) {
      absl::MutexLock l(&mu_);
      if (link_.get() == link) liveness_.Heard(session::Liveness::Clock::now());
      return true;
    }
    shared_->counters.protocol_errors++;
    Fault(link, absl::InvalidArgumentError(absl::StrCat(
                    "unexpected ", FrameTypeName(f.header.type), " frame on side channel")));
    return false;
  });
  if (error.ok()) return;
  {
    absl::MutexLock l(&mu_);
    if (link_.get() != link) return;
  }
  if (!absl::IsUnavailable(error)) shared_->counters.protocol_errors++;
  Fault(link, absl::UnavailableError(
                  absl::StrCat("side channel to ", addr_, " lost: ", error.message())));
}

}  // namespace msgr::rdma

// TcpConnection: public API (any thread) and the session state machine (strand).
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include <cstring>
#include <future>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/base/crc32c.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
// How long a reset waits for its CLOSE frame to be written before closing regardless.
constexpr absl::Duration kCloseLinger = absl::Seconds(1);
}  // namespace

TcpConnection::TcpConnection(TcpMessenger* msgr, Side side, Policy policy, std::string addr,
                             bool want_ring, uint64_t cookie, EntityName peer)
    : msgr_(msgr),
      shared_(msgr->shared()),
      side_(side),
      policy_(policy),
      want_ring_(want_ring),
      cookie_(cookie),
      strand_(asio::make_strand(msgr->io())) {
  absl::MutexLock l(&mu_);
  peer_addr_ = std::move(addr);
  peer_name_ = peer;
}

TcpConnection::~TcpConnection() = default;

EntityName TcpConnection::peer_name() const {
  absl::MutexLock l(&mu_);
  return peer_name_;
}

std::string TcpConnection::peer_addr() const {
  absl::MutexLock l(&mu_);
  return peer_addr_;
}

SessionInfo TcpConnection::Info() const {
  SessionInfo info;
  info.instance = cookie_;
  info.peer_instance = peer_instance_.load();
  info.backend = "tcp";
  info.outgoing = side_ == Side::kClient;
  info.lossless = policy_.lossless;
  info.records_received = rx_records_.load(std::memory_order_relaxed);
  info.age = absl::Now() - created_;
  info.ring_bytes = rx_ring_bytes_.load();
  absl::MutexLock l(&mu_);
  info.peer = peer_name_;
  info.peer_addr = peer_addr_;
  if (closed_) {
    info.state = "closed";
  } else if (connected_.load()) {
    info.state = "connected";
  } else {
    info.state = side_ == Side::kClient ? "connecting" : "standby";
  }
  if (info.ring_bytes > 0) {
    // Published after released, read in this order: the reader only moves published on,
    // the owner moves released (under mu_) never past it.
    const uint64_t published = rx_published_pos_.load(std::memory_order_acquire);
    info.ring_used_bytes = published > released_pos_ ? published - released_pos_ : 0;
  }
  return info;
}

std::string TcpConnection::PeerDesc() const {
  absl::MutexLock l(&mu_);
  if (side_ == Side::kClient && !had_session_) return absl::StrCat("peer at ", peer_addr_);
  return absl::StrCat(peer_name_.ToString(), " at ", peer_addr_);
}

// ---------------------------------------------------------------- public API

absl::Status TcpConnection::Send(Message m) { return EnqueueMessage(std::move(m), /*block=*/true); }

absl::Status TcpConnection::TrySend(Message m) {
  return EnqueueMessage(std::move(m), /*block=*/false);
}

absl::Status TcpConnection::EnqueueMessage(Message m, bool block) {
  if (absl::Status s = session::CheckOutgoingMessage(m, shared_->options); !s.ok()) return s;
  auto f = NewOutFrame();
  f->type = FrameType::kMessage;
  f->msg_type = m.type;
  f->payload = std::move(m.payload);
  f->payload_crc = Crc32c(0, f->payload.data(), f->payload.size());
  return Enqueue(std::move(f), block);
}

absl::Status TcpConnection::Enqueue(OutFramePtr f, bool block) {
  const MessengerOptions& o = shared_->options;
  const uint64_t size = f->wire_bytes();
  bool waited = false;
  bool write_inline;
  {
    absl::MutexLock l(&mu_);
    for (;;) {
      if (closed_ || shared_->stopping) {
        return session::ClosedError(peer_addr_);
      }
      if (flow_.Admits(size, shared_->bytes_in_flight.load(), o)) break;
      if (!block) return flow_.Refusal(peer_addr_, o);
      if (!waited) {
        waited = true;
        shared_->counters.throttle_waits++;
      }
      // Acks on this connection signal cv_; the messenger-wide limit is polled.
      cv_.WaitWithTimeout(&mu_, absl::Milliseconds(10));
    }
    flow_.Add(size, &shared_->bytes_in_flight);
    out_queue_.push_back(std::move(f));
    write_inline = InlineWriteLocked();
  }
  WriteQueued(write_inline);
  return absl::OkStatus();
}

absl::Status TcpConnection::WriteRecord(const RecordDesc& desc, std::string_view payload,
                                        absl::Duration timeout) {
  return WriteRecordShared(desc, payload, nullptr, timeout);
}

absl::Status TcpConnection::WriteRecordShared(const RecordDesc& desc, std::string_view payload,
                                              std::shared_ptr<const void> owner,
                                              absl::Duration timeout) {
  if (desc.oid.empty() || desc.oid.size() > kMaxOidBytes) {
    return absl::InvalidArgumentError(
        absl::StrFormat("record oid must be 1..%d bytes, got %d", kMaxOidBytes, desc.oid.size()));
  }
  if (!want_ring_) {
    return absl::FailedPreconditionError(
        "WriteRecord on a connection opened without ConnectOptions::want_ring");
  }
  auto f = NewOutFrame();
  f->type = FrameType::kRingRecord;
  if (owner) {
    f->body_owner = std::move(owner);  // kept until acknowledged: no copy
    f->body_view = payload;
  } else {
    f->payload.assign(payload.data(), payload.size());
    shared_->counters.payload_bytes_copied_tx += payload.size();
  }
  const uint32_t record_crc = session::OutgoingRecordCrc(
      desc, desc.oid.data(), payload.data(), payload.size(), &shared_->counters);
  const size_t record_bytes = RecordBytes(desc.oid.size(), payload.size());
  const absl::Time deadline = absl::Now() + timeout;
  bool waited = false;
  bool write_inline;
  {
    absl::MutexLock l(&mu_);
    for (;;) {
      if (closed_ || shared_->stopping) {
        return session::ClosedError(peer_addr_);
      }
      if (producer_) {
        const size_t max = max_record_payload_.load();
        if (payload.size() > max) {
          return absl::InvalidArgumentError(absl::StrFormat(
              "record payload of %d bytes is over max_record_payload() = %d; split it",
              payload.size(), max));
        }
        if (auto p = producer_->Reserve(record_bytes)) {
          RingPrefix pre;
          pre.ring_seq = p->seq;
          pre.tid = desc.tid;
          pre.object_offset = desc.object_offset;
          pre.ring_offset = static_cast<uint32_t>(p->offset);
          pre.data_len = static_cast<uint32_t>(payload.size());
          pre.record_crc = record_crc;
          pre.oid_len = static_cast<uint16_t>(desc.oid.size());
          pre.record_flags = desc.flags;
          EncodeRingPrefix(pre, f->head());
          std::memcpy(f->head() + kRingPrefixBytes, desc.oid.data(), desc.oid.size());
          f->head_len = static_cast<uint16_t>(kRingPrefixBytes + desc.oid.size());
          f->payload_crc = Crc32c(0, f->head(), kRingPrefixBytes);
          f->ring_position = p->end_position;
          sent_records_.Add(desc.tid, p->end_position);
          break;
        }
      }
      if (absl::Now() >= deadline) {
        if (!producer_) {
          return absl::DeadlineExceededError(absl::StrCat("no ring from ", peer_addr_, " within ",
                                                          absl::FormatDuration(timeout),
                                                          " (handshake not finished)"));
        }
        return absl::DeadlineExceededError(absl::StrFormat(
            "no ring credit from %s within %s: %d of %d ring bytes free, record needs %d "
            "(the consumer has not released space)",
            peer_addr_, absl::FormatDuration(timeout), producer_->free_bytes(),
            producer_->ring_bytes(), record_bytes));
      }
      if (!waited && producer_) {
        waited = true;
        shared_->counters.ring_credit_waits++;
      }
      cv_.WaitWithDeadline(&mu_, deadline);
    }
    out_queue_.push_back(std::move(f));
    write_inline = InlineWriteLocked();
  }
  WriteQueued(write_inline);
  return absl::OkStatus();
}

bool TcpConnection::closed() const {
  absl::MutexLock l(&mu_);
  return closed_;
}

void TcpConnection::MarkDown() {
  {
    absl::MutexLock l(&mu_);
    if (closed_) return;
    closed_ = true;
    markdown_ = true;
    DropQueuesLocked();
    cv_.SignalAll();
  }
  if (shared_->stopping) return;
  asio::post(strand_, [self = shared_from_this()] {
    self->Reset(session::MarkedDownError(self->peer_addr()), /*send_close=*/true);
  });
}

void TcpConnection::ResetAsync(absl::Status why) {
  if (shared_->stopping) return;
  asio::post(strand_, [self = shared_from_this(), why] { self->Reset(why, /*send_close=*/true); });
}

void TcpConnection::ResetAndWait(absl::Status why) {
  if (shared_->stopping) return;
  auto done_ptr = std::make_shared<std::promise<void>>();
  std::future<void> reset = done_ptr->get_future();
  asio::post(strand_, [self = shared_from_this(), why, done_ptr] {
    self->Reset(why, /*send_close=*/true);
    done_ptr->set_value();
  });
  // A messenger shutting down meanwhile may drop the posted reset: stop waiting then.
  while (reset.wait_for(std::chrono::milliseconds(100)) != std::future_status::ready) {
    if (shared_->stopping) return;
  }
}

void TcpConnection::SayGoodbye() {
  asio::post(strand_, [self = shared_from_this()] {
    self->Reset(absl::CancelledError("client messenger shutting down"), /*send_close=*/true);
  });
}

void TcpConnection::WriteQueued(bool write_inline) {
  if (write_inline) {
    WriteNow();
  } else {
    Kick();
  }
}

bool TcpConnection::InlineWriteLocked() const {
  return sent_.size() + out_queue_.size() <= kInlineMaxPending;
}

void TcpConnection::Kick() {
  if (kick_pending_.exchange(true)) return;
  asio::post(strand_, [self = shared_from_this()] {
    self->kick_pending_ = false;
    self->Flush();
  });
}

// ---------------------------------------------------------------- accounting

void TcpConnection::ReleaseAccountingLocked(const OutFrame& f) {
  if (f.type != FrameType::kMessage || closed_) return;
  flow_.Release(f.wire_bytes(), &shared_->bytes_in_flight);
}

void TcpConnection::DropQueuesLocked() {
  flow_.Clear(&shared_->bytes_in_flight);
  out_queue_.clear();
  sent_.Clear();
}

absl::Status TcpConnection::Requeue(uint64_t peer_in_seq) {
  absl::MutexLock l(&mu_);
  if (absl::Status s = session::CheckPeerInSeq(peer_in_seq, out_seq_); !s.ok()) return s;
  PopAckedLocked(peer_in_seq);
  shared_->counters.resends += sent_.RequeueInto(&out_queue_);
  cv_.SignalAll();
  return absl::OkStatus();
}

// ---------------------------------------------------------------- state machine

void TcpConnection::CloseSocket() {
  {
    absl::MutexLock l(&mu_);
    wr_open_ = false;
    wr_fd_ = -1;
    // An inline writer may be in sendmsg on this socket: the descriptor must not be
    // closed (and reused) under it, nor its frames requeued while it reads them.
    while (inline_active_) inline_cv_.Wait(&mu_);
    wr_busy_ = false;  // a write in progress on the old socket is abandoned
    ++gen_;
    frames_on_socket_ = 0;
    ack_sent_ = 0;  // the next socket's first frame acks again (harmless if redundant)
    ack_due_ = false;
    ready_payload_.reset();
    send_keepalive_ = send_keepalive_ack_ = false;
    tx_.reset();  // a secure session's keys are per socket: the next one derives new ones
  }
  rx_.reset();
  pending_tx_.reset();
  rx_header_bytes_ = kFrameHeaderBytes;
  rx_prefix_bytes_ = kRingPrefixBytes;
  if (socket_) {
    boost::system::error_code ec;
    socket_->shutdown(asio::ip::tcp::socket::shutdown_both, ec);
    socket_->close(ec);
    socket_.reset();
  }
  if (open_) shared_->counters.connections_open--;
  open_ = false;
  connected_ = false;
  rx_buf_.Clear();
  rx_phase_ = RxPhase::kHeader;
  if (mirror_saved_) {  // a record was being read into the ring: forget its slot
    mirror_ = mirror_saved_;
    mirror_saved_.reset();
  }
}

void TcpConnection::ProtocolFault(const absl::Status& why) {
  if (absl::IsDataLoss(why)) {
    shared_->counters.crc_errors++;
  } else {
    shared_->counters.protocol_errors++;
  }
  spdlog::error("msgr tcp: {}: {}; closing the connection", PeerDesc(), why.ToString());
  Fault(why);
}

void TcpConnection::Fault(const absl::Status& why) {
  if (reset_done_) return;
  CloseSocket();
  if (!policy_.lossless) {
    Reset(why, /*send_close=*/false);
    return;
  }
  if (shared_->stopping) return;
  if (side_ == Side::kClient) {
    spdlog::warn("msgr tcp: lossless connection to {} faulted ({}); reconnecting", PeerDesc(),
                 why.ToString());
    ScheduleReconnect();
  } else {
    spdlog::info(
        "msgr tcp: lossless session with {} lost its socket ({}); waiting up to {} for the "
        "client to reconnect",
        PeerDesc(), why.ToString(),
        absl::FormatDuration(shared_->options.session_reconnect_timeout));
    ArmTimer(shared_->options.session_reconnect_timeout, &TcpConnection::OnReconnectTimeout);
  }
}

void TcpConnection::ArmTimer(absl::Duration after, void (TcpConnection::*fn)(uint64_t gen)) {
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(msgr_->io());
  timer_->expires_after(absl::ToChronoNanoseconds(after));  // cancels the previous wait
  timer_->async_wait(asio::bind_executor(
      strand_, [self = shared_from_this(), gen = gen_, fn](boost::system::error_code ec) {
        if (!ec) ((*self).*fn)(gen);
      }));
}

void TcpConnection::OnReconnectTimeout(uint64_t gen) {
  if (gen != gen_ || open_ || reset_done_) return;  // the client came back meanwhile
  Reset(session::ReconnectTimeoutError(PeerDesc(), shared_->options.session_reconnect_timeout),
        /*send_close=*/false);
}

void TcpConnection::Reset(const absl::Status& why, bool send_close) {
  if (reset_done_) return;
  reset_done_ = true;
  {
    absl::MutexLock l(&mu_);
    closed_ = true;
    DropQueuesLocked();
    if (send_close) close_reason_ = std::string(why.message());
    if (close_reason_.empty() && send_close) close_reason_ = "closed";
    cv_.SignalAll();
  }
  shared_->counters.resets++;
  if (timer_) timer_->cancel();
  if (send_close && open_ && socket_) {
    Flush();  // writes CLOSE (after any write in progress), then closes the socket
    // A peer that stopped reading would keep that write, and the socket, forever.
    ArmTimer(kCloseLinger, &TcpConnection::OnCloseLinger);
  } else {
    CloseSocket();
  }
  if (shared_->stopping) return;
  spdlog::info("msgr tcp: connection to {} reset: {}", PeerDesc(), why.ToString());
  msgr_->Forget(this);
  shared_->dispatcher->OnReset(shared_from_this(), why);
}

void TcpConnection::OnCloseLinger(uint64_t gen) {
  if (gen == gen_ && socket_) CloseSocket();
}

void TcpConnection::StartKeepalive() {
  ArmTimer(shared_->options.keepalive_interval, &TcpConnection::OnKeepaliveTimer);
}

void TcpConnection::OnKeepaliveTimer(uint64_t gen) {
  if (gen != gen_ || !open_ || reset_done_) return;
  if (absl::Status why =
          liveness_.Check(Clock::now(), shared_->options.keepalive_timeout, PeerDesc());
      !why.ok()) {
    spdlog::warn("msgr tcp: {}", why.ToString());
    Fault(why);
    return;
  }
  {
    absl::MutexLock l(&mu_);
    send_keepalive_ = true;
  }
  shared_->counters.keepalives_sent++;
  Flush();
  StartKeepalive();
}

void TcpConnection::Attach(std::shared_ptr<asio::ip::tcp::socket> socket,
                           const std::string& peer_addr, const Hello& hello, const AuthReply& auth,
                           bool new_session, std::optional<session::SecureKeys> keys) {
  asio::post(strand_, [self = shared_from_this(), socket, peer_addr, hello, auth, new_session,
                       keys = std::move(keys)] {
    if (self->reset_done_ || self->shared_->stopping) {
      boost::system::error_code ec;
      socket->close(ec);
      return;
    }
    if (self->socket_) {
      spdlog::info("msgr tcp: {} reconnected; replacing its old socket", self->PeerDesc());
    }
    self->CloseSocket();
    self->socket_ = socket;
    self->hs_peer_ = hello.name;
    std::unique_ptr<session::SecureStream> tx;
    if (keys) {
      // Secure: READY is our first sealed frame; the client's next frame is its first.
      auto rx = session::SecureStream::Create(keys->mode, keys->client_to_server);
      auto t = session::SecureStream::Create(keys->mode, keys->server_to_client);
      if (!rx.ok() || !t.ok()) {
        self->Fault(rx.ok() ? t.status() : rx.status());
        return;
      }
      self->rx_ = std::move(*rx);
      tx = std::move(*t);
      self->rx_header_bytes_ = kFrameHeaderBytes + session::kSecureTagBytes;
      self->rx_prefix_bytes_ = kRingPrefixBytes + session::kSecureTagBytes;
    }
    uint64_t credit;
    {
      absl::MutexLock l(&self->mu_);
      self->peer_addr_ = peer_addr;
      self->peer_name_ = hello.name;
      credit = self->credit_pos_;
      self->credit_sent_ = credit;  // READY carries it
    }
    if (new_session && self->want_ring_) {
      auto ring = TcpRecvRing::Create(self->shared_->options.ring_bytes);
      if (!ring.ok()) {
        self->Reset(ring.status(), /*send_close=*/false);
        return;
      }
      self->ring_ = *ring;
      self->rx_ring_bytes_.store(self->ring_->bytes());
      self->mirror_.emplace(self->ring_->bytes());
    }
    if (!new_session) {
      if (absl::Status s = self->Requeue(auth.in_seq); !s.ok()) {
        self->open_ = true;  // so the fault is counted like any other (and closed once)
        self->shared_->counters.connections_open++;
        self->ProtocolFault(s);
        return;
      }
    }
    Ready r;
    r.flags = new_session ? 0 : kReadyResumed;
    r.in_seq = self->in_seq_.load();
    r.ring_bytes = self->ring_ ? self->ring_->bytes() : 0;
    r.ring_credit = credit;
    self->open_ = true;
    {
      // From here on any thread may write (READY goes first: it is in the first batch).
      absl::MutexLock l(&self->mu_);
      self->ready_payload_ = EncodeReady(r);
      self->tx_ = std::move(tx);
      self->wr_fd_ = self->socket_->native_handle();
      self->wr_open_ = true;
    }
    self->connected_ = true;
    self->shared_->counters.connections_open++;
    if (!new_session) self->shared_->counters.reconnects++;
    self->liveness_.Heard(Clock::now());
    spdlog::debug("msgr tcp: {} session with {} ({})", new_session ? "new" : "resumed",
                  self->PeerDesc(), self->lossless() ? "lossless" : "lossy");
    if (new_session) {
      self->shared_->dispatcher->OnAccept(self);
      if (self->ring_) self->shared_->dispatcher->OnRingAttached(self, self->ring_);
    }
    if (self->reset_done_) return;
    self->StartRead();
    self->StartKeepalive();
    self->Flush();
  });
}

void TcpConnection::OnEstablished(const Ready& ready, const EntityName& peer) {
  const bool resumed = (ready.flags & kReadyResumed) != 0;
  const bool remote_reset = !resumed && had_session_;
  hs_peer_ = peer;
  std::vector<RecordAck> resume_acks;  // records the READY's credit acknowledges
  {
    absl::MutexLock l(&mu_);
    peer_name_ = peer;
    if (remote_reset) {
      // Records were placed in the old ring; the owner resends them (OnRemoteReset), as
      // it does messages the old session had sent (a frame with a seq was sent, even if a
      // resume requeued it). Messages never sent go in the new session, numbered from 1
      // like everything in it. Under mu_ (clang cannot follow the lambdas).
      sent_.DropForNewSession(
          &out_queue_,
          [](const OutFramePtr& f) { return f->type == FrameType::kMessage && f->seq == 0; },
          [&](const OutFramePtr& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
            ReleaseAccountingLocked(*f);  // messages only
          });
      out_seq_ = 0;
      sent_records_.Clear();
    }
    if (want_ring_) {
      if (!producer_ || remote_reset) producer_.emplace(ready.ring_bytes);
      producer_->OnCredit(ready.ring_credit);
      sent_records_.OnCredit(ready.ring_credit, &resume_acks);
      max_record_payload_ =
          std::min<size_t>(MaxRecordPayload(ready.ring_bytes),
                           shared_->options.max_message_bytes - kRingPrefixBytes - kMaxOidBytes);
      cv_.SignalAll();
    }
  }
  if (remote_reset) {
    in_seq_ = 0;
    mirror_.reset();
  }
  if (resumed) {
    if (absl::Status s = Requeue(ready.in_seq); !s.ok()) {
      ProtocolFault(s);
      return;
    }
  }
  open_ = true;
  connected_ = true;
  shared_->counters.connections_open++;
  if (had_session_) shared_->counters.reconnects++;
  {
    absl::MutexLock l(&mu_);
    had_session_ = true;
    tx_ = std::move(pending_tx_);  // secure: sealed from the first frame after READY on
    wr_fd_ = socket_->native_handle();
    wr_open_ = true;  // from here on any thread may write
  }
  backoff_.Reset();
  liveness_.Heard(Clock::now());
  spdlog::debug("msgr tcp: connected to {} ({} session)", PeerDesc(), resumed ? "resumed" : "new");
  StartRead();
  StartKeepalive();
  Flush();
  DeliverAcks(resume_acks);
  if (remote_reset && !shared_->stopping) shared_->dispatcher->OnRemoteReset(shared_from_this());
}

void TcpConnection::Stop() {
  absl::MutexLock l(&mu_);
  closed_ = true;
  DropQueuesLocked();
  cv_.SignalAll();
}

void TcpConnection::DestroyIo() {
  reset_done_ = true;
  CloseSocket();
  timer_.reset();
  flow_timer_.reset();
  ring_.reset();
  rx_ring_bytes_.store(0);
}

}  // namespace msgr::tcp

// TcpConnection's reader. Bytes come off the socket into a per-connection ReadBuffer
// (one recv usually brings many small frames) and are parsed there: header, then for
// RING_RECORD the 40-byte prefix, then the frame body (oid + record payload, or the
// message / control payload), which is copied to its destination.
//
// Zero copy for large bodies: when a body still needs at least kDirectReadMinBytes after
// the bytes already buffered were copied, the rest is read from the socket straight into
// its destination (the ring slot, or the message string) with one async_read, and never
// passes through the buffer. Only what one buffered recv happened to bring in is copied.
//
// Acks: every frame we write carries ack_seq. The reader considers a standalone ACK only
// when the socket has nothing more for us right now (a recv returned less than it had
// room for, or EAGAIN) or after
// kMaxReadsPerTurn reads in a row, and then writes it only if kAckEveryFrames frames
// are unacknowledged, else within a short delay (AckReceived, acks_credits.cc): a
// stream of N records costs about N / kAckEveryFrames ACKs, not N.
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/tcp/error.h"
#include "msg/tcp/frame_io.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
// A body with at least this many bytes still to come after the buffered ones is read
// straight into its destination. Smaller remainders go through the buffer: one recv for
// the rest of this frame and whatever follows it beats a dedicated recv per frame, and
// copying < 32 KiB is cheap next to the syscall it saves. See also msg/PROTOCOL.md.
constexpr size_t kDirectReadMinBytes = 32 * 1024;
// One async_read of a direct body reads at most this much, and its completion refreshes
// liveness_ (asio loops over recv inside each one anyway: the split costs a handler call).
constexpr size_t kDirectReadChunkBytes = 256 << 10;
static_assert(kDirectReadMinBytes <= kReadBufferBytes / 2,
              "a buffered recv must be able to hold any body that is not read directly");
static_assert(kReadBufferBytes >= kFrameHeaderBytes + kRingPrefixBytes + 2 * session::kSecureTagBytes);
// Synchronous recvs per strand turn; then the reader acks, and yields to the writer and
// other handlers of this connection before going on.
constexpr int kMaxReadsPerTurn = 16;
}  // namespace

void TcpConnection::OnReadError(const boost::system::error_code& ec, size_t got, size_t want,
                                bool mid_frame) {
  absl::Status s = ReadErrorToStatus(ec, got, want, mid_frame, PeerDesc());
  if (absl::IsInvalidArgument(s)) {
    ProtocolFault(s);
  } else {
    Fault(s);
  }
}

void TcpConnection::OnBufferedReadError(const boost::system::error_code& ec) {
  switch (rx_phase_) {
    case RxPhase::kHeader:
      return OnReadError(ec, rx_buf_.size(), kFrameHeaderBytes, false);
    case RxPhase::kRingPrefix:
      return OnReadError(ec, rx_buf_.size(), kRingPrefixBytes, true);
    case RxPhase::kBody:
      return OnReadError(ec, rx_body_done_, rx_body_len_, true);
    case RxPhase::kBodyTag:
      return OnReadError(ec, rx_buf_.size(), session::kSecureTagBytes, true);
  }
}

void TcpConnection::SecureFault(const char* piece) {
  shared_->counters.secure_auth_failures++;
  const absl::Status why = absl::DataLossError(absl::StrCat(
      "secure frame failed authentication: the ", piece, " of a frame from ", PeerDesc(),
      " was tampered with, truncated, replayed or reordered"));
  spdlog::error("msgr tcp: {}; closing the connection", why.ToString());
  Fault(why);
}

void TcpConnection::StartRead() {
  rx_buf_.Clear();
  rx_phase_ = RxPhase::kHeader;
  // Non-blocking so that ReadLoop can try a recv and learn "nothing more" (EAGAIN) -- the
  // moment to acknowledge what arrived.
  boost::system::error_code ec;
  socket_->non_blocking(true, ec);
  if (ec) return Fault(ErrorToStatus(ec, absl::StrCat("set non-blocking for ", PeerDesc())));
  // Not ReadLoop() here: a read error would fault the session inside our caller, which
  // still has setup to do (it starts the keepalive timer that shares timer_ with the
  // reconnect backoff).
  WaitReadable(gen_);
}

void TcpConnection::WaitReadable(uint64_t gen) {
  // A read queued into the buffer's free tail, not an async_wait: Asio 1.74 re-arms epoll
  // (an EPOLL_CTL_MOD) for every async_wait, not for a queued read (the socket stays
  // registered edge-triggered), and the read's recv comes with the wake-up. Asio first
  // tries the recv at once (a speculative read, kept after a short recv): that is also
  // what sees a FIN which arrived with the bytes our last recv took (no new edge follows).
  size_t room = 0;
  uint8_t* tail = rx_buf_.PrepareRead(&room);
  socket_->async_read_some(
      asio::buffer(tail, room),
      asio::bind_executor(strand_, [self = shared_from_this(), gen, sock = socket_,
                                    room](boost::system::error_code ec, size_t n) {
        if (gen != self->gen_ || self->reset_done_) return;
        if (ec) return self->OnBufferedReadError(ec);
        self->rx_buf_.Commit(n);
        self->liveness_.Heard(Clock::now());
        self->ReadLoop(gen, /*drained=*/n < room);
      }));
}

void TcpConnection::ReadLoop(uint64_t gen, bool drained) {
  for (int reads = 0;; ++reads) {
    const bool more = ParseBuffered(gen);
    SignalRing();  // once per parsed batch, not per record (an eventfd write each)
    if (!more) return;
    // Everything buffered is used; the current frame (or the next one) needs more bytes.
    if (drained) {
      // The last recv returned less than it had room for: the socket had nothing more at
      // that moment, so no recv of ours just to hear EAGAIN (Asio's speculative read in
      // WaitReadable makes the one that remains; later bytes raise a new edge).
      AckReceived();  // the peer has nothing more in flight for now: one ack for all of it
      if (gen != gen_ || reset_done_) return;  // defensive: Flush only starts a write
      return WaitReadable(gen);
    }
    if (reads == kMaxReadsPerTurn) {
      AckReceived();
      asio::post(strand_, [self = shared_from_this(), gen] {
        if (gen == self->gen_ && !self->reset_done_) self->ReadLoop(gen);
      });
      return;
    }
    size_t room = 0;
    uint8_t* tail = rx_buf_.PrepareRead(&room);
    boost::system::error_code ec;
    const size_t n = socket_->read_some(asio::buffer(tail, room), ec);
    if (ec == asio::error::would_block || ec == asio::error::try_again) {
      drained = true;
      continue;  // parses nothing new, then waits
    }
    if (ec) return OnBufferedReadError(ec);
    rx_buf_.Commit(n);
    liveness_.Heard(Clock::now());  // the peer is alive, even in the middle of a long frame
    drained = n < room;
  }
}

bool TcpConnection::ParseBuffered(uint64_t gen) {
  for (;;) {
    if (gen != gen_ || reset_done_) return false;
    switch (rx_phase_) {
      case RxPhase::kHeader:
        if (rx_buf_.size() < rx_header_bytes_) return true;
        if (!OnHeader()) return false;
        break;
      case RxPhase::kRingPrefix:
        if (rx_buf_.size() < rx_prefix_bytes_) return true;
        if (!OnRingPrefix()) return false;
        break;
      case RxPhase::kBodyTag:
        if (rx_buf_.size() < session::kSecureTagBytes) return true;
        // The body was read as ciphertext into its destination; opened there, in place,
        // before anything looks at it (dispatch, publish).
        if (!rx_->Open(rx_body_dst_, rx_body_len_, rx_buf_.data())) {
          SecureFault("payload");
          return false;
        }
        rx_buf_.Consume(session::kSecureTagBytes);
        shared_->counters.bytes_received += session::kSecureTagBytes;
        rx_phase_ = RxPhase::kHeader;
        if (!OnBody(gen)) return false;
        break;
      case RxPhase::kBody: {
        const size_t take = std::min(rx_buf_.size(), rx_body_len_ - rx_body_done_);
        if (rx_body_dst_ != nullptr && take > 0) {
          std::memcpy(rx_body_dst_ + rx_body_done_, rx_buf_.data(), take);
          if (rx_body_kind_ == BodyKind::kRing) rx_ring_buffered_ += take;
        }
        rx_buf_.Consume(take);
        rx_body_done_ += take;
        if (rx_body_done_ == rx_body_len_) {
          if (rx_ && rx_body_len_ > 0) {  // secure: the tag comes next
            rx_phase_ = RxPhase::kBodyTag;
            break;
          }
          rx_phase_ = RxPhase::kHeader;
          if (!OnBody(gen)) return false;
          break;
        }
        const size_t rest = rx_body_len_ - rx_body_done_;
        if (rx_body_dst_ != nullptr && rest >= kDirectReadMinBytes) {
          ReadBodyDirect(gen, rest);
          return false;
        }
        return true;  // a small rest (or a discarded duplicate): through the buffer
      }
    }
  }
}

void TcpConnection::ReadBodyDirect(uint64_t gen, size_t rest) {
  // The buffer is empty here (its bytes went to the destination), so the socket's next
  // `rest` bytes are exactly the rest of this body. Read in chunks, each a sign of life
  // for the keepalive check (a 128 MiB body on a slow link takes longer than its timeout).
  const size_t chunk = std::min(rest, kDirectReadChunkBytes);
  asio::async_read(
      *socket_, asio::buffer(rx_body_dst_ + rx_body_done_, chunk),
      asio::bind_executor(strand_, [self = shared_from_this(), gen, sock = socket_,
                                    ring = ring_](boost::system::error_code ec, size_t n) {
        if (gen != self->gen_ || self->reset_done_) return;
        self->rx_body_done_ += n;
        if (ec) return self->OnReadError(ec, self->rx_body_done_, self->rx_body_len_, true);
        self->liveness_.Heard(Clock::now());
        const size_t left = self->rx_body_len_ - self->rx_body_done_;
        if (left >= kDirectReadMinBytes) return self->ReadBodyDirect(gen, left);
        self->ReadLoop(gen);  // done, or a small rest that goes through the buffer
      }));
}

void TcpConnection::SetBody(uint8_t* dst, size_t len, BodyKind kind) {
  rx_phase_ = RxPhase::kBody;
  rx_body_dst_ = dst;
  rx_body_len_ = len;
  rx_body_done_ = 0;
  rx_body_kind_ = kind;
  rx_ring_buffered_ = 0;
}

bool TcpConnection::OnHeader() {
  shared_->frames_in.fetch_add(1, std::memory_order_relaxed);
  const uint32_t limit = shared_->options.max_message_bytes;
  const uint8_t* in = rx_buf_.data();
  uint8_t opened[kFrameHeaderBytes + session::kSecureTagBytes];
  if (rx_) {
    // Secure: the header is its own sealed piece, authenticated before any field of it
    // (length, ack, credit) is trusted.
    std::memcpy(opened, in, sizeof(opened));
    if (!rx_->Open(opened, kFrameHeaderBytes, opened + kFrameHeaderBytes)) {
      SecureFault("header");
      return false;
    }
    in = opened;
    shared_->counters.secure_frames_opened++;
  }
  if (absl::Status s = DecodeFrameHeader(in, limit, &hdr_); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  rx_buf_.Consume(rx_header_bytes_);
  liveness_.Heard(Clock::now());
  shared_->counters.bytes_received += rx_header_bytes_;
  if (absl::Status s = ProcessAck(hdr_.ack_seq); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  if (hdr_.flags & kFrameFlagCredit) {
    if (absl::Status s = ProcessCredit(hdr_.aux); !s.ok()) {
      ProtocolFault(s);
      return false;
    }
  }
  switch (hdr_.type) {
    case FrameType::kHello:
    case FrameType::kChallenge:
    case FrameType::kAuth:
    case FrameType::kReady:
      ProtocolFault(absl::InvalidArgumentError(
          absl::StrCat("unexpected ", FrameTypeName(hdr_.type), " frame on an open session")));
      return false;
    case FrameType::kRingRecord:
      rx_phase_ = RxPhase::kRingPrefix;
      return true;
    case FrameType::kMessage:
    default:
      rx_payload_.resize(hdr_.payload_len);
      SetBody(reinterpret_cast<uint8_t*>(rx_payload_.data()), hdr_.payload_len,
              hdr_.type == FrameType::kMessage ? BodyKind::kMessage : BodyKind::kControl);
      return true;
  }
}

bool TcpConnection::OnBody(uint64_t gen) {
  switch (rx_body_kind_) {
    case BodyKind::kRing:
      return OnRingData();
    case BodyKind::kDiscard:
      shared_->counters.bytes_received += rx_body_len_;
      return true;
    case BodyKind::kMessage:
      return OnMessagePayload(gen);
    case BodyKind::kControl:
      return OnControlPayload();
  }
  return false;
}

session::SeqCheck TcpConnection::CheckSeq(uint64_t seq) {
  const uint64_t in_seq = in_seq_.load();
  const session::SeqCheck c = session::CheckIncoming(seq, in_seq);
  if (c == session::SeqCheck::kDuplicate) {
    shared_->counters.duplicates_dropped++;
    absl::MutexLock l(&mu_);
    ack_due_ = true;  // the peer resent because it missed our ack
  } else if (c == session::SeqCheck::kGap) {
    ProtocolFault(session::GapError(seq, in_seq));
  }
  return c;
}

void TcpConnection::FrameReceived() {
  // Acknowledged by the next frame anyone writes (AckReceived makes sure one goes out).
  in_seq_.store(hdr_.seq, std::memory_order_release);
}

void TcpConnection::SignalRing() {
  if (!ring_signal_) return;
  ring_signal_ = false;
  if (ring_ && ring_->Signal()) shared_->counters.ring_wakeups++;
}

bool TcpConnection::OnControlPayload() {
  if (absl::Status s = VerifyPayloadCrc(hdr_, rx_payload_.data(), rx_payload_.size()); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  shared_->counters.bytes_received += rx_payload_.size();
  switch (hdr_.type) {
    case FrameType::kKeepalive:
      {
        absl::MutexLock l(&mu_);
        send_keepalive_ack_ = true;
      }
      Kick();
      break;
    case FrameType::kClose:
      Reset(absl::UnavailableError(absl::StrCat(PeerDesc(), " closed the session: ", rx_payload_)),
            /*send_close=*/false);
      return false;
    default:  // ACK, CREDIT, KEEPALIVE_ACK: the header said it all
      break;
  }
  return true;
}

bool TcpConnection::OnMessagePayload(uint64_t gen) {
  if (absl::Status s = VerifyPayloadCrc(hdr_, rx_payload_.data(), rx_payload_.size()); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  shared_->counters.bytes_received += rx_payload_.size();
  switch (CheckSeq(hdr_.seq)) {
    case session::SeqCheck::kGap:
      return false;
    case session::SeqCheck::kDuplicate:
      return true;
    case session::SeqCheck::kNew:
      break;
  }
  FrameReceived();
  if (hdr_.msg_type == kRecordNackType) {  // the messenger's own (msg/record_acks.h)
    if (absl::Status s = ProcessRecordNack(rx_payload_); !s.ok()) {
      ProtocolFault(s);
      return false;
    }
    return gen == gen_ && !reset_done_;
  }
  shared_->counters.msgs_received++;
  Message m{hdr_.msg_type, std::move(rx_payload_)};
  rx_payload_ = std::string();
  if (!reset_done_ && !shared_->stopping) {
    shared_->dispatcher->OnMessage(shared_from_this(), std::move(m));
  }
  return gen == gen_ && !reset_done_;  // the callback may have closed the connection
}

bool TcpConnection::OnRingPrefix() {
  const uint8_t* pre = rx_buf_.data();
  uint8_t opened[kRingPrefixBytes + session::kSecureTagBytes];
  if (rx_) {  // secure: the prefix is a sealed piece of its own, opened before it is used
    std::memcpy(opened, pre, sizeof(opened));
    if (!rx_->Open(opened, kRingPrefixBytes, opened + kRingPrefixBytes)) {
      SecureFault("ring prefix");
      return false;
    }
    pre = opened;
  }
  if (absl::Status s = VerifyPayloadCrc(hdr_, pre, kRingPrefixBytes); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  if (absl::Status s = DecodeRingPrefix(hdr_, pre, &prefix_); !s.ok()) {
    ProtocolFault(s);
    return false;
  }
  rx_buf_.Consume(rx_prefix_bytes_);
  shared_->counters.bytes_received += rx_prefix_bytes_;
  const size_t body = size_t{prefix_.oid_len} + prefix_.data_len;
  switch (CheckSeq(hdr_.seq)) {
    case session::SeqCheck::kGap:
      return false;
    case session::SeqCheck::kDuplicate:
      if (rx_) {
        // Secure: even a duplicate's body is opened (its tag checked, the nonce used up),
        // so it needs somewhere to land. Rare: only resends after a reconnect.
        rx_payload_.resize(body);
        SetBody(reinterpret_cast<uint8_t*>(rx_payload_.data()), body, BodyKind::kDiscard);
        return true;
      }
      SetBody(nullptr, body, BodyKind::kDiscard);
      return true;
    case session::SeqCheck::kNew:
      break;
  }
  if (!ring_) {
    ProtocolFault(
        absl::InvalidArgumentError("RING_RECORD frame on a session without a receive ring"));
    return false;
  }
  if (prefix_.data_len > MaxRecordPayload(ring_->bytes())) {
    ProtocolFault(absl::InvalidArgumentError(
        absl::StrFormat("ring record of %d payload bytes is over the ring's limit %d",
                        prefix_.data_len, MaxRecordPayload(ring_->bytes()))));
    return false;
  }
  {
    absl::MutexLock l(&mu_);
    mirror_->OnCredit(credit_pos_);
  }
  mirror_saved_ = mirror_;
  placement_ = mirror_->Reserve(RecordBytes(prefix_.oid_len, prefix_.data_len));
  if (!placement_) {
    const size_t free = mirror_->free_bytes();
    mirror_ = mirror_saved_;
    mirror_saved_.reset();
    ProtocolFault(absl::InvalidArgumentError(absl::StrFormat(
        "ring overrun: record ring seq %d needs %d bytes, only %d free (the sender ignored "
        "its credit)",
        prefix_.ring_seq, RecordBytes(prefix_.oid_len, prefix_.data_len), free)));
    return false;
  }
  if (placement_->offset != prefix_.ring_offset || placement_->seq != prefix_.ring_seq) {
    const auto p = *placement_;
    mirror_ = mirror_saved_;
    mirror_saved_.reset();
    ProtocolFault(absl::InvalidArgumentError(absl::StrFormat(
        "ring slot mismatch: sender put ring seq %d at offset %d, we computed seq %d at %d",
        prefix_.ring_seq, prefix_.ring_offset, p.seq, p.offset)));
    return false;
  }
  // oid + payload go into the slot where the layout puts them (ring_format.h): behind the
  // (not yet written) header, or for large payloads right before slot + kPayloadAlign, so
  // the payload lands 4 KiB-aligned.
  SetBody(ring_->base() + placement_->offset + RecordOidOffset(prefix_.oid_len, prefix_.data_len),
          body, BodyKind::kRing);
  return true;
}

bool TcpConnection::OnRingData() {
  uint8_t* base = ring_->base();
  uint8_t* slot = base + placement_->offset;
  const size_t oid_offset = RecordOidOffset(prefix_.oid_len, prefix_.data_len);
  // The payload's crc32c goes into the header as the sender computed it, unchecked: the
  // ring's consumer checks it (RingConsumer), the one check both backends make, so the
  // reader never reads the payload (over RDMA nothing on the OSD reads it either).
  if (placement_->has_pad) {
    WritePadRecord(base + placement_->pad_offset, placement_->pad_bytes, placement_->pad_seq);
  }
  // The aligned layout's gap between header and oid is zeros (stale bytes otherwise).
  std::memset(slot + kRecordHeaderBytes, 0, oid_offset - kRecordHeaderBytes);
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, prefix_.record_flags, prefix_.ring_seq, prefix_.oid_len,
                   prefix_.data_len, prefix_.record_crc, hs_peer_.id, prefix_.tid, prefix_.object_offset);
  PublishRecord(slot, h);
  rx_published_pos_.store(mirror_->produced(), std::memory_order_release);
  ring_signal_ = true;  // SignalRing() after this batch
  mirror_saved_.reset();
  shared_->counters.records_received++;
  rx_records_.store(rx_records_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  shared_->counters.record_bytes_received += prefix_.data_len;
  // The kernel's recv copy, and ours out of rx_buf_ of what came through it (the body
  // starts with the oid, so that went first).
  shared_->counters.payload_bytes_copied_rx +=
      prefix_.data_len + (rx_ring_buffered_ > prefix_.oid_len ? rx_ring_buffered_ - prefix_.oid_len : 0);
  rx_ring_buffered_ = 0;
  shared_->counters.bytes_received += size_t{prefix_.oid_len} + prefix_.data_len;
  FrameReceived();
  return true;
}

}  // namespace msgr::tcp

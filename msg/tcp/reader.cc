// TcpConnection's reader: one frame at a time, header first. Message payloads are read
// into the string handed to the Dispatcher; ring-record payloads are read straight from
// the socket into their slot in the receive ring, then verified and published.
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/read.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/tcp/frame_io.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
constexpr size_t kScratchBytes = 64 * 1024;  // duplicate record payloads are read into this
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

void TcpConnection::StartRead() {
  asio::async_read(
      *socket_, asio::buffer(hdr_buf_),
      asio::bind_executor(strand_, [self = shared_from_this(), gen = gen_, sock = socket_](
                                       boost::system::error_code ec, size_t n) {
        if (gen != self->gen_) return;
        if (ec) return self->OnReadError(ec, n, kFrameHeaderBytes, false);
        self->OnHeader(gen);
      }));
}

void TcpConnection::OnHeader(uint64_t gen) {
  const uint32_t limit = shared_->options.max_message_bytes;
  if (absl::Status s = DecodeFrameHeader(hdr_buf_.data(), limit, &hdr_); !s.ok()) {
    return ProtocolFault(s);
  }
  last_rx_ = Clock::now();
  shared_->counters.bytes_received += kFrameHeaderBytes;
  if (absl::Status s = ProcessAck(hdr_.ack_seq); !s.ok()) return ProtocolFault(s);
  if (hdr_.flags & kFrameFlagCredit) {
    if (absl::Status s = ProcessCredit(hdr_.aux); !s.ok()) return ProtocolFault(s);
  }
  auto self = shared_from_this();
  switch (hdr_.type) {
    case FrameType::kHello:
    case FrameType::kChallenge:
    case FrameType::kAuth:
    case FrameType::kReady:
      return ProtocolFault(absl::InvalidArgumentError(
          absl::StrCat("unexpected ", FrameTypeName(hdr_.type), " frame on an open session")));
    case FrameType::kRingRecord:
      asio::async_read(*socket_, asio::buffer(prefix_buf_),
                       asio::bind_executor(strand_, [self, gen, sock = socket_](
                                                        boost::system::error_code ec, size_t n) {
                         if (gen != self->gen_) return;
                         if (ec) return self->OnReadError(ec, n, kRingPrefixBytes, true);
                         self->OnRingPrefix(gen);
                       }));
      return;
    case FrameType::kMessage:
    default: {
      rx_payload_.resize(hdr_.payload_len);
      if (hdr_.payload_len == 0) {
        return hdr_.type == FrameType::kMessage ? OnMessagePayload(gen) : OnControlPayload(gen);
      }
      asio::async_read(*socket_, asio::buffer(rx_payload_),
                       asio::bind_executor(strand_, [self, gen, sock = socket_](
                                                        boost::system::error_code ec, size_t n) {
                         if (gen != self->gen_) return;
                         if (ec) return self->OnReadError(ec, n, self->hdr_.payload_len, true);
                         if (self->hdr_.type == FrameType::kMessage) {
                           self->OnMessagePayload(gen);
                         } else {
                           self->OnControlPayload(gen);
                         }
                       }));
      return;
    }
  }
}

TcpConnection::SeqCheck TcpConnection::CheckSeq(uint64_t seq) {
  if (seq <= in_seq_) {
    shared_->counters.duplicates_dropped++;
    need_ack_ = true;  // the peer resent because it missed our ack
    Kick();
    return SeqCheck::kDuplicate;
  }
  if (seq != in_seq_ + 1) {
    ProtocolFault(absl::InvalidArgumentError(
        absl::StrFormat("data frame seq %d out of order (expected %d)", seq, in_seq_ + 1)));
    return SeqCheck::kGap;
  }
  return SeqCheck::kNew;
}

void TcpConnection::FrameReceived() {
  in_seq_ = hdr_.seq;
  need_ack_ = true;
  Kick();  // deferred: more frames read in the meantime share one ack
}

void TcpConnection::OnControlPayload(uint64_t gen) {
  if (absl::Status s = VerifyPayloadCrc(hdr_, rx_payload_.data(), rx_payload_.size()); !s.ok()) {
    return ProtocolFault(s);
  }
  shared_->counters.bytes_received += rx_payload_.size();
  switch (hdr_.type) {
    case FrameType::kKeepalive:
      send_keepalive_ack_ = true;
      Kick();
      break;
    case FrameType::kClose:
      return Reset(
          absl::UnavailableError(absl::StrCat(PeerDesc(), " closed the session: ", rx_payload_)),
          /*send_close=*/false);
    default:  // ACK, CREDIT, KEEPALIVE_ACK: the header said it all
      break;
  }
  StartRead();
}

void TcpConnection::OnMessagePayload(uint64_t gen) {
  if (absl::Status s = VerifyPayloadCrc(hdr_, rx_payload_.data(), rx_payload_.size()); !s.ok()) {
    return ProtocolFault(s);
  }
  shared_->counters.bytes_received += rx_payload_.size();
  switch (CheckSeq(hdr_.seq)) {
    case SeqCheck::kGap:
      return;
    case SeqCheck::kDuplicate:
      return StartRead();
    case SeqCheck::kNew:
      break;
  }
  FrameReceived();
  shared_->counters.msgs_received++;
  Message m{hdr_.msg_type, std::move(rx_payload_)};
  rx_payload_ = std::string();
  if (!reset_done_ && !shared_->stopping) {
    shared_->dispatcher->OnMessage(shared_from_this(), std::move(m));
  }
  if (gen == gen_ && !reset_done_) StartRead();
}

void TcpConnection::OnRingPrefix(uint64_t gen) {
  if (absl::Status s = VerifyPayloadCrc(hdr_, prefix_buf_.data(), prefix_buf_.size()); !s.ok()) {
    return ProtocolFault(s);
  }
  if (absl::Status s = DecodeRingPrefix(hdr_, prefix_buf_.data(), &prefix_); !s.ok()) {
    return ProtocolFault(s);
  }
  shared_->counters.bytes_received += kRingPrefixBytes;
  const size_t body = size_t{prefix_.oid_len} + prefix_.data_len;
  switch (CheckSeq(hdr_.seq)) {
    case SeqCheck::kGap:
      return;
    case SeqCheck::kDuplicate:
      return DiscardBytes(gen, body);
    case SeqCheck::kNew:
      break;
  }
  if (!ring_) {
    return ProtocolFault(
        absl::InvalidArgumentError("RING_RECORD frame on a session without a receive ring"));
  }
  if (prefix_.data_len > MaxRecordPayload(ring_->bytes())) {
    return ProtocolFault(absl::InvalidArgumentError(
        absl::StrFormat("ring record of %d payload bytes is over the ring's limit %d",
                        prefix_.data_len, MaxRecordPayload(ring_->bytes()))));
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
    return ProtocolFault(absl::InvalidArgumentError(absl::StrFormat(
        "ring overrun: record ring seq %d needs %d bytes, only %d free (the sender ignored "
        "its credit)",
        prefix_.ring_seq, RecordBytes(prefix_.oid_len, prefix_.data_len), free)));
  }
  if (placement_->offset != prefix_.ring_offset || placement_->seq != prefix_.ring_seq) {
    const auto p = *placement_;
    mirror_ = mirror_saved_;
    mirror_saved_.reset();
    return ProtocolFault(absl::InvalidArgumentError(absl::StrFormat(
        "ring slot mismatch: sender put ring seq %d at offset %d, we computed seq %d at %d",
        prefix_.ring_seq, prefix_.ring_offset, p.seq, p.offset)));
  }
  // Straight from the socket into the slot, behind the (not yet written) header.
  uint8_t* dst = ring_->base() + placement_->offset + kRecordHeaderBytes;
  asio::async_read(
      *socket_, asio::buffer(dst, body),
      asio::bind_executor(strand_, [self = shared_from_this(), gen, body, sock = socket_,
                                    ring = ring_](boost::system::error_code ec, size_t n) {
        if (gen != self->gen_) return;
        if (ec) return self->OnReadError(ec, n, body, true);
        self->OnRingData(gen);
      }));
}

void TcpConnection::OnRingData(uint64_t gen) {
  uint8_t* base = ring_->base();
  uint8_t* slot = base + placement_->offset;
  const uint8_t* oid = slot + kRecordHeaderBytes;
  const uint32_t crc =
      RecordPayloadCrc(oid, prefix_.oid_len, oid + prefix_.oid_len, prefix_.data_len);
  if (crc != prefix_.record_crc) {
    return ProtocolFault(absl::DataLossError(absl::StrFormat(
        "ring record ring seq %d (tid %d) payload crc mismatch (sender 0x%08x, received 0x%08x)",
        prefix_.ring_seq, prefix_.tid, prefix_.record_crc, crc)));
  }
  if (placement_->has_pad) {
    WritePadRecord(base + placement_->pad_offset, placement_->pad_bytes, placement_->pad_seq);
  }
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, prefix_.record_flags, prefix_.ring_seq, prefix_.oid_len,
                   prefix_.data_len, crc, hs_peer_.id, prefix_.tid, prefix_.object_offset);
  PublishRecord(slot, h);
  ring_->Signal();
  mirror_saved_.reset();
  shared_->counters.records_received++;
  shared_->counters.record_bytes_received += prefix_.data_len;
  shared_->counters.bytes_received += size_t{prefix_.oid_len} + prefix_.data_len;
  FrameReceived();
  StartRead();
}

void TcpConnection::DiscardBytes(uint64_t gen, size_t left) {
  if (left == 0) return StartRead();
  if (!scratch_) scratch_.reset(new char[kScratchBytes]);
  const size_t n = std::min(left, kScratchBytes);
  asio::async_read(
      *socket_, asio::buffer(scratch_.get(), n),
      asio::bind_executor(strand_, [self = shared_from_this(), gen, left, n, sock = socket_](
                                       boost::system::error_code ec, size_t got) {
        if (gen != self->gen_) return;
        if (ec) return self->OnReadError(ec, got, n, true);
        self->shared_->counters.bytes_received += n;
        self->DiscardBytes(gen, left - n);
      }));
}

}  // namespace msgr::tcp

// TcpConnection's writer: one async_write (one writev per up to 64 buffers) at a time,
// each carrying a batch of frames as one buffer sequence (headers encoded here, payloads
// referenced in place). Every header carries the current ack_seq, and the ring credit
// when it changed, so explicit ACK and CREDIT frames are only written when there is
// nothing else to carry them, and then only when due (ack_due_, credit_due_).
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "msg/crc32c.h"
#include "msg/tcp/error.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
constexpr size_t kMaxBatchFrames = 256;
constexpr size_t kMaxBatchBytes = 4 << 20;  // more frames than this wait for the next write
}  // namespace

// One async_write's worth of frames. Reused from write to write (spare_batch_), so the
// vectors keep their capacity and a steady stream allocates nothing here.
struct WriteBatch {
  std::vector<std::array<uint8_t, kFrameHeaderBytes>> headers;  // control frames only
  std::vector<std::string> control_payloads;
  std::vector<OutFramePtr> frames;
  std::vector<asio::const_buffer> bufs;
  size_t data_frames = 0;
  size_t bytes = 0;
  bool close_after = false;

  void Clear() {
    headers.clear();
    control_payloads.clear();
    frames.clear();
    bufs.clear();
    data_frames = bytes = 0;
    close_after = false;
  }
};

namespace {

void AddControl(WriteBatch* b, FrameHeader h, std::string payload) {
  h.payload_len = static_cast<uint32_t>(payload.size());
  h.payload_crc = Crc32c(0, payload.data(), payload.size());
  b->headers.emplace_back();
  EncodeFrameHeader(h, b->headers.back().data());
  b->control_payloads.push_back(std::move(payload));
}

}  // namespace

void TcpConnection::Flush() {
  if (writing_ || !open_ || !socket_) return;
  std::shared_ptr<WriteBatch> b = std::move(spare_batch_);
  if (b) {
    b->Clear();
  } else {
    b = std::make_shared<WriteBatch>();
  }
  FrameHeader base;
  base.ack_seq = in_seq_;
  const uint32_t inject = shared_->options.inject_socket_failures;
  {
    absl::MutexLock l(&mu_);
    if (!close_reason_.empty()) {
      FrameHeader h = base;
      h.type = FrameType::kClose;
      AddControl(b.get(), h, close_reason_);
      close_reason_.clear();
      b->close_after = true;
    } else if (!reset_done_) {
      size_t max_data = kMaxBatchFrames;
      if (inject > 0) max_data = std::min<size_t>(max_data, inject - frames_on_socket_);
      while (!out_queue_.empty() && b->frames.size() < max_data &&
             (b->frames.empty() || b->bytes + out_queue_.front()->wire_bytes() <= kMaxBatchBytes)) {
        OutFramePtr f = std::move(out_queue_.front());
        out_queue_.pop_front();
        if (f->seq == 0) f->seq = ++out_seq_;
        if (policy_.lossless) sent_.push_back(f);
        b->bytes += f->wire_bytes();
        b->frames.push_back(std::move(f));
      }
      const bool control = ready_payload_ || send_keepalive_ack_ || send_keepalive_;
      // A standalone ACK/CREDIT only when one is due (batched, see tcp_connection.h);
      // otherwise ack and credit wait for the next frame that goes out anyway.
      const bool credit_frame = credit_dirty_ && credit_due_;
      const bool standalone = b->frames.empty() && !control && (ack_due_ || credit_frame);
      if (!control && b->frames.empty() && !standalone) {
        spare_batch_ = std::move(b);
        return;
      }
      if (credit_dirty_) {
        base.flags |= kFrameFlagCredit;
        base.aux = credit_pos_;
        credit_sent_ = credit_pos_;
        credit_dirty_ = false;
      }
      credit_due_ = false;
      if (ready_payload_) {
        FrameHeader h = base;
        h.type = FrameType::kReady;
        AddControl(b.get(), h, std::move(*ready_payload_));
        ready_payload_.reset();
      }
      if (send_keepalive_ack_) {
        FrameHeader h = base;
        h.type = FrameType::kKeepaliveAck;
        AddControl(b.get(), h, "");
        send_keepalive_ack_ = false;
      }
      if (send_keepalive_) {
        FrameHeader h = base;
        h.type = FrameType::kKeepalive;
        AddControl(b.get(), h, "");
        send_keepalive_ = false;
      }
      if (standalone) {
        FrameHeader h = base;
        h.type = (base.flags & kFrameFlagCredit) ? FrameType::kCredit : FrameType::kAck;
        AddControl(b.get(), h, "");
      }
    }
  }
  if (b->headers.empty() && b->frames.empty()) {
    spare_batch_ = std::move(b);
    return;
  }
  ack_due_ = false;
  ack_sent_ = in_seq_;
  // Buffers: control frames (header + payload) first, then data frames (header, ring
  // prefix and oid in one buffer; the payload in place).
  for (size_t i = 0; i < b->headers.size(); ++i) {
    b->bufs.emplace_back(asio::buffer(b->headers[i]));
    if (!b->control_payloads[i].empty()) b->bufs.emplace_back(asio::buffer(b->control_payloads[i]));
  }
  for (const auto& f : b->frames) {
    FrameHeader h = base;
    h.type = f->type;
    h.seq = f->seq;
    h.msg_type = f->msg_type;
    h.payload_len = static_cast<uint32_t>(f->wire_bytes());
    h.payload_crc = f->payload_crc;
    // Safe to rewrite in place: a frame is in at most one write, and a write of a closed
    // socket (the frame is being resent) no longer reads its buffers.
    EncodeFrameHeader(h, f->wire.data());
    b->bufs.emplace_back(asio::buffer(f->wire.data(), kFrameHeaderBytes + f->head_len));
    if (!f->payload.empty()) b->bufs.emplace_back(asio::buffer(f->payload));
  }
  b->data_frames = b->frames.size();
  writing_ = true;
  asio::async_write(
      *socket_, b->bufs,
      asio::bind_executor(
          strand_, [self = shared_from_this(), gen = gen_, b, sock = socket_](
                       boost::system::error_code ec, size_t) { self->OnWritten(gen, b, ec); }));
}

void TcpConnection::OnWritten(uint64_t gen, const std::shared_ptr<WriteBatch>& b,
                              const boost::system::error_code& ec) {
  if (gen != gen_) return;
  writing_ = false;
  if (ec) {
    if (b->close_after) return CloseSocket();
    return Fault(ErrorToStatus(ec, absl::StrCat("write to ", PeerDesc())));
  }
  if (b->close_after) return CloseSocket();
  auto& c = shared_->counters;
  size_t bytes = (b->headers.size() + b->frames.size()) * kFrameHeaderBytes;
  for (const auto& p : b->control_payloads) bytes += p.size();
  {
    absl::MutexLock l(&mu_);
    for (const auto& f : b->frames) {
      bytes += f->wire_bytes();
      if (!f->sent_once) {
        f->sent_once = true;
        if (f->type == FrameType::kMessage) {
          c.msgs_sent++;
        } else {
          c.records_sent++;
          c.record_bytes_sent += f->payload.size();
        }
      }
      if (!policy_.lossless) ReleaseAccountingLocked(*f);
    }
    if (!policy_.lossless && !b->frames.empty()) cv_.SignalAll();
  }
  c.bytes_sent += bytes;
  frames_on_socket_ += b->data_frames;
  b->Clear();  // drop frame references now (lossy: their memory can go)
  spare_batch_ = b;
  const uint32_t inject = shared_->options.inject_socket_failures;
  if (inject > 0 && frames_on_socket_ >= inject) {
    spdlog::info("msgr tcp: injecting a socket failure on {} after {} frames", PeerDesc(),
                 frames_on_socket_);
    return Fault(
        absl::UnavailableError(absl::StrCat("injected socket failure after ", inject, " frames")));
  }
  Flush();
}

}  // namespace msgr::tcp

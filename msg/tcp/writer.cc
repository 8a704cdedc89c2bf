// TcpConnection's writer. One writer owns the socket's send side at a time (wr_busy_,
// under mu_), and writes a batch of frames as one buffer sequence (headers encoded here,
// payloads referenced in place). Every header carries the current ack_seq, and the ring
// credit when it changed, so explicit ACK and CREDIT frames are only written when there
// is nothing else to carry them, and then only when due (ack_due_, credit_due_).
//
// Two kinds of writer, one batch builder (BuildBatchLocked), so seqs, acks and credits
// are assigned the same way whoever writes:
//   * inline (WriteNow): the thread that queued a frame or released ring space writes it
//     with one non-blocking sendmsg when the socket is idle -- no hand-off to an io
//     thread, which costs a futex/epoll wake-up (tens of us) per direction. If the socket
//     takes only part of the batch (or nothing), the strand writes the rest; an error or
//     an injected failure is handed to the strand as a fault.
//   * the strand (Flush): async_write (one writev per up to 64 buffers); used for control
//     frames the io thread decides on (READY, keepalive, batched ACKs), CLOSE, and
//     whatever an inline writer left.
#include <errno.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <cassert>
#include <climits>

#include "absl/strings/str_cat.h"
#include "msg/base/crc32c.h"
#include "msg/base/errno_status.h"
#include "msg/tcp/error.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
constexpr size_t kMaxBatchFrames = 256;
constexpr size_t kMaxBatchBytes = 4 << 20;  // more frames than this wait for the next write
// An inline writer writes at most this many batches (its own and what other threads
// queued meanwhile) before it leaves the rest to the strand: a caller helps, but is not
// made to write everyone's frames forever.
constexpr int kMaxInlineBatches = 4;
static_assert(2 * kMaxBatchFrames + 8 <= IOV_MAX, "a batch must fit one sendmsg");
}  // namespace

// One write's worth of frames. Reused from write to write (spare_batch_), so the vectors
// keep their capacity and a steady stream allocates nothing here.
struct WriteBatch {
  std::vector<std::array<uint8_t, kFrameHeaderBytes>> headers;  // control frames only
  std::vector<std::string> control_payloads;
  std::vector<OutFramePtr> frames;
  std::vector<asio::const_buffer> bufs;
  std::vector<asio::const_buffer> rest;  // StartAsyncWrite: what an inline writer left
  std::vector<iovec> iov;                // inline writer
  // Secure mode: the whole batch sealed, one buffer (kept from write to write).
  std::unique_ptr<uint8_t[]> sealed;
  size_t sealed_capacity = 0;
  size_t data_frames = 0;
  size_t bytes = 0;       // data frame payload bytes (batch size limit)
  size_t wire_bytes = 0;  // everything in bufs
  bool close_after = false;

  void Clear() {
    headers.clear();
    control_payloads.clear();
    frames.clear();
    bufs.clear();
    rest.clear();
    iov.clear();
    data_frames = bytes = wire_bytes = 0;
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

// Writes `b` with non-blocking sendmsg until it is all out, the socket is full, or it
// fails. Returns the bytes written; *err is the errno of a failure (0 otherwise).
size_t SendNonBlocking(int fd, WriteBatch* b, int* err) {
  b->iov.clear();
  for (const auto& buf : b->bufs) {
    b->iov.push_back(iovec{const_cast<void*>(buf.data()), buf.size()});
  }
  size_t done = 0, i = 0;
  *err = 0;
  while (done < b->wire_bytes) {
    msghdr m{};
    m.msg_iov = b->iov.data() + i;
    m.msg_iovlen = b->iov.size() - i;
    const ssize_t n = sendmsg(fd, &m, MSG_DONTWAIT | MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK) *err = errno;
      break;
    }
    done += static_cast<size_t>(n);
    for (size_t left = static_cast<size_t>(n); left > 0;) {
      iovec& v = b->iov[i];
      if (left >= v.iov_len) {
        left -= v.iov_len;
        ++i;
      } else {
        v.iov_base = static_cast<uint8_t*>(v.iov_base) + left;
        v.iov_len -= left;
        left = 0;
      }
    }
  }
  return done;
}

}  // namespace

std::shared_ptr<WriteBatch> TcpConnection::TakeBatchLocked() {
  std::shared_ptr<WriteBatch> b = std::move(spare_batch_);
  if (b) {
    b->Clear();
  } else {
    b = std::make_shared<WriteBatch>();
  }
  return b;
}

bool TcpConnection::BuildBatchLocked(WriteBatch* b, bool strand) {
  FrameHeader base;
  const uint64_t acked = in_seq_.load(std::memory_order_acquire);
  base.ack_seq = acked;
  const uint32_t inject = shared_->options.inject_socket_failures;
  if (!close_reason_.empty()) {
    if (!strand) return false;  // CLOSE is the strand's: it closes the socket after it
    FrameHeader h = base;
    h.type = FrameType::kClose;
    AddControl(b, h, close_reason_);
    close_reason_.clear();
    b->close_after = true;
  } else if (strand ? !reset_done_ : !closed_) {
    size_t max_data = kMaxBatchFrames;
    if (inject > 0) max_data = std::min<size_t>(max_data, inject - frames_on_socket_);
    while (!out_queue_.empty() && b->frames.size() < max_data &&
           (b->frames.empty() || b->bytes + out_queue_.front()->wire_bytes() <= kMaxBatchBytes)) {
      OutFramePtr f = std::move(out_queue_.front());
      out_queue_.pop_front();
      if (f->seq == 0) f->seq = ++out_seq_;
      if (policy_.lossless) sent_.Sent(f);
      b->bytes += f->wire_bytes();
      b->frames.push_back(std::move(f));
    }
    const bool control = ready_payload_ || send_keepalive_ack_ || send_keepalive_;
    // A standalone ACK/CREDIT only when one is due (batched, see tcp_connection.h);
    // otherwise ack and credit wait for the next frame that goes out anyway.
    const bool credit_frame = credit_dirty_ && credit_due_;
    const bool standalone = b->frames.empty() && !control && (ack_due_ || credit_frame);
    if (!control && b->frames.empty() && !standalone) return false;
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
      AddControl(b, h, std::move(*ready_payload_));
      ready_payload_.reset();
    }
    if (send_keepalive_ack_) {
      FrameHeader h = base;
      h.type = FrameType::kKeepaliveAck;
      AddControl(b, h, "");
      send_keepalive_ack_ = false;
    }
    if (send_keepalive_) {
      FrameHeader h = base;
      h.type = FrameType::kKeepalive;
      AddControl(b, h, "");
      send_keepalive_ = false;
    }
    if (standalone) {
      FrameHeader h = base;
      h.type = (base.flags & kFrameFlagCredit) ? FrameType::kCredit : FrameType::kAck;
      AddControl(b, h, "");
    }
  }
  if (b->headers.empty() && b->frames.empty()) return false;
  ack_due_ = false;
  ack_sent_ = acked;
  // Buffers: control frames (header + payload) first, then data frames (header, ring
  // prefix and oid in one buffer; the payload in place). Secure mode: all of it sealed
  // into one buffer after the headers are encoded (SealBatchLocked).
  const bool secure = tx_ != nullptr;
  for (size_t i = 0; i < b->headers.size() && !secure; ++i) {
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
    // socket (the frame is being resent) no longer reads its buffers (CloseSocket waits
    // for an inline sendmsg to return).
    EncodeFrameHeader(h, f->wire.data());
    if (!secure) {
      b->bufs.emplace_back(asio::buffer(f->wire.data(), kFrameHeaderBytes + f->head_len));
      if (const std::string_view body = f->body(); !body.empty()) {
        b->bufs.emplace_back(asio::buffer(body.data(), body.size()));
      }
    }
    // The kernel's send copy, counted as the batch goes to the socket (each write; a write
    // cut by a fault counts, as does its resend): counted when the write completed, the
    // peer's ack could be delivered first, and a run's figure read after its last ack
    // missed the last batch (copies per byte 0.9994 in a CI run).
    if (f->type == FrameType::kRingRecord) {
      shared_->counters.payload_bytes_copied_tx += f->body().size();
    }
  }
  if (secure) SealBatchLocked(b);
  for (const auto& buf : b->bufs) b->wire_bytes += buf.size();
  b->data_frames = b->frames.size();
  return true;
}

void TcpConnection::SealBatchLocked(WriteBatch* b) {
  using session::kSecureTagBytes;
  using session::SealedPayloadBytes;
  constexpr size_t kSealedHeader = kFrameHeaderBytes + kSecureTagBytes;
  size_t total = 0;
  for (const auto& p : b->control_payloads) total += kSealedHeader + SealedPayloadBytes(false, p.size());
  for (const auto& f : b->frames) {
    total += kSealedHeader + SealedPayloadBytes(f->type == FrameType::kRingRecord, f->wire_bytes());
  }
  if (b->sealed_capacity < total) {
    b->sealed.reset(new uint8_t[total]);
    b->sealed_capacity = total;
  }
  // Pieces in wire order, each with the next nonce (the receiver opens them in the same
  // order): header; then the payload, or for a record its prefix and its oid + data.
  uint8_t* out = b->sealed.get();
  auto seal = [&](std::string_view a, std::string_view c) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    tx_->Seal(a, c, out);
    out += a.size() + c.size() + kSecureTagBytes;
  };
  auto view = [](const uint8_t* p, size_t n) {
    return std::string_view(reinterpret_cast<const char*>(p), n);
  };
  for (size_t i = 0; i < b->headers.size(); ++i) {
    seal(view(b->headers[i].data(), kFrameHeaderBytes), {});
    if (!b->control_payloads[i].empty()) seal(b->control_payloads[i], {});
  }
  for (const auto& f : b->frames) {
    seal(view(f->wire.data(), kFrameHeaderBytes), {});
    if (f->type == FrameType::kRingRecord) {
      seal(view(f->head(), kRingPrefixBytes), {});
      seal(view(f->head() + kRingPrefixBytes, f->head_len - kRingPrefixBytes), f->body());
    } else if (f->wire_bytes() > 0) {
      seal(view(f->head(), f->head_len), f->body());
    }
  }
  assert(static_cast<size_t>(out - b->sealed.get()) == total);
  b->bufs.emplace_back(asio::buffer(b->sealed.get(), total));
  shared_->counters.secure_frames_sealed += b->headers.size() + b->frames.size();
}

void TcpConnection::Flush() {
  std::shared_ptr<WriteBatch> b;
  {
    absl::MutexLock l(&mu_);
    if (wr_busy_ || !wr_open_ || !socket_) return;
    b = TakeBatchLocked();
    if (!BuildBatchLocked(b.get(), /*strand=*/true)) {
      spare_batch_ = std::move(b);
      return;
    }
    wr_busy_ = true;
  }
  StartAsyncWrite(b, 0);
}

void TcpConnection::StartAsyncWrite(const std::shared_ptr<WriteBatch>& b, size_t skip) {
  const std::vector<asio::const_buffer>* bufs = &b->bufs;
  if (skip > 0) {
    b->rest.clear();
    for (const auto& buf : b->bufs) {
      if (skip >= buf.size()) {
        skip -= buf.size();
        continue;
      }
      b->rest.push_back(buf + skip);
      skip = 0;
    }
    bufs = &b->rest;
  }
  asio::async_write(
      *socket_, *bufs,
      asio::bind_executor(
          strand_, [self = shared_from_this(), gen = gen_, b, sock = socket_](
                       boost::system::error_code ec, size_t) { self->OnWritten(gen, b, ec); }));
}

bool TcpConnection::FinishBatchLocked(WriteBatch* b) {
  auto& c = shared_->counters;
  bool lifted_nack = false;
  for (const auto& f : b->frames) {
    if (!f->sent_once) {
      f->sent_once = true;
      if (f->type == FrameType::kMessage) {
        c.msgs_sent++;
      } else {
        c.records_sent++;
        c.record_bytes_sent += f->body().size();
      }
    }
    if (!policy_.lossless) {
      ReleaseAccountingLocked(*f);
      if (f->type == FrameType::kMessage && f->msg_type == kRecordNackType) {
        lifted_nack |= nack_barrier_.LiftOldest();
      }
    }
  }
  if (lifted_nack) {  // lossy: the written nack lets the credit behind it go, next batch
    const uint64_t credit = nack_barrier_.Clamp(released_pos_);
    if (credit > credit_pos_) {
      credit_pos_ = credit;
      credit_dirty_ = credit_due_ = true;
    }
  }
  if (!policy_.lossless && !b->frames.empty()) cv_.SignalAll();
  c.bytes_sent += b->wire_bytes;
  frames_on_socket_ += b->data_frames;
  b->Clear();  // drop frame references now (lossy: their memory can go)
  const uint32_t inject = shared_->options.inject_socket_failures;
  return inject > 0 && frames_on_socket_ >= inject;
}

void TcpConnection::OnWritten(uint64_t gen, const std::shared_ptr<WriteBatch>& b,
                              const boost::system::error_code& ec) {
  if (gen != gen_) return;  // CloseSocket took ownership back
  if (b->close_after) return CloseSocket();
  // Reset meanwhile (Fault would return at once): nothing more goes on this socket.
  if (ec && reset_done_) return CloseSocket();
  if (ec) return Fault(ErrorToStatus(ec, absl::StrCat("write to ", PeerDesc())));
  uint64_t frames = 0;
  {
    absl::MutexLock l(&mu_);
    if (FinishBatchLocked(b.get())) {
      wr_open_ = false;  // nobody writes on this socket again; Fault closes it
      frames = frames_on_socket_;
    } else {
      wr_busy_ = false;
    }
    spare_batch_ = b;
  }
  if (frames > 0) {
    if (reset_done_) return CloseSocket();  // reset meanwhile: CLOSE was not possible
    spdlog::info("msgr tcp: injecting a socket failure on {} after {} frames", PeerDesc(), frames);
    return Fault(absl::UnavailableError(absl::StrCat("injected socket failure after ",
                                                     shared_->options.inject_socket_failures,
                                                     " frames")));
  }
  Flush();
}

void TcpConnection::WriteNow() {
  bool kick = false;
  for (int round = 0;; ++round) {
    std::shared_ptr<WriteBatch> b;
    uint64_t gen;
    int fd;
    {
      absl::MutexLock l(&mu_);
      // Busy: the owner looks at the queue again before it lets go. Not open: the queue
      // goes out when the session (re)opens.
      if (wr_busy_ || !wr_open_) return;
      if (closed_ || !close_reason_.empty() || round == kMaxInlineBatches) {
        kick = !close_reason_.empty() ||
               (!closed_ && (!out_queue_.empty() || ready_payload_ || send_keepalive_ ||
                             send_keepalive_ack_ || ack_due_ || (credit_dirty_ && credit_due_)));
        break;
      }
      b = TakeBatchLocked();
      if (!BuildBatchLocked(b.get(), /*strand=*/false)) {
        spare_batch_ = std::move(b);
        return;
      }
      wr_busy_ = inline_active_ = true;
      gen = gen_;
      fd = wr_fd_;
    }
    int err = 0;
    const size_t written = SendNonBlocking(fd, b.get(), &err);
    inline_writes_++;
    uint64_t injected = 0;
    {
      absl::MutexLock l(&mu_);
      inline_active_ = false;
      inline_cv_.SignalAll();
      if (gen != gen_) return;  // the socket was closed meanwhile; ownership went with it
      if (err == 0 && written < b->wire_bytes) {
        // The socket is full: the strand writes the rest (and keeps ownership).
        inline_handoffs_++;
        asio::post(strand_, [self = shared_from_this(), gen, b, written] {
          if (gen == self->gen_) self->StartAsyncWrite(b, written);
        });
        return;
      }
      if (err != 0) {
        wr_open_ = false;  // keeps ownership: nobody writes until the fault closes it
      } else if (FinishBatchLocked(b.get())) {
        wr_open_ = false;
        injected = frames_on_socket_;
      } else {
        wr_busy_ = false;
      }
      spare_batch_ = std::move(b);
    }
    if (err != 0) {
      return FaultAsync(gen, ErrnoStatus(err, absl::StrCat("write to ", PeerDesc())));
    }
    if (injected > 0) {
      spdlog::info("msgr tcp: injecting a socket failure on {} after {} frames", PeerDesc(),
                   injected);
      return FaultAsync(gen,
                        absl::UnavailableError(absl::StrCat(
                            "injected socket failure after ",
                            shared_->options.inject_socket_failures, " frames")));
    }
  }
  if (kick) Kick();
}

void TcpConnection::FaultAsync(uint64_t gen, absl::Status why) {
  asio::post(strand_, [self = shared_from_this(), gen, why = std::move(why)] {
    if (gen != self->gen_) return;
    if (self->reset_done_) return self->CloseSocket();  // reset meanwhile: just close
    self->Fault(why);
  });
}

}  // namespace msgr::tcp

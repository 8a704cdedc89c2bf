// TcpConnection: acknowledgements and ring credits coming in (ProcessAck/ProcessCredit,
// called by the reader on every frame header) and ring credits going out (ReleaseRing,
// batched so that an owner releasing per record does not cost a CREDIT frame per record).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/str_format.h"
#include "msg/base/crc32c.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
// Longest a small ack or credit waits for a frame to carry it. Short next to any wait
// a sender would notice; long enough to gather many frames / releases.
constexpr std::chrono::microseconds kFlowDelay{200};
}  // namespace

// The credit is the acknowledgement (msg/record_acks.h): it goes out at once, on the
// next frame we write or as a standalone CREDIT. Owners release per batch of records,
// so this is one frame per batch, not per record. Failures go first, as a nack message,
// and the credit stays behind them until the peer acknowledged it (lossy: until it is
// written, FinishBatchLocked).
void TcpConnection::ReleaseRing(uint64_t position, absl::Span<const RecordAck> failed) {
  OutFramePtr nack;
  if (!failed.empty()) {
    nack = NewOutFrame();
    Message m = EncodeRecordNack(failed);
    nack->msg_type = m.type;
    nack->payload = std::move(m.payload);
    nack->payload_crc = Crc32c(0, nack->payload.data(), nack->payload.size());
  }
  {
    absl::MutexLock l(&mu_);
    if (closed_ || position <= released_pos_) return;
    if (nack) {
      // The credit waits behind the nack: until the peer acknowledged it (lossless), or
      // until its frame is written (lossy: the frames after it, and their credit, are
      // read after its body; its own header must not carry the credit past it).
      nack_barrier_.Add(released_pos_);
      flow_.Add(nack->wire_bytes(), &shared_->bytes_in_flight);  // accounted like any message
      out_queue_.push_back(std::move(nack));
    }
    released_pos_ = position;
    const uint64_t credit = nack_barrier_.Clamp(released_pos_);
    if (credit > credit_pos_) {
      credit_pos_ = credit;
      credit_dirty_ = credit_due_ = true;
    }
  }
  // The credit is the ack: it goes on the wire now, from this thread if the socket is
  // idle -- unless records past it have already arrived: then this owner releases again
  // in a moment, and the io thread (which is reading them) writes the credits of a
  // stream together.
  if (position >= rx_published_pos_.load(std::memory_order_acquire)) {
    WriteNow();
  } else {
    Kick();
  }
}

// Called by the reader when it ran out of bytes (or yields): frames received since the
// last ack we wrote are acknowledged now if there are many (or a duplicate showed the
// peer missed an ack), else within kFlowDelay unless another frame carries the ack first.
void TcpConnection::AckReceived() {
  const uint64_t in_seq = in_seq_.load();
  bool flush;
  {
    absl::MutexLock l(&mu_);
    if (in_seq > ack_sent_ && in_seq - ack_sent_ >= kAckEveryFrames) ack_due_ = true;
    flush = ack_due_;
    if (!flush) {
      if (in_seq == ack_sent_ || flow_timer_armed_) return;
      flow_timer_armed_ = true;
    }
  }
  if (flush) return Flush();
  ArmFlowTimer();
}

void TcpConnection::ArmFlowTimer() {
  if (!flow_timer_) flow_timer_ = std::make_unique<asio::steady_timer>(msgr_->io());
  flow_timer_->expires_after(kFlowDelay);
  flow_timer_->async_wait(
      asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec) {
        {
          absl::MutexLock l(&self->mu_);
          self->flow_timer_armed_ = false;
          if (self->credit_dirty_) self->credit_due_ = true;
          if (!ec && self->in_seq_.load() != self->ack_sent_) self->ack_due_ = true;
        }
        if (ec) return;
        self->Flush();
      }));
}

absl::Status TcpConnection::ProcessAck(uint64_t ack_seq) {
  absl::ReleasableMutexLock l(&mu_);
  if (ack_seq > out_seq_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("peer acknowledged seq %d but we only sent up to %d", ack_seq, out_seq_));
  }
  if (PopAckedLocked(ack_seq)) {
    l.Release();
    Kick();
  }
  return absl::OkStatus();
}

bool TcpConnection::PopAckedLocked(uint64_t ack_seq) {
  bool lifted = false;
  // The callback runs inside Ack, under mu_ (held here): clang cannot follow a lambda.
  const size_t acked = sent_.Ack(ack_seq, [&](const OutFramePtr& f) ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (f->type == FrameType::kMessage && f->msg_type == kRecordNackType) {
      lifted |= nack_barrier_.LiftOldest();
    }
    ReleaseAccountingLocked(*f);
  });
  if (acked > 0) cv_.SignalAll();
  if (!lifted) return false;
  const uint64_t credit = nack_barrier_.Clamp(released_pos_);
  if (credit <= credit_pos_) return false;
  credit_pos_ = credit;  // the held-back credit may go now
  credit_dirty_ = credit_due_ = true;
  return true;
}

absl::Status TcpConnection::ProcessCredit(uint64_t released) {
  std::vector<RecordAck>& acks = rx_acks_;
  acks.clear();
  {
    absl::MutexLock l(&mu_);
    if (!producer_) {
      return absl::InvalidArgumentError("ring credit on a connection without a ring");
    }
    if (!producer_->OnCredit(released)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "ring credit %d is beyond what we produced (%d)", released, producer_->produced()));
    }
    cv_.SignalAll();
    sent_records_.OnCredit(released, &acks);
  }
  DeliverAcks(acks);
  return absl::OkStatus();
}

absl::Status TcpConnection::ProcessRecordNack(const std::string& payload) {
  auto failed = DecodeRecordNack(payload);
  if (!failed.ok()) return failed.status();
  std::vector<RecordAck>& acks = rx_acks_;
  acks.clear();
  {
    absl::MutexLock l(&mu_);
    sent_records_.OnNack(*failed, &acks);
  }
  DeliverAcks(acks);
  return absl::OkStatus();
}

void TcpConnection::DeliverAcks(const std::vector<RecordAck>& acks) {
  if (acks.empty() || reset_done_ || shared_->stopping) return;
  shared_->dispatcher->OnRecordsAcked(shared_from_this(), acks);
}

}  // namespace msgr::tcp

// TcpConnection: acknowledgements and ring credits coming in (ProcessAck/ProcessCredit,
// called by the reader on every frame header) and ring credits going out (ReleaseRing,
// batched so that an owner releasing per record does not cost a CREDIT frame per record).
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/str_format.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
// Longest a small ack or credit waits for a frame to carry it. Short next to any wait
// a sender would notice; long enough to gather many frames / releases.
constexpr std::chrono::microseconds kFlowDelay{200};
}  // namespace

// Owners release per record; a CREDIT frame per record would double the packet rate.
// The credit rides on the next frame we write anyway (the reader's ACKs included); a
// standalone CREDIT goes out at once when a big share of the ring came free since the
// last credit (the sender may be waiting for it), else after kFlowDelay at most.
void TcpConnection::ReleaseRing(uint64_t position) {
  bool kick = false, arm = false;
  {
    absl::MutexLock l(&mu_);
    if (closed_ || position <= credit_pos_) return;
    credit_pos_ = position;
    credit_dirty_ = true;
    if (position - credit_sent_ >= credit_batch_) {
      credit_due_ = kick = true;
    } else if (!flow_timer_armed_) {
      flow_timer_armed_ = arm = true;
    }
  }
  if (kick) Kick();
  if (arm) asio::post(strand_, [self = shared_from_this()] { self->ArmFlowTimer(); });
}

// Called by the reader when it ran out of bytes (or yields): frames received since the
// last ack we wrote are acknowledged now if there are many (or a duplicate showed the
// peer missed an ack), else within kFlowDelay unless another frame carries the ack first.
void TcpConnection::AckReceived() {
  if (in_seq_ > ack_sent_ && in_seq_ - ack_sent_ >= kAckEveryFrames) ack_due_ = true;
  if (ack_due_) return Flush();
  if (in_seq_ == ack_sent_) return;
  {
    absl::MutexLock l(&mu_);
    if (flow_timer_armed_) return;
    flow_timer_armed_ = true;
  }
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
        }
        if (ec) return;
        if (self->in_seq_ != self->ack_sent_) self->ack_due_ = true;
        self->Flush();
      }));
}

absl::Status TcpConnection::ProcessAck(uint64_t ack_seq) {
  absl::MutexLock l(&mu_);
  if (ack_seq > out_seq_) {
    return absl::InvalidArgumentError(
        absl::StrFormat("peer acknowledged seq %d but we only sent up to %d", ack_seq, out_seq_));
  }
  bool any = false;
  while (!sent_.empty() && sent_.front()->seq <= ack_seq) {
    ReleaseAccountingLocked(*sent_.front());
    sent_.pop_front();
    any = true;
  }
  if (any) cv_.SignalAll();
  return absl::OkStatus();
}

absl::Status TcpConnection::ProcessCredit(uint64_t released) {
  absl::MutexLock l(&mu_);
  if (!producer_) {
    return absl::InvalidArgumentError("ring credit on a connection without a ring");
  }
  if (!producer_->OnCredit(released)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring credit %d is beyond what we produced (%d)", released, producer_->produced()));
  }
  cv_.SignalAll();
  return absl::OkStatus();
}

}  // namespace msgr::tcp

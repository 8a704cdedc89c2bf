// RdmaConnection: the message path of an open link (completions, SENDs). The ring
// records are in rdma_record_writer.cc (client) and rdma_ring_owner.cc (OSD).
//
//   Messages   fragments through registered send buffers -> SEND -> the peer's receive
//              pool; count-based credits (+ack) piggybacked on every SEND header, a
//              control SEND when nothing carries them. The last credit is kept for a
//              control SEND that returns at least half the pool, so credits never
//              deadlock and RNR never happens.
//   Records    staged in a registered mirror of the peer's ring (same offsets), then one
//              RDMA WRITE of [header with seq 0 | oid | payload] and an ordered 8-byte
//              RDMA WRITE of seq on the same QP (PAD record first when wrapped).
//   Credits    the OSD RDMA-WRITEs its released ring position into the client's control
//              region; the client reads it there (no message, no round trip). The credit
//              is also the acknowledgement of the records it covers (msg/record_acks.h):
//              the client's completion loop, or a caller in Messenger::Poll, polls it.
//   Doorbells  the OSD writes a sleep word there too; a client that sees it odd after
//              publishing a record sets the doorbell flag on its next SEND.
#include <poll.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "msg/rdma/rdma_connection.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {

void RdmaConnection::RetireDeferred() {
  std::shared_ptr<Link> r;
  {
    absl::MutexLock l(&mu_);
    r = std::move(retire_);
  }
  Retire(std::move(r));
}

void RdmaConnection::CountFrameLocked(std::shared_ptr<Link>* retired) {
  ++frames_sent_;
  const uint32_t every = shared_->options.inject_socket_failures;
  if (every != 0 && frames_sent_ % every == 0 && link_) {
    FaultLocked(link_.get(), absl::UnavailableError("injected socket failure"), retired);
  }
}

// ---------------------------------------------------------------- completions

void RdmaConnection::HandleCompletions(Link* link, const verbs::Completion* wc, int n) {
  uint64_t max_wr = 0;
  for (int i = 0; i < n; ++i) {
    if ((wc[i].wr_id & kRecvWrBit) == 0) max_wr = std::max(max_wr, wc[i].wr_id);
  }
  if (max_wr != 0) link->tp->OnSendCompleted(max_wr);
  absl::Status qp_error;
  {
    absl::MutexLock l(&mu_);
    for (int i = 0; i < n; ++i) {
      if (link_.get() != link) break;  // retired (now or earlier): ignore the rest
      const verbs::Completion& c = wc[i];
      const bool recv = (c.wr_id & kRecvWrBit) != 0;
      if (c.status != verbs::WcStatus::kSuccess) {
        qp_error = absl::UnavailableError(absl::StrCat(
            "RDMA ", recv ? "receive" : "send", " completion failed: ",
            verbs::WcStatusName(c.status), " (vendor error ", c.vendor_err, ")"));
        break;
      }
      if (recv) OnRecvLocked(link, c, &retire_);
    }
    if (link_.get() == link && qp_error.ok()) {
      if (credit_dirty_) PostCreditLocked();
      CheckDoorbellLocked();
      FlushLocked();
    }
  }
  RetireDeferred();
  DeliverAcks();
  if (!qp_error.ok()) {
    // A refused access is reported to its responder as an asynchronous event, queued
    // around the flushed completions: handle it first, so the session is cut off rather
    // than faulted (and, lossy, reset for the wrong reason).
    shared_->DrainAsyncEvents();
    // A peer that marks the session down sends CLOSE on the side channel before it
    // destroys its QP: read it first, so the session ends (OnReset) instead of waiting
    // for a reconnect that will not come.
    pollfd p{link->ch->fd(), POLLIN, 0};
    if (poll(&p, 1, 20) > 0) HandleSideReadable(link);
    Fault(link, qp_error);
  }
}

void RdmaConnection::OnRecvLocked(Link* link, const verbs::Completion& wc,
                                  std::shared_ptr<Link>* retired) {
  shared_->counters.recvs_completed++;
  const uint32_t idx = static_cast<uint32_t>(wc.wr_id & ~kRecvWrBit);
  if (wc.opcode == verbs::WcOpcode::kRecvRdmaWithImm) {
    // Zero bytes written, the buffer untouched: only the immediate says something.
    if (ring_) {
      // From the ring's client: a doorbell (wake the ring's poller) or a request for a
      // credit wake-up (as kSendWantCreditWakeup, with the credit's low bits).
      if ((wc.imm_data & kImmWantCreditWakeup) != 0) {
        credit_wakeup_wanted_ = true;
        if ((nack_barrier_.Clamp(released_pos_) & kImmValueMask) !=
            (wc.imm_data & kImmValueMask)) {
          credit_dirty_ = true;
        }
      } else {
        shared_->counters.doorbells_received++;
        ring_->Signal();
      }
    } else if (ctrl_mr_ && producer_) {
      // A credit wake-up (only the ring's client asks for one): the credit word is new, or
      // the one we saw confirmed. Applied here, delivered by HandleCompletions.
      wakeup_asked_ = false;
      // An application that polls (Messenger::Poll) collects its acks itself: the word is
      // left to it, as the completion thread leaves it (app_polling()).
      if (!app_polling()) ApplyCreditLocked();
    } else {
      shared_->counters.protocol_errors++;
      FaultLocked(link, absl::InvalidArgumentError("unexpected RDMA WRITE_WITH_IMM"), retired);
      return;
    }
    RepostRecvLocked(link, idx, retired);
    return;
  }
  const uint8_t* buf = link->tp->recv_buffer(idx);
  SendHeader h;
  absl::Status bad = DecodeSendHeader(buf, wc.byte_len, &h);
  if (bad.ok() && h.kind == SendKind::kFragment) {
    if (h.total_len > shared_->options.max_message_bytes) {
      bad = absl::InvalidArgumentError(absl::StrCat("message of ", h.total_len,
                                                    " bytes exceeds max_message_bytes"));
    } else if ((h.flags & kSendFirst) != 0) {
      if (reasm_active_) bad = absl::InvalidArgumentError("message fragments interleaved");
    } else if (!reasm_active_ || h.seq != reasm_seq_) {
      bad = absl::InvalidArgumentError("message fragment without its first fragment");
    }
  }
  if (!bad.ok()) {
    if (absl::IsDataLoss(bad)) {
      shared_->counters.crc_errors++;
    } else {
      shared_->counters.protocol_errors++;
    }
    FaultLocked(link, bad, retired);
    return;
  }
  send_credits_ += h.credits;
  if (h.ack_seq > 0) AckLocked(h.ack_seq);
  if ((h.flags & kSendWantCreditWakeup) != 0 && ring_) {
    // The client's completion thread sleeps until our next credit: write it WITH_IMM; at
    // once if it has not seen the current one.
    credit_wakeup_wanted_ = true;
    if (nack_barrier_.Clamp(released_pos_) != h.seq) credit_dirty_ = true;
  } else if (credit_wakeup_wanted_ && h.credits > 0) {
    credit_dirty_ = true;  // a wake-up that waited for a send credit can go now
  }
  if ((h.flags & kSendDoorbell) != 0) {
    shared_->counters.doorbells_received++;
    if (ring_) ring_->Signal();
  }
  if (h.kind == SendKind::kFragment) {
    if ((h.flags & kSendFirst) != 0) {
      reasm_active_ = true;
      reasm_seq_ = h.seq;
      reasm_type_ = h.msg_type;
      reasm_.clear();
      reasm_.reserve(h.total_len);
    }
    reasm_.append(reinterpret_cast<const char*>(buf + kSendHeaderBytes), h.frag_len);
    if ((h.flags & kSendLast) != 0) {
      reasm_active_ = false;
      if (reasm_.size() != h.total_len) {
        shared_->counters.protocol_errors++;
        FaultLocked(link, absl::InvalidArgumentError("message length mismatch"), retired);
        return;
      }
      const session::SeqCheck seq = session::CheckIncoming(h.seq, in_seq_);
      if (seq == session::SeqCheck::kGap) {
        shared_->counters.protocol_errors++;
        FaultLocked(link, session::GapError(h.seq, in_seq_), retired);
        return;
      }
      if (seq == session::SeqCheck::kDuplicate) {
        shared_->counters.duplicates_dropped++;
      } else if (reasm_type_ == kRecordNackType) {  // the messenger's own (record_acks.h)
        in_seq_ = h.seq;
        auto failed = DecodeRecordNack(reasm_);
        if (!failed.ok()) {
          shared_->counters.protocol_errors++;
          FaultLocked(link, failed.status(), retired);
          return;
        }
        sent_records_.OnNack(*failed, &acks_ready_);
        acks_pending_.store(!acks_ready_.empty(), std::memory_order_release);
        nack_ack_owed_ = true;  // the sender's credit waits for this ack, lossy or not
      } else {
        in_seq_ = h.seq;
        shared_->counters.msgs_received++;
        shared_->counters.bytes_received += reasm_.size();
        Message m;
        m.type = reasm_type_;
        m.payload = std::move(reasm_);
        reasm_ = std::string();
        auto shared = std::make_shared<Message>(std::move(m));
        Dispatch([shared](const ConnectionRef& c) {
          static_cast<RdmaConnection*>(c.get())->shared_->dispatcher->OnMessage(
              c, std::move(*shared));
        });
      }
    }
  }
  RepostRecvLocked(link, idx, retired);
}

void RdmaConnection::RepostRecvLocked(Link* link, uint32_t idx, std::shared_ptr<Link>* retired) {
  if (absl::Status s = link->tp->RepostRecv(idx); !s.ok()) {
    FaultLocked(link, s, retired);
    return;
  }
  ++credits_owed_;  // returned to the peer as a send credit
}

// ---------------------------------------------------------------- SEND path

bool RdmaConnection::PostControlLocked(uint8_t flags, uint64_t seq) {
  Transport* tp = link_->tp.get();
  const int b = tp->TakeSendBuffer();
  if (b < 0) return false;
  SendHeader h;
  h.kind = SendKind::kControl;
  h.flags = flags;
  h.credits = credits_owed_;
  h.ack_seq = in_seq_;
  h.seq = seq;
  EncodeSendHeader(h, tp->send_buffer(b));
  WrSpec w;
  w.opcode = verbs::WrOpcode::kSend;
  w.sge = tp->SendBufferSge(b, kSendHeaderBytes);
  w.send_buffer = b;
  w.signal = tp->free_send_buffers() < static_cast<int>(tp->config().send_buffers / 2);
  auto r = tp->Post(absl::MakeConstSpan(&w, 1));
  if (!r.ok()) {
    tp->ReturnSendBuffer(b);
    if (!absl::IsResourceExhausted(r.status())) FaultLocked(link_.get(), r.status(), &retire_);
    return false;
  }
  --send_credits_;
  credits_owed_ = 0;
  ack_sent_ = in_seq_;
  nack_ack_owed_ = false;
  shared_->counters.control_sends++;
  shared_->counters.sends_posted++;
  if ((flags & kSendDoorbell) != 0) {
    doorbell_pending_ = false;
    shared_->counters.doorbells_sent++;
  }
  return true;
}

bool RdmaConnection::PostImmLocked(uint32_t imm) {
  if (!PostEmptyImmLocked(imm)) return false;
  --send_credits_;
  return true;
}

bool RdmaConnection::PostEmptyImmLocked(uint32_t imm) {
  Link* link = link_.get();
  if (link->ring_rkey == 0) return false;
  WrSpec w;
  w.opcode = verbs::WrOpcode::kRdmaWriteWithImm;  // no bytes: only the completion matters
  w.remote_addr = link->ring_addr;
  w.rkey = link->ring_rkey;
  w.imm = imm;
  auto r = link->tp->Post(absl::MakeConstSpan(&w, 1));
  if (!r.ok()) {
    if (!absl::IsResourceExhausted(r.status())) FaultLocked(link, r.status(), &retire_);
    return false;
  }
  return true;
}

void RdmaConnection::FlushLocked() {
  while (link_ && !closed_ && !unsent_.empty() && send_credits_ >= 2) {
    Link* link = link_.get();
    Transport* tp = link->tp.get();
    OutMsg& m = unsent_.front();
    const int b = tp->TakeSendBuffer();
    if (b < 0) break;
    const size_t frag = std::min<size_t>(link->frag_bytes, m.payload.size() - m.sent);
    SendHeader h;
    h.kind = SendKind::kFragment;
    h.flags = (m.sent == 0 ? kSendFirst : 0) | (m.sent + frag == m.payload.size() ? kSendLast : 0) |
              (doorbell_pending_ ? kSendDoorbell : 0);
    h.msg_type = m.type;
    h.credits = credits_owed_;
    h.frag_len = static_cast<uint32_t>(frag);
    h.seq = m.seq;
    h.ack_seq = in_seq_;
    h.total_len = static_cast<uint32_t>(m.payload.size());
    uint8_t* p = tp->send_buffer(b);
    EncodeSendHeader(h, p);
    std::memcpy(p + kSendHeaderBytes, m.payload.data() + m.sent, frag);
    WrSpec w;
    w.opcode = verbs::WrOpcode::kSend;
    w.sge = tp->SendBufferSge(b, static_cast<uint32_t>(kSendHeaderBytes + frag));
    w.send_buffer = b;
    w.signal = tp->free_send_buffers() < static_cast<int>(tp->config().send_buffers / 2);
    auto r = tp->Post(absl::MakeConstSpan(&w, 1));
    if (!r.ok()) {
      tp->ReturnSendBuffer(b);
      if (!absl::IsResourceExhausted(r.status())) FaultLocked(link, r.status(), &retire_);
      break;
    }
    --send_credits_;
    credits_owed_ = 0;
    ack_sent_ = in_seq_;
    nack_ack_owed_ = false;
    shared_->counters.sends_posted++;
    if ((h.flags & kSendDoorbell) != 0) {
      doorbell_pending_ = false;
      shared_->counters.doorbells_sent++;
    }
    m.sent += frag;
    m.ever_sent = true;
    if (m.sent == m.payload.size()) {
      shared_->counters.msgs_sent++;
      shared_->counters.bytes_sent += m.payload.size();
      if (lossless_ || m.type == kRecordNackType) {  // a nack holds the credit: kept until acked
        unacked_.Sent(std::move(m));
      } else {
        flow_.Release(m.payload.size(), &shared_->bytes_in_flight);
        cv_.SignalAll();
      }
      unsent_.pop_front();
      CountFrameLocked(&retire_);
    }
  }
  if (!link_ || closed_) return;
  // Half the receives the peer may fill with messages: an OSD keeps the record imms'
  // share of its pool apart (PROTOCOL.md "Record notifications").
  const uint32_t half =
      (link_->tp->config().recv_buffers - (outgoing_ ? 0 : link_->record_imm_credits)) / 2;
  const bool owe_much = credits_owed_ >= half;
  if (send_credits_ >= 2) {
    // A doorbell goes with a CONTROL SEND that is owed anyway, else on its own as a
    // WRITE_WITH_IMM, which wakes the OSD's completion thread with no message to parse (on
    // the soft provider: no socket, no thread of the provider's).
    if (owe_much || ((lossless_ || nack_ack_owed_) && in_seq_ > ack_sent_)) {
      PostControlLocked(doorbell_pending_ ? kSendDoorbell : 0);
    } else if (doorbell_pending_ &&
               PostImmLocked(static_cast<uint32_t>(posted_seq_) & kImmValueMask)) {
      doorbell_pending_ = false;
      shared_->counters.doorbells_sent++;
    }
  } else if (send_credits_ == 1 && owe_much) {
    PostControlLocked(doorbell_pending_ ? kSendDoorbell : 0);
  }
}

}  // namespace msgr::rdma

// RdmaConnection: the OSD (ring owner) side of the ring path: the ring a session's client
// writes into (made, scanned for published records on a resume), its release -- the
// credit RDMA-written into the client's control region, which is also the acknowledgement
// -- and the poller's sleep word (doorbells).
#include "msg/rdma/rdma_connection.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {

absl::Status RdmaConnection::NewRingLocked(size_t bytes, uint64_t first_seq) {
  auto ring = RdmaRecvRing::Create(shared_->ctx, bytes, shared_->budget.get(),
                                   peer_name_.ToString(), first_seq);
  if (!ring.ok()) return ring.status();
  ring_ = *ring;
  std::weak_ptr<RdmaConnection> weak = weak_from_this();
  ring_->set_sleep_hook([weak](bool sleeping) {
    if (auto c = weak.lock()) c->SetPeerSleeping(sleeping);
  });
  return absl::OkStatus();
}

uint64_t RdmaConnection::PublishedEndLocked(uint64_t* next_seq) const {
  uint64_t writes = 0;
  return ScanPublished(*ring_, released_pos_, released_seq_, next_seq, &writes);
}

uint64_t RdmaConnection::ScanPublished(RdmaRecvRing& ring, uint64_t from_pos, uint64_t from_seq,
                                       uint64_t* next_seq, uint64_t* writes) {
  uint64_t pos = from_pos;
  *next_seq = from_seq;
  const uint8_t* base = ring.base();
  const size_t mask = ring.bytes() - 1;
  while (pos - from_pos < ring.bytes()) {
    const uint8_t* slot = base + (pos & mask);
    const auto* h = reinterpret_cast<const RecordHeader*>(slot);
    if (LoadRecordSeq(slot) != *next_seq || h->magic != kRecordMagic ||
        RecordHeaderCrc(*h) != h->header_crc || h->record_bytes == 0 ||
        h->record_bytes % kRingAlign != 0 || h->record_bytes > ring.bytes() - (pos & mask)) {
      break;
    }
    if (h->type == RecordType::kWrite) ++*writes;
    pos += h->record_bytes;
    ++*next_seq;
  }
  return pos;
}

bool RdmaConnection::RingDrainedLocked() const {
  uint64_t next_seq = 0;
  return nack_barrier_.empty() && PublishedEndLocked(&next_seq) == released_pos_;
}

void RdmaConnection::ReleaseRing(uint64_t position, absl::Span<const RecordAck> failed) {
  {
    absl::MutexLock l(&mu_);
    if (!ring_ || position <= released_pos_) return;
    if (!failed.empty()) {
      // Failures first, as a message; the credit waits for its ack (also on lossy
      // sessions: the credit is an RDMA WRITE the peer may read before it has handled
      // the nack's SEND, and would then report the failed records as written).
      nack_barrier_.Add(released_pos_);
      EnqueueLocked(EncodeRecordNack(failed));
      FlushLocked();
    }
    // Walk the released records' headers (never their payload) for seq and counters.
    const uint8_t* base = ring_->base();
    const size_t mask = ring_->bytes() - 1;
    while (released_pos_ < position) {
      const auto* h = reinterpret_cast<const RecordHeader*>(base + (released_pos_ & mask));
      const uint64_t bytes = h->record_bytes;
      if (bytes == 0 || bytes % kRingAlign != 0 || bytes > position - released_pos_) {
        spdlog::error("msgr rdma: session {}: ReleaseRing({}) is not on a record boundary",
                      id_, position);
        released_pos_ = position;
        break;
      }
      if (h->type == RecordType::kWrite) {
        ++writes_released_;
        shared_->counters.records_received++;
        shared_->counters.record_bytes_received += h->payload_len;
      }
      released_pos_ += bytes;
      ++released_seq_;
    }
    credit_dirty_ = true;
    PostCreditLocked();
  }
  RetireDeferred();
}

bool RdmaConnection::ImmCountWrLocked(WrSpec* w, uint64_t* value, uint32_t parts) {
  const ImmCount* count = link_->imm_count.get();
  if (count == nullptr || link_->record_imm_credits == 0 || !count->lagging(parts)) return false;
  *value = count->reposted.load(std::memory_order_relaxed);
  if (*value == count->written.load(std::memory_order_relaxed)) return false;
  w->word = true;
  w->value = *value;
  w->remote_addr = link_->ctrl_addr + kCtrlImmOffset;
  w->rkey = link_->ctrl_rkey;
  return true;
}

void RdmaConnection::WriteImmCount(Link* link) {
  absl::MutexLock l(&mu_);
  if (link_.get() != link || link->ctrl_rkey == 0) return;
  WrSpec w;
  uint64_t value = 0;
  if (!ImmCountWrLocked(&w, &value, 1)) return;
  auto r = link_->tp->Post(absl::MakeConstSpan(&w, 1));
  if (r.ok()) {
    link_->imm_count->written.store(value, std::memory_order_relaxed);
    shared_->counters.imm_count_writes++;
  }  // else: the next credit write carries it
}

void Link::WriteImmCount() {
  if (auto c = conn_.lock()) c->WriteImmCount(this);
}

void RdmaConnection::PostCreditLocked() {
  if (!link_ || !credit_dirty_ || link_->ctrl_rkey == 0) return;
  // The record-imm receives re-posted so far go first (the client reads them when it
  // applies this credit: PROTOCOL.md "Record notifications").
  WrSpec wrs[2];
  uint64_t imm_count = 0;
  const size_t first = ImmCountWrLocked(&wrs[0], &imm_count, 2) ? 1 : 0;
  WrSpec& w = wrs[first];
  w.word = true;
  w.value = nack_barrier_.Clamp(released_pos_);
  w.remote_addr = link_->ctrl_addr + kCtrlCreditOffset;
  w.rkey = link_->ctrl_rkey;
  // A sleeping client asked to be woken: WITH_IMM, which takes one of its receives (a
  // send credit, as a SEND would; the last one stays for control SENDs).
  const bool wake = credit_wakeup_wanted_ && send_credits_ >= 2;
  if (wake) {
    w.opcode = verbs::WrOpcode::kRdmaWriteWithImm;
    w.imm = static_cast<uint32_t>(w.value);
  }
  auto r = link_->tp->Post(absl::MakeConstSpan(wrs, first + 1));
  if (r.ok()) {
    credit_dirty_ = false;
    shared_->counters.ring_credit_writes++;
    if (first == 1) {
      link_->imm_count->written.store(imm_count, std::memory_order_relaxed);
      shared_->counters.imm_count_writes++;
    }
    if (wake) {
      --send_credits_;
      credit_wakeup_wanted_ = false;
      shared_->counters.credit_wakeups_sent++;
    }
  } else if (!absl::IsResourceExhausted(r.status())) {
    FaultLocked(link_.get(), r.status(), &retire_);
  }  // else: retried when completions make room
}

void RdmaConnection::SetPeerSleeping(bool sleeping) {
  std::shared_ptr<Transport> tp;
  uint64_t wr = 0;
  {
    absl::MutexLock l(&mu_);
    if (sleeping == ((sleep_word_ & 1) != 0)) return;
    ++sleep_word_;
    if (!link_ || link_->ctrl_rkey == 0) return;
    WrSpec w;
    w.word = true;
    w.value = sleep_word_;
    w.remote_addr = link_->ctrl_addr + kCtrlSleepOffset;
    w.rkey = link_->ctrl_rkey;
    w.signal = sleeping && !shared_->soft_device;  // waited for below (not on soft)
    auto r = link_->tp->Post(absl::MakeConstSpan(&w, 1));
    if (!r.ok()) return;  // the poller's sleep is bounded; the next transition retries
    shared_->counters.sleep_word_writes++;
    wr = *r;
    tp = link_->tp;
  }
  // The poller re-checks the ring after this returns: the word must have landed first.
  // The soft HCA's WRITE has landed when PostSend returns (verbs/soft/soft_qp.h): waiting
  // for its completion would only wait for our completion thread to poll it, a thread
  // hop per ring per sleep.
  if (sleeping && !shared_->soft_device) tp->WaitRetired(wr, absl::Now() + absl::Milliseconds(100));
  std::atomic_thread_fence(std::memory_order_seq_cst);  // see CheckDoorbellLocked
}

}  // namespace msgr::rdma

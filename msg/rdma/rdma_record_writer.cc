// RdmaConnection: the client side of the ring path (see rdma_datapath.cc for the whole
// data path):
//   Records    staged in a registered mirror of the peer's ring (same offsets), or written
//              from the caller's registered memory (record buffers, large payloads), then
//              one RDMA WRITE of [header with seq 0 | oid | payload] and an ordered 8-byte
//              RDMA WRITE of seq on the same QP (PAD record first when wrapped); resent
//              into the same slots after a reconnect.
//   Credits    read from the control region the OSD writes into (ApplyCreditLocked); the
//              credit acknowledges the records it covers, and ring resizes are asked for
//              when writes wait for space or a ring stays idle.
//   Doorbells  a record published while the OSD's sleep word is odd rings the doorbell.
//   Announcements  where the OSD offers it, each record's seq WRITE goes WITH_IMM to its
//              poller's notifier, while record-imm credits last (PROTOCOL.md "Record
//              notifications"); then no doorbells.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <limits>
#include <thread>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "msg/rdma/rdma_connection.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {
namespace {
uint64_t LoadWord(const uint8_t* p) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(p), __ATOMIC_ACQUIRE);
}
// How many OnRecordsAcked deliveries (HandOverAcks) this thread is inside: their
// callbacks may write (an objecter callback chaining its next write), and such a write
// must not deliver acks itself (DeliverGatheredAcks).
thread_local int tls_delivering_acks = 0;
}  // namespace

void RdmaConnection::ApplyCreditLocked() {
  if (!ctrl_mr_ || !producer_) return;
  const uint64_t released = LoadWord(ctrl_mr_->data() + kCtrlCreditOffset);
  if (released > producer_->released() && !producer_->OnCredit(released)) return;
  credit_seen_.store(released, std::memory_order_relaxed);
  while (!records_.empty() && records_.front().end_position <= producer_->released()) {
    UnpinLocked(&records_.front());
    records_.pop_front();
  }
  sent_records_.OnCredit(producer_->released(), &acks_ready_);
  acks_pending_.store(!acks_ready_.empty(), std::memory_order_release);
  awaiting_acks_.store(sent_records_.size() > 0, std::memory_order_relaxed);
  if (imm_owed_.load(std::memory_order_relaxed)) PostOwedImmLocked();
}

uint32_t RdmaConnection::ImmCreditsLocked() const {
  const Link* link = link_.get();
  if (link == nullptr || link->record_imm_credits == 0 || !ctrl_mr_) return 0;
  const uint64_t word = LoadWord(ctrl_mr_->data() + kCtrlImmOffset);
  imm_word_seen_.store(word, std::memory_order_relaxed);
  const uint64_t back = std::min(word, link->imms_sent);
  const uint64_t out = link->imms_sent - back;
  return out >= link->record_imm_credits ? 0
                                         : link->record_imm_credits - static_cast<uint32_t>(out);
}

void RdmaConnection::PostOwedImmLocked() {
  if (!imm_owed_.load(std::memory_order_relaxed) || !link_) return;
  if (records_.empty()) {  // the OSD found and released them all meanwhile
    imm_owed_.store(false, std::memory_order_relaxed);
    return;
  }
  if (ImmCreditsLocked() == 0) return;  // tried again when credits come back
  // No bytes: the ring has news. It takes a record-imm credit, not a message credit.
  if (!PostEmptyImmLocked(static_cast<uint32_t>(posted_seq_) & kImmValueMask)) return;
  ++link_->imms_sent;
  imm_owed_.store(false, std::memory_order_relaxed);
  shared_->counters.record_imms_sent++;
}

void RdmaConnection::WantGrowLocked(size_t record_bytes) {
  if (!lossless_ || ring_at_max_ || grow_hint_ >= record_bytes) return;
  const bool first = grow_hint_ == 0;
  grow_hint_ = record_bytes;
  if (!first || !link_) return;
  // Asks the completion thread to resize now rather than at its next housekeeping.
  shared_->loop->RunAt(absl::Now(), [w = weak_from_this(), l = std::weak_ptr<Link>(link_)] {
    auto c = w.lock();
    auto link = l.lock();
    if (!c || !link) return;
    absl::MutexLock lock(&c->mu_);
    if (c->link_ == link) c->ResizeIfWantedLocked(link, absl::Now());
  });
}

uint64_t RdmaConnection::RingResizeWantedLocked(absl::Time now) {
  if (!producer_ || !lossless_ || resizing_ || now < resize_not_before_) return 0;
  const size_t cur = producer_->ring_bytes();
  if (grow_hint_ != 0 && !ring_at_max_) {
    // A stream of records of a quarter of the ring or more (large objects, split to what
    // the ring takes) asks for the largest ring the server gives at once: each resize
    // waits for everything in flight to be released, which for 16 durable 4 MiB writes
    // costs tens of ms. Smaller records: 4x, and at least what holds the record that did
    // not fit (MaxRecordBytes: half the ring, less an alignment pad).
    if (grow_hint_ >= cur / 4) return std::numeric_limits<uint64_t>::max();
    uint64_t to = uint64_t{cur} * 4;
    while (to / 2 < grow_hint_ + kPayloadAlign) to *= 2;
    return to;
  }
  grow_hint_ = 0;
  // Idle: the ring's produced position has not moved since the last housekeeping look
  // (it looks every keepalive interval or sooner), so writers pay no clock read for it.
  if (producer_->produced() != idle_produced_) {
    idle_produced_ = producer_->produced();
    idle_since_ = now;
  }
  const absl::Duration idle = shared_->ring_shrink_idle;
  if (idle > absl::ZeroDuration() && cur > ring_initial_bytes_ && records_.empty() &&
      idle_since_ + idle <= now) {
    return ring_initial_bytes_;
  }
  return 0;
}

void RdmaConnection::ResizeIfWantedLocked(const std::shared_ptr<Link>& link, absl::Time now) {
  const uint64_t to = RingResizeWantedLocked(now);
  if (to == 0) return;
  // Writers hold off from here on; what they wrote must be released before the ring may
  // change (the server only resizes a drained ring, PROTOCOL.md "Ring sizes").
  resizing_ = true;
  CheckResizeDrainLocked(link, to, now + shared_->options.handshake_timeout);
}

void RdmaConnection::CheckResizeDrainLocked(const std::shared_ptr<Link>& link, uint64_t to,
                                            absl::Time deadline) {
  // In flight includes a record a writer reserved ring space for (sent_records_, under
  // mu_ with the reservation) and has not posted yet (records_, later): resizing then
  // would leave it on the old ring, and the resumed session would be refused for good.
  const bool in_flight = !records_.empty() || sent_records_.size() != 0;
  // A fault meanwhile gave the resize up (FaultLocked); the next link starts afresh.
  if (link_ != link || closed_ || shared_->stopping) return;
  if (!in_flight) {
    // Nothing in flight: reconnect and resume, asking for the new size (the server
    // replaces the ring; PROTOCOL.md "Ring sizes"). Faulted from the loop (Fault takes mu_).
    ring_request_ = to;
    resize_faulting_ = true;
    const size_t from = producer_->ring_bytes();
    shared_->loop->RunAt(absl::Now(), [w = weak_from_this(), l = std::weak_ptr<Link>(link),
                                       from, to] {
      auto c = w.lock();
      auto link = l.lock();
      if (!c || !link) return;
      c->Fault(link.get(),
               absl::AbortedError(absl::StrCat(
                   "resizing the ring from ", from >> 10, " KiB to ",
                   to == std::numeric_limits<uint64_t>::max()
                       ? std::string("the largest the peer gives")
                       : absl::StrCat(to >> 10, " KiB"))));
    });
    return;
  }
  if (absl::Now() >= deadline) {
    // Records stayed in flight: the resize is given up for a while.
    resizing_ = false;
    grow_hint_ = 0;
    resize_not_before_ = absl::Now() + kRingResizeBackoff;
    cv_.SignalAll();  // writers held off
    return;
  }
  // Looked at again shortly (the completion thread applies credits meanwhile).
  shared_->loop->RunAt(absl::Now() + kResizeDrainCheck,
                       [w = weak_from_this(), l = std::weak_ptr<Link>(link), to, deadline] {
                         auto c = w.lock();
                         auto link = l.lock();
                         if (!c || !link) return;
                         absl::MutexLock lock(&c->mu_);
                         c->CheckResizeDrainLocked(link, to, deadline);
                       });
}

bool RdmaConnection::app_polling() const {
  return absl::GetCurrentTimeNanos() - shared_->app_polled_ns.load(std::memory_order_relaxed) <
         shared_->app_poll_window_ns;
}

bool RdmaConnection::ArmCreditWakeup() {
  absl::MutexLock l(&mu_);
  if (!link_ || closed_ || !ctrl_mr_ || !producer_) return false;
  if (wakeup_asked_) return true;
  // The application polls for its acks itself: no wake-up for the completion thread.
  if (app_polling()) return false;
  // As FlushLocked: the last send credit is kept for a control SEND that returns credits.
  if (send_credits_ < 2) return false;
  // A WRITE_WITH_IMM (no message for the OSD to parse; on the soft provider no socket):
  // the credit seen rides in its immediate.
  const uint64_t seen = credit_seen_.load(std::memory_order_relaxed);
  if (!PostImmLocked(kImmWantCreditWakeup | (static_cast<uint32_t>(seen) & kImmValueMask))) {
    return false;
  }
  wakeup_asked_ = true;
  shared_->counters.credit_wakeups_asked++;
  return true;
}

bool RdmaConnection::PollAcks() {
  if (!awaiting_acks() || !ctrl_mr_) return false;
  // A new credit, or (a record owes its announcement) imm credits back: applied below.
  if (LoadWord(ctrl_mr_->data() + kCtrlCreditOffset) ==
          credit_seen_.load(std::memory_order_relaxed) &&
      (!imm_owed_.load(std::memory_order_relaxed) ||
       LoadWord(ctrl_mr_->data() + kCtrlImmOffset) ==
           imm_word_seen_.load(std::memory_order_relaxed))) {
    return false;
  }
  // Whoever holds a lock (a writer reserving, the completion thread delivering) applies
  // the credit itself: do not queue up behind it.
  if (!ack_mu_.TryLock()) return false;
  if (!mu_.TryLock()) {
    ack_mu_.Unlock();
    return false;
  }
  ApplyCreditLocked();
  // Deliver what this thread gathered itself (ack_mu_ keeps the order): left in
  // acks_ready_, the completion thread could take it -- a thread hop for a caller that
  // polls so as not to have one.
  TakeAcksLocked();
  mu_.Unlock();
  HandOverAcks();
  HandOverPendingAcks();  // what its callbacks' writes gathered
  ack_mu_.Unlock();
  ReleaseUnpinned();
  return true;
}

void RdmaConnection::UnpinLocked(SentRecord* r) {
  if (!r->payload_mr) return;
  Unpin u;
  u.tp = r->posted_tp;
  u.after_wr = r->posted_wr;
  u.owner = std::move(r->owner);
  u.payload_mr = std::move(r->payload_mr);
  unpin_.push_back(std::move(u));
  unpin_pending_.store(true, std::memory_order_release);
}

void RdmaConnection::ReleaseUnpinned() {
  // Called after every write and completion batch: no lock unless something is pinned.
  if (!unpin_pending_.load(std::memory_order_acquire)) return;
  UnpinList done;
  {
    absl::MutexLock l(&mu_);
    TakeUnpinnedLocked(&done);
  }
  // `done` goes here, outside mu_: registrations first, then the caller's buffers.
}

void RdmaConnection::TakeUnpinnedLocked(UnpinList* done) {
  while (!unpin_.empty()) {
    Unpin& u = unpin_.front();
    std::shared_ptr<Transport> tp = u.tp.lock();
    if (tp && !tp->dead() && tp->retired() < u.after_wr) break;
    done->push_back(std::move(u));
    unpin_.pop_front();
  }
  unpin_pending_.store(!unpin_.empty(), std::memory_order_release);
}

void RdmaConnection::DeliverAcks() {
  ReleaseUnpinned();
  DeliverGatheredAcks();
}

void RdmaConnection::DeliverGatheredAcks() {
  // A write from inside an ack callback leaves what it gathered to the delivery it runs in
  // (the loop below), or to the completion thread: taking ack_mu_ here could be taking it
  // a second time.
  if (!acks_pending_.load(std::memory_order_acquire) || tls_delivering_acks > 0) return;
  absl::MutexLock d(&ack_mu_);
  HandOverPendingAcks();
}

void RdmaConnection::HandOverPendingAcks() {
  // Bounded: what callbacks keep gathering beyond this, the completion thread or the next
  // writer delivers.
  for (int pass = 0; pass < 4 && acks_pending_.load(std::memory_order_acquire); ++pass) {
    {
      absl::MutexLock l(&mu_);
      TakeAcksLocked();
    }
    HandOverAcks();
  }
}

void RdmaConnection::TakeAcksLocked() {
  acks_taken_.clear();
  acks_taken_.swap(acks_ready_);
  acks_pending_.store(false, std::memory_order_relaxed);
}

void RdmaConnection::HandOverAcks() {
  if (acks_taken_.empty() || shared_->stopping) return;
  ++tls_delivering_acks;
  shared_->dispatcher->OnRecordsAcked(shared_from_this(), acks_taken_);
  --tls_delivering_acks;
  acks_taken_.clear();
}

void RdmaConnection::CheckDoorbellLocked() {
  if (!ctrl_mr_ || !link_ || posted_seq_ == 0) return;
  // Records announced WITH_IMM need no doorbell: the poller's notifier wakes it.
  if (link_->record_imm_credits > 0) {
    PostOwedImmLocked();
    return;
  }
  // Dekker with the poller: our seq store (a CPU store on the soft provider) must be
  // visible before we look at its sleep word; it orders its word store before its ring load.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  const uint64_t w = LoadWord(ctrl_mr_->data() + kCtrlSleepOffset);
  if ((w & 1) == 0) return;
  // One doorbell per sleep: the poller drains its eventfd before it publishes a sleep
  // word, so a doorbell sent after we saw that word always wakes it, and it looks at the
  // ring again after it wakes -- records published meanwhile need no doorbell of their
  // own (osd_sim/poller.cc, Poller::Sleep).
  if (w == doorbelled_word_) return;
  doorbelled_word_ = w;
  doorbell_pending_ = true;
  FlushLocked();
}

absl::Status RdmaConnection::PostRecordLocked(const SentRecord& r) {
  if (!link_) return absl::UnavailableError("not connected");
  Link* link = link_.get();
  WrSpec w[kMaxRecordWrs];
  size_t n = 0;
  if (r.has_pad) {
    w[n].sge = mirror_mr_->Slice(r.pad_offset, kRecordHeaderBytes);
    w[n].remote_addr = link->ring_addr + r.pad_offset;
    w[n++].rkey = link->ring_rkey;
    w[n].word = true;
    w[n].value = r.pad_seq;
    w[n].remote_addr = link->ring_addr + r.pad_offset + offsetof(RecordHeader, seq);
    w[n++].rkey = link->ring_rkey;
  }
  // The record from its slot start: one WRITE from the mirror, or (zero copy) header+oid
  // from the mirror and the payload from the caller's memory -- two WRITEs that land in
  // order, both before the seq word.
  const uint32_t from_mirror = r.payload_mr ? r.head_bytes : r.bytes;
  w[n].sge = mirror_mr_->Slice(r.offset, from_mirror);
  w[n].remote_addr = link->ring_addr + r.offset;
  if (shared_->TakeInjectedOutOfRingWrite()) {
    w[n].remote_addr = link->ring_addr + link->ring_bytes;  // injected: just past the end
  }
  w[n++].rkey = link->ring_rkey;
  if (r.payload_mr) {
    w[n].sge = r.payload_mr->Slice(r.payload_mr_offset, r.bytes - r.head_bytes);
    w[n].remote_addr = link->ring_addr + r.offset + r.head_bytes;
    w[n++].rkey = link->ring_rkey;
  }
  w[n].word = true;
  w[n].value = r.seq;
  w[n].remote_addr = link->ring_addr + r.offset + offsetof(RecordHeader, seq);
  w[n].rkey = link->ring_rkey;
  // Announced (PROTOCOL.md "Record notifications"): the seq WRITE carries an immediate,
  // which completes at the poller's notifier after the record has landed -- while a
  // credit is left; else the record goes without and a later imm announces it.
  const bool announce = link->record_imm_credits > 0 && ImmCreditsLocked() > 0;
  if (announce) {
    w[n].opcode = verbs::WrOpcode::kRdmaWriteWithImm;
    w[n].imm = static_cast<uint32_t>(r.seq) & kImmValueMask;
  }
  w[n++].signal = true;  // its completion proves the record landed: doorbell check
  auto s = link->tp->Post(absl::MakeConstSpan(w, n));
  if (!s.ok()) return s.status();
  if (announce) {
    ++link->imms_sent;
    // The poller drains the whole ring for it: earlier records owed nothing more.
    imm_owed_.store(false, std::memory_order_relaxed);
    shared_->counters.record_imms_sent++;
  } else if (link->record_imm_credits > 0) {
    imm_owed_.store(true, std::memory_order_relaxed);
    shared_->counters.record_imms_owed++;
  }
  if (r.payload_mr) {  // the HCA reads the caller's memory until WR *s completes
    for (auto it = records_.rbegin(); it != records_.rend(); ++it) {
      if (it->seq == r.seq) {
        it->posted_tp = link->tp;
        it->posted_wr = *s;
        break;
      }
    }
  }
  shared_->counters.record_writes_posted += n;
  posted_seq_ = std::max(posted_seq_, r.seq);
  return absl::OkStatus();
}

absl::Status RdmaConnection::PostRecordWaiting(const SentRecord& r, absl::Time deadline) {
  for (;;) {
    std::shared_ptr<Transport> tp;
    {
      absl::MutexLock l(&mu_);
      if (!link_) return absl::UnavailableError("not connected");
      absl::Status s = PostRecordLocked(r);
      if (!absl::IsResourceExhausted(s)) {
        if (s.ok()) CheckDoorbellLocked();
        return s;
      }
      tp = link_->tp;
    }
    if (!tp->WaitForRoom(kMaxRecordWrs, deadline)) {
      return absl::DeadlineExceededError("RDMA send queue stayed full");
    }
  }
}

void RdmaConnection::ResendRecords(uint64_t from_seq) {
  std::vector<SentRecord> todo;
  {
    absl::MutexLock l(&mu_);
    for (SentRecord r : records_) {
      if (r.seq < from_seq) continue;
      if (r.has_pad && r.pad_seq < from_seq) r.has_pad = false;
      todo.push_back(r);
    }
  }
  for (const SentRecord& r : todo) {
    if (!PostRecordWaiting(r, absl::Now() + shared_->options.handshake_timeout).ok()) break;
    shared_->counters.resends++;
  }
  if (!todo.empty()) {
    absl::MutexLock l(&mu_);
    doorbell_pending_ = true;  // the poller may have gone to sleep meanwhile
    FlushLocked();
  }
}

absl::Status RdmaConnection::WriteRecord(const RecordDesc& desc, std::string_view payload,
                                         absl::Duration timeout) {
  return WriteRecordShared(desc, payload, nullptr, timeout);
}

std::shared_ptr<verbs::MemoryRegion> RdmaConnection::RegisterPayload(std::string_view payload) {
  // Over the budget (or the HCA's own limit), the payload is copied into the (already
  // registered) mirror instead; quietly, as that may happen on every write.
  auto mr = RegisterCharged(*shared_->budget, *shared_->ctx->pd,
                            const_cast<char*>(payload.data()), payload.size(),
                            /*access=*/0, "a zero-copy payload");  // the HCA only reads it
  if (absl::IsResourceExhausted(mr.status())) return nullptr;
  if (!mr.ok()) {
    // Staging is always possible: a full MR table costs a copy, not the write.
    spdlog::warn("msgr rdma: connection {}: cannot register a {} B payload in place ({}); "
                 "copying it",
                 id_, payload.size(), mr.status().ToString());
    return nullptr;
  }
  auto held = std::make_shared<ChargedRegion>(std::move(*mr));
  return std::shared_ptr<verbs::MemoryRegion>(held, held->get());
}

absl::Status RdmaConnection::WriteRecordShared(const RecordDesc& desc, std::string_view payload,
                                               std::shared_ptr<const void> owner,
                                               absl::Duration timeout) {
  if (!outgoing_ || !want_ring_) {
    return absl::FailedPreconditionError("WriteRecord needs a connection opened with want_ring");
  }
  if (desc.oid.empty() || desc.oid.size() > kMaxOidBytes) {
    return absl::InvalidArgumentError("record oid must be 1..256 bytes");
  }
  const absl::Time deadline = absl::Now() + timeout;
  const size_t record_bytes = RecordBytes(desc.oid.size(), payload.size());
  // A payload in a registered record buffer is read from there; a large one elsewhere is
  // registered in place (before any lock is taken: pinning pages may take a while).
  ReservedRecord r;
  if (owner && !payload.empty()) {
    if (auto found = shared_->buffers->Find(payload.data(), payload.size())) {
      r.payload_mr = std::move(found->mr);
      r.payload_mr_offset = found->offset;
      r.from_buffer = true;
    } else if (payload.size() >= shared_->zero_copy_min_bytes) {
      r.payload_mr = RegisterPayload(payload);
    }
  }
  // The common case: the ring has room and no other writer stages. The slot, its session
  // and the mirror come from one critical section, and staging follows under the same
  // record_mu_. Only tried: a writer must not wait for record_mu_ before it knows it has
  // a slot (another may hold it for a resend or a full send queue, and a caller with no
  // time to wait -- a replica forward from a poller -- must return at once).
  if (record_mu_.TryLock()) {
    absl::StatusOr<bool> reserved;
    {
      absl::MutexLock l(&mu_);
      reserved = ReserveRecordLocked(desc, payload.size(), record_bytes, &r);
      if (reserved.ok() && *reserved) {
        r.epoch = session_epoch_;
        r.mirror = mirror_mr_->data();
      }
    }
    if (reserved.ok() && *reserved) {
      absl::Status s = StageAndPostRecord(desc, payload, std::move(owner), std::move(r), deadline);
      record_mu_.Unlock();
      DeliverGatheredAcks();
      return s;
    }
    record_mu_.Unlock();
    if (!reserved.ok()) return reserved.status();
  }
  {
    // Wait for credit without record_mu_, so that a reconnect can resume the session (and
    // deliver the credit) meanwhile.
    bool waited = false;
    int spins = 0;
    absl::MutexLock l(&mu_);
    for (;;) {
      absl::StatusOr<bool> reserved = ReserveRecordLocked(desc, payload.size(), record_bytes, &r);
      if (!reserved.ok()) return reserved.status();
      if (*reserved) break;
      if (absl::Now() >= deadline) {
        return absl::DeadlineExceededError(absl::StrCat(
            "no ring credit from ", addr_, " within ", absl::FormatDuration(timeout)));
      }
      if (!waited) {
        waited = true;
        shared_->counters.ring_credit_waits++;
      }
      // Poll the credit word: spin briefly, then nap.
      mu_.Unlock();
      if (++spins < 100) {
        std::this_thread::yield();
      } else {
        absl::SleepFor(absl::Microseconds(spins < 1000 ? 10 : 200));
      }
      mu_.Lock();
    }
    r.epoch = session_epoch_;
  }
  absl::Status s;
  {
    absl::MutexLock rl(&record_mu_);
    {
      absl::MutexLock l(&mu_);
      if (r.epoch != session_epoch_) {
        // The peer restarted while we waited: this slot belongs to its old ring.
        return absl::UnavailableError(
            absl::StrCat("peer ", addr_, " restarted (session reset)"));
      }
      r.mirror = mirror_mr_->data();
    }
    s = StageAndPostRecord(desc, payload, std::move(owner), std::move(r), deadline);
  }
  DeliverGatheredAcks();
  return s;
}

absl::StatusOr<bool> RdmaConnection::ReserveRecordLocked(const RecordDesc& desc,
                                                         size_t payload_bytes,
                                                         size_t record_bytes,
                                                         ReservedRecord* r) {
  if (closed_ || shared_->stopping) {
    return session::ClosedError(addr_);
  }
  if (!lossless_ && had_session_ && !link_) {
    return absl::UnavailableError(absl::StrCat("connection to ", addr_, " is down"));
  }
  if (!producer_ || resizing_) return false;  // (a resize in progress: wait for the new ring)
  const size_t max_payload = max_record_payload_.load(std::memory_order_relaxed);
  if (payload_bytes > max_payload) {
    if (!lossless_ || ring_at_max_) {
      return absl::InvalidArgumentError(absl::StrCat(
          "record payload of ", payload_bytes, " bytes exceeds ", max_payload));
    }
    WantGrowLocked(record_bytes);  // a larger ring takes it
    return false;
  }
  ApplyCreditLocked();
  std::optional<RingPlacement> p = producer_->Reserve(record_bytes);
  if (!p) {
    WantGrowLocked(record_bytes);  // the ring is full
    return false;
  }
  r->slot = *p;
  // Tells the OSD how deep this writer's queue is (RecordHeader::writer_depth).
  const size_t depth = std::max<size_t>(sent_records_.size(), desc.writer_depth);
  r->writer_depth = static_cast<uint16_t>(std::min<size_t>(depth, 0xffff));
  sent_records_.Add(desc.tid, p->end_position);
  awaiting_acks_.store(true, std::memory_order_relaxed);
  return true;
}

absl::Status RdmaConnection::StageAndPostRecord(const RecordDesc& desc, std::string_view payload,
                                                std::shared_ptr<const void> owner,
                                                ReservedRecord reserved, absl::Time deadline) {
  const RingPlacement* p = &reserved.slot;
  uint8_t* mirror = reserved.mirror;
  const uint16_t writer_depth = reserved.writer_depth;
  const uint64_t epoch = reserved.epoch;
  // Stage the record in the mirror at its ring offset (the client-side copy). mirror_mr_
  // only changes under record_mu_, which we hold.
  SentRecord r;
  r.seq = p->seq;
  r.offset = p->offset;
  // One WRITE from the slot start through the payload: header, gap (aligned layout),
  // oid, payload (ring_format.h).
  const size_t payload_offset = RecordPayloadOffset(desc.oid.size(), payload.size());
  r.bytes = static_cast<uint32_t>(payload_offset + payload.size());
  r.has_pad = p->has_pad;
  r.pad_seq = p->pad_seq;
  r.pad_offset = p->pad_offset;
  r.end_position = p->end_position;
  uint8_t* slot = mirror + p->offset;
  uint8_t* oid = slot + payload_offset - desc.oid.size();
  std::memset(slot + kRecordHeaderBytes, 0, oid - (slot + kRecordHeaderBytes));  // the gap
  std::memcpy(oid, desc.oid.data(), desc.oid.size());
  const uint8_t* body = reinterpret_cast<const uint8_t*>(payload.data());
  if (reserved.payload_mr) {
    shared_->counters.zero_copy_records++;
    if (reserved.from_buffer) shared_->counters.record_buffer_records++;
    r.payload_mr = std::move(reserved.payload_mr);
    r.payload_mr_offset = reserved.payload_mr_offset;
    r.owner = std::move(owner);
    r.head_bytes = static_cast<uint32_t>(payload_offset);
  } else {
    std::memcpy(oid + desc.oid.size(), payload.data(), payload.size());
    body = oid + desc.oid.size();
    shared_->counters.record_payload_bytes_staged += payload.size();
    shared_->counters.payload_bytes_copied_tx += payload.size();
  }
  // The soft HCA's WRITE is a memcpy by this process's CPU (a real HCA's DMA is none).
  if (shared_->soft_device) shared_->counters.payload_bytes_copied_tx += payload.size();
  const uint32_t payload_crc =
      session::OutgoingRecordCrc(desc, oid, body, payload.size(), &shared_->counters);
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, desc.flags, p->seq,
                   static_cast<uint16_t>(desc.oid.size()), static_cast<uint32_t>(payload.size()),
                   payload_crc, shared_->options.name.id, desc.tid, desc.object_offset,
                   writer_depth);
  h.seq = 0;  // published by the second WRITE
  std::memcpy(slot, &h, sizeof(h));
  if (p->has_pad) {
    RecordHeader pad;
    FillRecordHeader(&pad, RecordType::kPad, 0, p->pad_seq, 0, 0, 0, 0, 0, 0);
    pad.record_bytes = p->pad_bytes;
    pad.header_crc = RecordHeaderCrc(pad);
    pad.seq = 0;
    std::memcpy(mirror + p->pad_offset, &pad, sizeof(pad));
  }
  // Queue the record for resends and post it, under one lock when the send queue has
  // room (the common case); with it, what a write usually finds to clean up: a link a
  // fault retired, payloads the HCA is done with.
  absl::Status s;
  std::shared_ptr<Link> retired;
  UnpinList unpinned;
  {
    absl::MutexLock l(&mu_);
    if (epoch != session_epoch_) {
      return absl::UnavailableError(absl::StrCat("peer ", addr_, " restarted (session reset)"));
    }
    // Closed while we staged: DropQueuesLocked has run, so a record added now would keep
    // its payload's owner until this connection is destroyed (an owner may be waiting for
    // it: a replicated write's ack, osd_sim/replicator.cc).
    if (closed_) return session::ClosedError(addr_);
    auto at = records_.end();  // concurrent writers may post out of order: keep seq order
    while (at != records_.begin() && std::prev(at)->seq > r.seq) --at;
    records_.insert(at, r);
    shared_->counters.records_sent++;
    shared_->counters.record_bytes_sent += payload.size();
    if (!link_) {
      s = absl::UnavailableError("not connected");
    } else {
      s = PostRecordLocked(r);
      if (s.ok()) {
        CheckDoorbellLocked();
        CountFrameLocked(&retire_);
      }
    }
    retired = std::move(retire_);
    TakeUnpinnedLocked(&unpinned);
  }
  if (retired) Retire(std::move(retired));
  if (absl::IsResourceExhausted(s)) {  // the send queue is full: wait for room, unlocked
    s = PostRecordWaiting(r, std::max(deadline, absl::Now() + absl::Seconds(1)));
    {
      absl::MutexLock l(&mu_);
      if (s.ok()) CountFrameLocked(&retire_);
    }
    RetireDeferred();
  }
  unpinned.clear();  // registrations and the callers' buffers, outside mu_
  if (!s.ok() && !lossless_) return s;
  return absl::OkStatus();  // lossless: rewritten into its slot after the reconnect
}

}  // namespace msgr::rdma

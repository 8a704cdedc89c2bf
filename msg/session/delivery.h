// Delivery rules of a session, the same on every backend and sans-I/O (msg/PROTOCOL.md,
// "Sessions"): which messages may be sent, how many may be in flight, how data frames
// are numbered, acknowledged, resent after a reconnect and deduplicated.
//
//   sender                                 receiver
//   data frames get seq 1, 2, ...    -->   seq == in_seq + 1: new (deliver, in_seq moves)
//   keeps each until ack_seq covers it     seq <= in_seq: a resend it already has (drop,
//   (lossless); after a reconnect the                     ack again)
//   peer's in_seq (handshake) acks what    else: a gap, a protocol error
//   it has, the rest is resent in order
//
// A backend owns the frames and their memory; these classes only keep the order and the
// accounting, so both backends apply one rule and say one thing when it is broken.
//
// Thread-safety: none inside; callers hold their connection's lock.
#ifndef MSGR_MSG_SESSION_DELIVERY_H_
#define MSGR_MSG_SESSION_DELIVERY_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "msg/messenger.h"
#include "msg/messenger_counters.h"

namespace msgr::session {

// Why `m` cannot be sent at all (a reserved type, over max_message_bytes); OK otherwise.
absl::Status CheckOutgoingMessage(const Message& m, const MessengerOptions& options);

// What a session's end is called, the same on every backend (`peer` is its address, or
// its name and address):
// a Send or WriteRecord on a connection that is closed (marked down, reset, or its
// messenger shut down): FAILED_PRECONDITION "connection to PEER is closed (marked down or
// reset)";
absl::Status ClosedError(absl::string_view peer);
// the application marked it down (OnReset's status): CANCELLED "connection to PEER marked
// down";
absl::Status MarkedDownError(absl::string_view peer);
// a lossless session whose peer did not come back in time: DEADLINE_EXCEEDED "PEER did
// not reconnect within T; session ended".
absl::Status ReconnectTimeoutError(absl::string_view peer, absl::Duration timeout);
// an accepted session its peer replaced with a new one (msg/session/session_table.h: it
// came back with a new cookie, having restarted): UNAVAILABLE "client.4 restarted (new
// session from ADDR)".
absl::Status ReplacedError(const EntityName& peer, absl::string_view addr);

// ------------------------------------------------------------------- ring records

// The payload crc32c a sender writes into a record's header: the caller's
// (RecordDesc::payload_crc), else RecordPayloadCrc over `oid` then `payload`, whose bytes
// it then counts in `c->record_crc_bytes_tx`.
uint32_t OutgoingRecordCrc(const RecordDesc& desc, const void* oid, const void* payload,
                           size_t len, LiveMessengerCounters* c);

// ------------------------------------------------------------------- flow control

// Messages queued or unacknowledged on one session, against the session's limits and the
// messenger-wide byte limit (MessengerOptions). A sender over a limit waits (Send) or is
// refused (TrySend); one message always fits an empty session, however large.
class FlowWindow {
 public:
  // True if a message of `bytes` may join what is in flight now; `messenger_bytes` is the
  // messenger-wide total.
  bool Admits(uint64_t bytes, uint64_t messenger_bytes, const MessengerOptions& o) const;
  // The TrySend refusal: "connection to PEER is over its flow-control limit (...)".
  absl::Status Refusal(const std::string& peer, const MessengerOptions& o) const;
  void Add(uint64_t bytes, std::atomic<uint64_t>* messenger_bytes);
  void Release(uint64_t bytes, std::atomic<uint64_t>* messenger_bytes);
  // Forgets everything in flight (the session is over).
  void Clear(std::atomic<uint64_t>* messenger_bytes);
  uint64_t msgs() const { return msgs_; }
  uint64_t bytes() const { return bytes_; }

 private:
  uint64_t msgs_ = 0;
  uint64_t bytes_ = 0;
};

// ------------------------------------------------------------------- receiver

enum class SeqCheck { kNew, kDuplicate, kGap };

// Classifies data frame `seq` against `in_seq`, the last one received in order.
inline SeqCheck CheckIncoming(uint64_t seq, uint64_t in_seq) {
  if (seq <= in_seq) return SeqCheck::kDuplicate;
  return seq == in_seq + 1 ? SeqCheck::kNew : SeqCheck::kGap;
}

// The protocol error for a gap: "data frame seq 7 out of order (expected 5)".
absl::Status GapError(uint64_t seq, uint64_t in_seq);

// ------------------------------------------------------------------- sender

// Checks the peer's in_seq from a resume handshake: it cannot have received more than we
// sent. (A peer claiming so is broken or not the session's peer.)
absl::Status CheckPeerInSeq(uint64_t peer_in_seq, uint64_t out_seq);

// Items a lossless sender has written and the peer not yet acknowledged, oldest first.
// T is the backend's frame (with a `seq` field) or a pointer to one.
template <typename T>
class SendWindow {
 public:
  // `item` was written; its seq is above every item's here.
  void Sent(T item) { sent_.push_back(std::move(item)); }

  // The peer acknowledged everything up to `ack_seq`: calls release(item) for each such
  // item, oldest first, and forgets it. Returns how many.
  template <typename F>
  size_t Ack(uint64_t ack_seq, F&& release) {
    size_t n = 0;
    while (!sent_.empty() && SeqOf(sent_.front()) <= ack_seq) {
      release(sent_.front());
      sent_.pop_front();
      ++n;
    }
    return n;
  }

  // A new connection of the session: the peer has what it acknowledged (Ack first), and
  // everything else goes back to the front of `unsent`, in order, to be written again.
  // Returns how many items are resent.
  template <typename Queue>
  size_t RequeueInto(Queue* unsent) {
    const size_t n = sent_.size();
    while (!sent_.empty()) {
      unsent->push_front(std::move(sent_.back()));
      sent_.pop_back();
    }
    return n;
  }

  // The peer lost the session and a new one replaces it (OnRemoteReset: the owner resends
  // what the old session sent): every written item here, and every item of `unsent` that
  // went out before (`never_sent(item)` false: requeued by a resume, or partly written),
  // is dropped with release(item); the never-sent stay in `unsent`, in order, for the new
  // session (numbered afresh by the caller). Returns how many were dropped.
  template <typename Queue, typename Pred, typename F>
  size_t DropForNewSession(Queue* unsent, Pred&& never_sent, F&& release) {
    size_t n = sent_.size();
    for (const T& t : sent_) release(t);
    sent_.clear();
    Queue keep;
    for (auto& item : *unsent) {
      if (never_sent(item)) {
        keep.push_back(std::move(item));
      } else {
        release(item);
        ++n;
      }
    }
    unsent->swap(keep);
    return n;
  }

  template <typename F>
  void ForEach(F&& fn) const {
    for (const T& t : sent_) fn(t);
  }
  void Clear() { sent_.clear(); }
  size_t size() const { return sent_.size(); }
  bool empty() const { return sent_.empty(); }

 private:
  template <typename U>
  static uint64_t SeqOf(const std::shared_ptr<U>& p) {
    return p->seq;
  }
  template <typename U>
  static uint64_t SeqOf(const U& u) {
    return u.seq;
  }

  std::deque<T> sent_;
};

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_DELIVERY_H_

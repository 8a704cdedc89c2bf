// Record acknowledgements: how a ring record's verdict gets back to its sender, the same
// way on every backend (msg/PROTOCOL.md, "Record acknowledgements").
//
//   success  implied by ring credit. When the receiver's released position passes the
//            end of a record, that record is done and succeeded: no message per record,
//            and on rdma no receiver CPU beyond the 8-byte credit WRITE.
//   failure  a lossless message of the reserved type kRecordNackType listing (tid, code).
//            The receiver holds the credit it advertises at the position it had before
//            the failure until the sender has acknowledged that message (NackBarrier), so
//            the credit that would read as "success" can never overtake the failure --
//            not on the wire, not across a reconnect (the resent message comes first).
//
// Sender side: SentRecords turns nacks and credit into OnRecordsAcked batches.
// Not thread-safe: each backend guards its instance with its connection lock.
#ifndef MSGR_MSG_SESSION_RECORD_ACKS_H_
#define MSGR_MSG_SESSION_RECORD_ACKS_H_

#include <algorithm>
#include <cstdint>
#include <deque>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "msg/base/growing_ring.h"
#include "msg/messenger.h"

namespace msgr {

inline constexpr uint16_t kRecordNackType = kReservedMessageTypes + 1;

Message EncodeRecordNack(absl::Span<const RecordAck> failed);
// kInvalidArgument on a malformed payload or a kOk entry.
absl::StatusOr<std::vector<RecordAck>> DecodeRecordNack(std::string_view payload);

// Sender side: the records written and not yet acknowledged, in ring order.
class SentRecords {
 public:
  // A record was placed; it ends at ring position `end_position`.
  void Add(uint64_t tid, uint64_t end_position);
  // Failures arrived: their acks are appended to `out` (unknown or already acked tids are
  // ignored: a nack resent after a reconnect).
  void OnNack(absl::Span<const RecordAck> failed, std::vector<RecordAck>* out);
  // Credit arrived: every record ending at or before `released` that was not nacked is
  // acknowledged kOk (appended to `out`) and forgotten.
  void OnCredit(uint64_t released, std::vector<RecordAck>* out);
  // The peer lost the session: nothing will be acknowledged any more.
  void Clear() { q_.clear(); }
  size_t size() const { return q_.size(); }

 private:
  struct Entry {
    uint64_t tid;
    uint64_t end;
    bool acked;
  };
  GrowingRing<Entry> q_;
};

// Receiver side: credit held back behind unacknowledged nack messages.
class NackBarrier {
 public:
  // A nack message was queued; credit may not pass `hold_at` (the released position
  // before the failed records) until the peer acknowledged that message.
  void Add(uint64_t hold_at) { holds_.push_back(hold_at); }
  // The peer acknowledged the oldest nack message (they are acknowledged in order).
  // Returns false if there was none.
  bool LiftOldest();
  // The credit to advertise for `released`.
  uint64_t Clamp(uint64_t released) const {
    return holds_.empty() ? released : std::min(released, holds_.front());
  }
  bool empty() const { return holds_.empty(); }
  void Clear() { holds_.clear(); }

 private:
  std::deque<uint64_t> holds_;  // hold_at, oldest first
};

}  // namespace msgr

#endif  // MSGR_MSG_SESSION_RECORD_ACKS_H_

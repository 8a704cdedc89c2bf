#include "msg/session/record_acks.h"

#include <algorithm>

#include "msg/base/wire.h"

namespace msgr {

namespace {
// Each entry: tid (8) + code (4).
constexpr size_t kEntryBytes = 12;
}  // namespace

Message EncodeRecordNack(absl::Span<const RecordAck> failed) {
  std::string out;
  WireWriter w(&out);
  w.Put(static_cast<uint32_t>(failed.size()));
  for (const RecordAck& a : failed) {
    w.Put(a.tid);
    w.Put(static_cast<uint32_t>(a.code));
  }
  return Message{kRecordNackType, std::move(out)};
}

absl::StatusOr<std::vector<RecordAck>> DecodeRecordNack(std::string_view payload) {
  WireReader r(payload);
  uint32_t n = 0;
  if (!r.Get(&n) || n > payload.size() / kEntryBytes) {
    return absl::InvalidArgumentError("record nack: bad entry count");
  }
  std::vector<RecordAck> v(n);
  for (RecordAck& a : v) {
    uint32_t code = 0;
    if (!r.Get(&a.tid) || !r.Get(&code)) return absl::InvalidArgumentError("record nack: truncated");
    if (code == 0 || code > static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)) {
      return absl::InvalidArgumentError("record nack: bad status code");
    }
    a.code = static_cast<absl::StatusCode>(code);
  }
  return v;
}

void SentRecords::Add(uint64_t tid, uint64_t end_position) {
  q_.push_back(Entry{tid, end_position, false});
}

void SentRecords::OnNack(absl::Span<const RecordAck> failed, std::vector<RecordAck>* out) {
  for (const RecordAck& f : failed) {
    auto it = std::find_if(q_.begin(), q_.end(),
                           [&](const Entry& e) { return e.tid == f.tid && !e.acked; });
    if (it == q_.end()) continue;
    it->acked = true;
    out->push_back(f);
  }
}

void SentRecords::OnCredit(uint64_t released, std::vector<RecordAck>* out) {
  while (!q_.empty() && q_.front().end <= released) {
    if (!q_.front().acked) out->push_back(RecordAck{q_.front().tid, absl::StatusCode::kOk});
    q_.pop_front();
  }
}

bool NackBarrier::LiftOldest() {
  if (holds_.empty()) return false;
  holds_.pop_front();
  return true;
}

}  // namespace msgr

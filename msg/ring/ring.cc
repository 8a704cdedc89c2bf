#include "msg/ring/ring.h"

#include <cassert>
#include <cstring>

#include "absl/strings/str_format.h"
#include "msg/crc32c.h"

namespace msgr {

bool IsValidRingSize(size_t bytes) {
  return bytes >= kMinRingBytes && (bytes & (bytes - 1)) == 0;
}

RingProducer::RingProducer(size_t ring_bytes) : bytes_(ring_bytes) {
  assert(IsValidRingSize(ring_bytes));
}

std::optional<RingPlacement> RingProducer::Reserve(size_t record_bytes) {
  assert(record_bytes % kRingAlign == 0 && record_bytes <= bytes_ / 2);
  RingPlacement p;
  size_t offset = static_cast<size_t>(produced_ & (bytes_ - 1));
  size_t need = record_bytes;
  const size_t tail_room = bytes_ - offset;
  if (tail_room < record_bytes) {
    p.has_pad = true;
    p.pad_offset = offset;
    p.pad_bytes = static_cast<uint32_t>(tail_room);
    need += tail_room;
    offset = 0;
  }
  if (need > free_bytes()) return std::nullopt;
  if (p.has_pad) p.pad_seq = next_seq_++;
  p.offset = offset;
  p.seq = next_seq_++;
  produced_ += need;
  p.end_position = produced_;
  return p;
}

bool RingProducer::OnCredit(uint64_t released) {
  if (released > produced_) return false;
  if (released > released_) released_ = released;
  return true;
}

RingConsumer::RingConsumer(uint8_t* base, size_t bytes) : base_(base), bytes_(bytes) {
  assert(IsValidRingSize(bytes));
  assert(reinterpret_cast<uintptr_t>(base) % kRingAlign == 0);
}

RingConsumer::Poll RingConsumer::Next(RecordView* out, std::string* error) {
  for (;;) {
    const size_t offset = static_cast<size_t>(read_ & (bytes_ - 1));
    const uint8_t* slot = base_ + offset;
    if (LoadRecordSeq(slot) != next_seq_) return Poll::kEmpty;
    const auto* h = reinterpret_cast<const RecordHeader*>(slot);
    const size_t room = bytes_ - offset;
    // A matching seq word with a bad magic or header crc is stale payload bytes from an
    // earlier lap that happen to equal the expected seq (or a header still in flight):
    // not a record yet. Producers verify before publishing, so it is never corruption.
    if (h->magic != kRecordMagic || h->version != kRecordVersion ||
        RecordHeaderCrc(*h) != h->header_crc) {
      return Poll::kEmpty;
    }
    if (h->record_bytes % kRingAlign != 0 || h->record_bytes < kRecordHeaderBytes ||
        h->record_bytes > room) {
      *error = absl::StrFormat("record seq %d at ring offset %d: length %d out of bounds",
                               next_seq_, offset, h->record_bytes);
      return Poll::kCorrupt;
    }
    if (h->type == RecordType::kPad) {
      if (h->record_bytes != room) {
        *error = absl::StrFormat("pad record seq %d does not reach the ring end", next_seq_);
        return Poll::kCorrupt;
      }
      read_ += room;
      ++next_seq_;
      continue;
    }
    if (h->type != RecordType::kWrite || h->oid_len == 0 || h->oid_len > kMaxOidBytes ||
        RecordBytes(h->oid_len, h->payload_len) != h->record_bytes) {
      *error = absl::StrFormat("record seq %d at ring offset %d: bad type or lengths", next_seq_,
                               offset);
      return Poll::kCorrupt;
    }
    const char* oid = reinterpret_cast<const char*>(slot + kRecordHeaderBytes);
    const uint8_t* payload = slot + kRecordHeaderBytes + h->oid_len;
    if (RecordPayloadCrc(oid, h->oid_len, payload, h->payload_len) != h->payload_crc) {
      *error = absl::StrFormat("record seq %d (tid %d) at ring offset %d: payload crc mismatch",
                               next_seq_, h->tid, offset);
      return Poll::kCorrupt;
    }
    out->header = h;
    out->oid = oid;
    out->payload = payload;
    out->position = read_;
    read_ += h->record_bytes;
    out->end_position = read_;
    ++next_seq_;
    return Poll::kRecord;
  }
}

void RingConsumer::Release(uint64_t position) {
  assert(position <= read_);
  if (position > released_) released_ = position;
}

void PublishRecord(uint8_t* slot, const RecordHeader& header) {
  // Everything but the seq word first, then seq with release semantics.
  std::memcpy(slot, &header, offsetof(RecordHeader, seq));
  std::memcpy(slot + offsetof(RecordHeader, seq) + sizeof(uint64_t),
              reinterpret_cast<const uint8_t*>(&header) + offsetof(RecordHeader, seq) +
                  sizeof(uint64_t),
              sizeof(RecordHeader) - offsetof(RecordHeader, seq) - sizeof(uint64_t));
  __atomic_store_n(reinterpret_cast<uint64_t*>(slot + offsetof(RecordHeader, seq)), header.seq,
                   __ATOMIC_RELEASE);
}

void WritePadRecord(uint8_t* slot, uint32_t pad_bytes, uint64_t seq) {
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kPad, 0, seq, 0, 0, 0, 0, 0, 0);
  h.record_bytes = pad_bytes;
  h.header_crc = RecordHeaderCrc(h);
  PublishRecord(slot, h);
}

uint64_t LoadRecordSeq(const uint8_t* slot) {
  return __atomic_load_n(reinterpret_cast<const uint64_t*>(slot + offsetof(RecordHeader, seq)),
                         __ATOMIC_ACQUIRE);
}

}  // namespace msgr

#include "msg/ring/ring.h"

#include <cassert>
#include <chrono>
#include <cstring>

#include "absl/strings/str_format.h"
#include "msg/base/crc32c.h"

namespace msgr {

bool IsValidRingSize(size_t bytes) {
  return bytes >= kMinRingBytes && (bytes & (bytes - 1)) == 0;
}

RingProducer::RingProducer(size_t ring_bytes, uint64_t first_seq)
    : bytes_(ring_bytes), next_seq_(first_seq) {
  assert(IsValidRingSize(ring_bytes));
}

std::optional<RingPlacement> RingProducer::Reserve(size_t record_bytes) {
  const bool aligned = record_bytes >= kAlignedRecordMinBytes;
  assert(record_bytes % kRingAlign == 0 && record_bytes <= MaxRecordBytes(bytes_, aligned));
  RingPlacement p;
  size_t offset = static_cast<size_t>(produced_ & (bytes_ - 1));
  // At most one PAD: to the next kPayloadAlign boundary (aligned records), or to the ring
  // end when the record does not fit before it (then offset 0 is aligned as well).
  const size_t start = aligned ? (offset + kPayloadAlign - 1) / kPayloadAlign * kPayloadAlign
                               : offset;
  size_t pad = start - offset;
  if (start + record_bytes > bytes_) pad = bytes_ - offset;
  if (pad > 0) {
    p.has_pad = true;
    p.pad_offset = offset;
    p.pad_bytes = static_cast<uint32_t>(pad);
    offset = (offset + pad) & (bytes_ - 1);
  }
  const size_t need = pad + record_bytes;
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

RingConsumer::RingConsumer(uint8_t* base, size_t bytes, uint64_t first_seq)
    : base_(base), bytes_(bytes), next_seq_(first_seq) {
  assert(IsValidRingSize(bytes));
  assert(reinterpret_cast<uintptr_t>(base) % kPayloadAlign == 0);
}

namespace {
// True when [p, p + n) is all zeros (n a multiple of 8, p 8-aligned).
bool AllZero(const uint8_t* p, size_t n) {
  uint64_t acc = 0;
  for (size_t i = 0; i < n; i += sizeof(uint64_t)) {
    uint64_t w;
    std::memcpy(&w, p + i, sizeof(w));
    acc |= w;
  }
  return acc == 0;
}

// Checks the layout fields of a valid-looking kWrite header at ring offset `offset`; an
// empty string when they agree with ring_format.h.
std::string CheckWriteLayout(const RecordHeader& h, const uint8_t* slot, size_t offset) {
  if (h.oid_len == 0 || h.oid_len > kMaxOidBytes ||
      RecordBytes(h.oid_len, h.payload_len) != h.record_bytes) {
    return "bad type or lengths";
  }
  const bool aligned = IsAlignedRecord(h.payload_len);
  if (aligned != ((h.flags & kRecordFlagAlignedPayload) != 0)) {
    return absl::StrFormat("aligned-layout flag %s but payload of %d bytes",
                           aligned ? "missing" : "set", h.payload_len);
  }
  if (!aligned) return "";
  if (offset % kPayloadAlign != 0) return "aligned-layout record at an unaligned offset";
  // The gap between header and oid: zeros. Anything else means oid or payload bytes are
  // not where the layout puts them. The unaligned head of the gap is checked bytewise.
  const size_t gap_end = RecordOidOffset(h.oid_len, h.payload_len);
  const size_t words_end = gap_end & ~size_t{7};
  bool zero = AllZero(slot + kRecordHeaderBytes, words_end - kRecordHeaderBytes);
  for (size_t i = words_end; i < gap_end; ++i) zero = zero && slot[i] == 0;
  if (!zero) return "non-zero bytes in the aligned-layout gap before the oid";
  return "";
}
}  // namespace

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
    if (h->magic != kRecordMagic || RecordHeaderCrc(*h) != h->header_crc) {
      return Poll::kEmpty;
    }
    // A real header (magic, seq and crc all check out) of another ring layout: its
    // producer runs another build. Refused by name, not waited for as "not yet".
    if (h->version != kRecordVersion) {
      *error = absl::StrFormat(
          "record seq %d at ring offset %d has ring layout version %d, this build reads "
          "version %d: the peer runs an incompatible msgr build",
          next_seq_, offset, h->version, kRecordVersion);
      return Poll::kCorrupt;
    }
    if (h->record_bytes % kRingAlign != 0 || h->record_bytes < kRecordHeaderBytes ||
        h->record_bytes > room) {
      *error = absl::StrFormat("record seq %d at ring offset %d: length %d out of bounds",
                               next_seq_, offset, h->record_bytes);
      return Poll::kCorrupt;
    }
    if (h->type == RecordType::kPad) {
      // To the ring end (wrap), or shorter than kPayloadAlign up to an aligned slot.
      const size_t end = offset + h->record_bytes;
      if (end != bytes_ && (h->record_bytes >= kPayloadAlign || end % kPayloadAlign != 0)) {
        *error = absl::StrFormat(
            "pad record seq %d at ring offset %d (%d bytes) reaches neither the ring end nor "
            "the next %d-byte boundary",
            next_seq_, offset, h->record_bytes, kPayloadAlign);
        return Poll::kCorrupt;
      }
      read_ += h->record_bytes;
      ++next_seq_;
      continue;
    }
    const std::string bad = h->type == RecordType::kWrite
                                 ? CheckWriteLayout(*h, slot, offset)
                                 : std::string("bad type or lengths");
    if (!bad.empty()) {
      *error = absl::StrFormat("record seq %d at ring offset %d: %s", next_seq_, offset, bad);
      return Poll::kCorrupt;
    }
    const char* oid =
        reinterpret_cast<const char*>(slot + RecordOidOffset(h->oid_len, h->payload_len));
    const uint8_t* payload = slot + RecordPayloadOffset(h->oid_len, h->payload_len);
    const auto crc_start = std::chrono::steady_clock::now();
    const uint32_t crc = RecordPayloadCrc(oid, h->oid_len, payload, h->payload_len);
    crc_ns_ += static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::steady_clock::now() - crc_start)
                                         .count());
    crc_bytes_ += h->payload_len;
    if (crc != h->payload_crc) {
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

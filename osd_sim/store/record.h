// On-disk record format of the object store's segment log.
//
// A segment file is a sequence of records, each padded to kRecordAlign bytes:
//
//   [RecordHeader 48 B | oid (oid_len B) | payload (payload_len B) | zero pad]
//
// or, for a record written with O_DIRECT (flag kRecordAlignedPayload in the header), one
// 4 KiB header block then the payload, the record starting on a kDirectAlign boundary:
//
//   [RecordHeader | oid | zero pad to 4096][payload (payload_len B) | zero pad to 4096]
//
// Up to kDirectAlign - 1 zero bytes may precede an aligned record (the previous record
// ended off the boundary); the scan treats them as padding. A segment may be
// preallocated: the unwritten space after the last record reads as zeros and is free.
//
// A record the compactor copied forward (flag kRecordRelocated, store format 3) has an
// 8-byte *apply seq* right after the header, before the oid, in either layout:
//
//   [RecordHeader | apply_seq 8 B | oid | payload | zero pad]
//
// Its header seq is a fresh one (its place in the log, so seqs still strictly increase
// with the position); apply_seq is the seq of the write it copies, which the index
// applies it at (a copy never wins over a write newer than the one it copies). The
// header_crc covers the apply seq too.
//
// All integers are little-endian. header_crc is the crc32c of the header (with
// header_crc = 0) followed by the oid bytes, so a valid header_crc vouches for the
// lengths, the object offset, the flags, the sequence number and payload_crc; the
// payload itself is vouched for by payload_crc: crc32c over the oid bytes then the payload
// bytes (PayloadCrc), the same value a receive-ring record carries (msg/ring/ring_format.h),
// so the OSD passes the crc the poller verified straight through without re-reading.
// Sequence numbers strictly increase with the position in the log (across segments).
// The order in which writes take effect is their seq, or a relocated record's apply seq.
// Pure functions; thread-safe.
#ifndef MSGR_OSD_SIM_STORE_RECORD_H_
#define MSGR_OSD_SIM_STORE_RECORD_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace msgr::store {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__, "record format is little-endian");

inline constexpr uint32_t kRecordMagic = 0x5453534d;  // "MSST"
inline constexpr uint16_t kRecordVersion = 1;
inline constexpr size_t kRecordAlign = 8;
inline constexpr size_t kMaxOidBytes = 1024;
inline constexpr uint64_t kMaxPayloadBytes = uint64_t{1} << 32;  // 4 GiB
// Alignment of O_DIRECT records: file offset, header block and payload (the largest
// logical block size we expect; the payload's buffers must be aligned to it too).
inline constexpr uint64_t kDirectAlign = 4096;
static_assert(kDirectAlign % kRecordAlign == 0);

// Append flags (RecordHeader::flags).
inline constexpr uint32_t kTruncate = 1u << 0;  // the write replaces the whole object
// A part of a write of several records, not its last: the store applies the parts of
// such a write only together with its last part, so that the write is atomic (a write
// whose last part never comes -- its writer died -- never becomes visible, and recovery
// drops it). RecordHeader::write_id ties the parts together.
inline constexpr uint32_t kContinued = 1u << 1;
// A delete: with kTruncate, no payload, offset 0, not part of a write of several records.
// The object is gone from this point of the log on (until a later write). Store format 2.
inline constexpr uint32_t kDelete = 1u << 2;
inline constexpr uint32_t kKnownFlags = kTruncate | kContinued | kDelete;
// Layout flag, set by the store (never by a caller): the record has the aligned layout.
inline constexpr uint32_t kRecordAlignedPayload = 1u << 16;
// Layout flag, set by the compactor: a copy of a live record (or of a delete that must
// stay), with its apply seq after the header. Store format 3. Never kContinued: a copy is
// a write of one record; its write_id, if not 0, names the write of several records it
// was a part of (informational: recovery knows that write's other parts were copied too).
inline constexpr uint32_t kRecordRelocated = 1u << 17;
inline constexpr uint32_t kKnownRecordFlags = kKnownFlags | kRecordAlignedPayload | kRecordRelocated;
inline constexpr size_t kApplySeqBytes = sizeof(uint64_t);

struct RecordHeader {
  uint32_t magic;
  uint16_t version;
  uint16_t oid_len;
  uint32_t flags;
  uint32_t payload_crc;
  uint64_t seq;
  uint64_t object_off;
  uint64_t payload_len;
  uint32_t write_id;  // 0: a write of one record; else the write this part belongs to
  uint32_t header_crc;
};
static_assert(sizeof(RecordHeader) == 48, "record header layout is part of the disk format");
static_assert(sizeof(RecordHeader) % kRecordAlign == 0);

constexpr uint64_t AlignUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

// Bytes before the oid: the header, and a relocated record's apply seq.
constexpr uint64_t HeaderBytes(uint32_t flags) {
  return sizeof(RecordHeader) + ((flags & kRecordRelocated) != 0 ? kApplySeqBytes : 0);
}

// Total bytes a record occupies in a segment, padding included (not the zero padding
// that may precede an aligned record).
constexpr uint64_t RecordBytes(size_t oid_len, uint64_t payload_len, uint32_t flags = 0) {
  if ((flags & kRecordAlignedPayload) != 0) {
    return AlignUp(HeaderBytes(flags) + oid_len, kDirectAlign) + AlignUp(payload_len, kDirectAlign);
  }
  return AlignUp(HeaderBytes(flags) + oid_len + payload_len, kRecordAlign);
}

// Offset of the payload from the start of its record.
constexpr uint64_t PayloadOffset(size_t oid_len, uint32_t flags) {
  if ((flags & kRecordAlignedPayload) != 0) return AlignUp(HeaderBytes(flags) + oid_len, kDirectAlign);
  return HeaderBytes(flags) + oid_len;
}
static_assert(PayloadOffset(kMaxOidBytes, kRecordAlignedPayload) == kDirectAlign,
              "an aligned record's header block is one kDirectAlign block");
static_assert(PayloadOffset(kMaxOidBytes, kRecordAlignedPayload | kRecordRelocated) == kDirectAlign,
              "so is a relocated one's");

// crc32c over `oid` then `len` payload bytes: the record's payload_crc.
uint32_t PayloadCrc(std::string_view oid, const void* payload, size_t len);

// The id of a write of several records: the low 32 bits of the seq of its first part, so
// the first part is recognisable in the log (WriteIdOf(h.seq) == h.write_id) and ids of
// writes in progress at the same time differ. The store never uses a seq whose low bits
// are 0, so an id is never 0.
constexpr uint32_t WriteIdOf(uint64_t first_seq) { return static_cast<uint32_t>(first_seq); }

// Returns a complete header (header_crc filled in) for a record. `flags` may include
// kRecordAlignedPayload, and kRecordRelocated with the record's `apply_seq` (which the
// caller writes after the header; ignored without the flag).
// REQUIRES: 1 <= oid.size() <= kMaxOidBytes, payload_len <= kMaxPayloadBytes;
// with kRecordRelocated, apply_seq < seq and no kContinued.
RecordHeader MakeRecordHeader(std::string_view oid, uint64_t seq, uint64_t object_off,
                              uint64_t payload_len, uint32_t payload_crc, uint32_t flags,
                              uint32_t write_id = 0, uint64_t apply_seq = 0);

// Cheap structural check of a header read from disk: magic, version, bounds, flags.
// Does not look at the crc (the oid is needed for that).
bool HeaderShapeValid(const RecordHeader& h);

// Returns true if `h` is shaped validly and its header_crc matches `oid` (and, for a
// relocated record, `apply_seq`, which must also be below the header's seq).
bool HeaderCrcValid(const RecordHeader& h, std::string_view oid, uint64_t apply_seq = 0);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_RECORD_H_

// The receive-ring record format: the one contract between the messenger backends,
// which fill rings, and the OSD pollers, which drain them.
//
// A ring is a contiguous buffer of kRingAlign-aligned records that wraps at its end:
//
//   offset 0                                                         size
//   | rec n+1 | ... free ... | rec n-2 | rec n-1 | rec n | PAD ......|
//
// Each record is [RecordHeader | oid bytes | payload | zero padding to kRingAlign].
// A record never wraps: when it does not fit before the end, the producer writes a PAD
// record covering the rest of the ring and puts the record at offset 0. PAD records take
// a sequence number like any other record.
//
// Visibility: the producer writes everything except `seq` first, then stores `seq` last
// (a release store in-process; a second ordered RDMA WRITE or the immediate of
// WRITE_WITH_IMM over RDMA, see msg/PROTOCOL.md). The consumer polls the `seq` word at
// its read position and accepts the record only when it equals the next expected
// sequence number and the header crc matches (a header from an earlier lap carries an
// older `seq`; stale payload bytes that happen to hold the expected value fail the header
// crc and read as "not yet"). A valid header with a bad payload crc or out-of-bounds
// lengths is corruption: the connection is dropped, earlier records stay valid.
//
// All integers are little-endian (the only byte order msgr supports; static_asserted).
#ifndef MSGR_MSG_RING_RING_FORMAT_H_
#define MSGR_MSG_RING_RING_FORMAT_H_

#include <cstddef>
#include <cstdint>

namespace msgr {

inline constexpr uint32_t kRecordMagic = 0x4d524543;  // "CERM" in memory
inline constexpr uint8_t kRecordVersion = 1;
inline constexpr size_t kRingAlign = 64;                // record alignment, one cache line
inline constexpr size_t kRecordHeaderBytes = 64;
inline constexpr size_t kMaxOidBytes = 256;
inline constexpr size_t kMinRingBytes = 64 * 1024;
// 32 MiB: room for several 4 MiB writes in flight per connection (with 8 MiB the ring
// held one, and 4 MiB writes stalled on credits; see docs/BENCHMARKS.md).
inline constexpr size_t kDefaultRingBytes = 32 * 1024 * 1024;

enum class RecordType : uint8_t {
  kPad = 1,    // skip to offset 0; no oid, no payload
  kWrite = 2,  // write `payload` at `object_offset` of object `oid`
};

// Record flags.
inline constexpr uint16_t kRecordFlagTruncate = 1u << 0;  // replace the object (offset 0)
inline constexpr uint16_t kRecordFlagLast = 1u << 1;      // last chunk of a client op

struct RecordHeader {
  uint32_t magic;          //  0 kRecordMagic
  uint8_t version;         //  4 kRecordVersion
  RecordType type;         //  5
  uint16_t flags;          //  6 kRecordFlag*
  uint64_t seq;            //  8 1, 2, 3 ... per ring; written last (publication word)
  uint32_t record_bytes;   // 16 whole record incl. header and padding; multiple of kRingAlign
  uint16_t oid_len;        // 20 bytes of object id following the header
  uint16_t reserved0;      // 22 zero
  uint32_t payload_len;    // 24 bytes of payload following the oid
  uint32_t payload_crc;    // 28 crc32c over oid bytes then payload
  uint64_t client_id;      // 32 sender's entity id
  uint64_t tid;            // 40 sender's op id (acknowledgements name it)
  uint64_t object_offset;  // 48 where in the object the payload goes
  uint32_t reserved1;      // 56 zero
  uint32_t header_crc;     // 60 crc32c over bytes [0, 60) with this field excluded
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes, "record header is one cache line");
static_assert(offsetof(RecordHeader, seq) == 8 && offsetof(RecordHeader, header_crc) == 60,
              "record header layout is part of the wire contract");
static_assert(kRecordHeaderBytes % kRingAlign == 0, "header keeps payload alignment");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "msgr's wire and ring formats are little-endian; big-endian hosts are unsupported"
#endif

// Bytes a record with this oid and payload occupies in the ring.
constexpr size_t RecordBytes(size_t oid_len, size_t payload_len) {
  return (kRecordHeaderBytes + oid_len + payload_len + kRingAlign - 1) / kRingAlign * kRingAlign;
}

// Largest payload a ring of `ring_bytes` accepts in one record: half the ring, so that a
// record always fits after at most one PAD. Larger objects are sent in several records.
constexpr size_t MaxRecordPayload(size_t ring_bytes) {
  return ring_bytes / 2 - kRecordHeaderBytes - kMaxOidBytes;
}

// Fills `h` for a record (everything but `seq`, which is published last) and computes
// both crcs; `payload_crc` must already cover oid then payload.
void FillRecordHeader(RecordHeader* h, RecordType type, uint16_t flags, uint64_t seq,
                      uint16_t oid_len, uint32_t payload_len, uint32_t payload_crc,
                      uint64_t client_id, uint64_t tid, uint64_t object_offset);

// crc32c of the header as defined above.
uint32_t RecordHeaderCrc(const RecordHeader& h);

// crc32c over oid bytes then payload: the `payload_crc` field.
uint32_t RecordPayloadCrc(const void* oid, size_t oid_len, const void* payload, size_t len);

}  // namespace msgr

#endif  // MSGR_MSG_RING_RING_FORMAT_H_

// The receive-ring record format: the one contract between the messenger backends,
// which fill rings, and the OSD pollers, which drain them.
//
// A ring is a contiguous buffer of kRingAlign-aligned records that wraps at its end:
//
//   offset 0                                                         size
//   | rec n+1 | ... free ... | rec n-2 | rec n-1 | rec n | PAD ......|
//
// A record has one of two layouts, chosen by its payload length alone (both ends compute
// it, nothing is negotiated):
//
//   packed   (payload_len <  kAlignedPayloadMinBytes), at any kRingAlign-aligned offset:
//            [RecordHeader | oid | payload | zero padding to kRingAlign]
//   aligned  (payload_len >= kAlignedPayloadMinBytes), at a kPayloadAlign-aligned offset,
//            header flag kRecordFlagAlignedPayload:
//            [RecordHeader | zero gap | oid | payload | zero padding to kRingAlign]
//            ^ slot (4 KiB-aligned)      ^ slot + kPayloadAlign - oid_len
//                                             ^ payload at slot + kPayloadAlign
//
// The aligned layout exists for the OSD's store: ring memory is kPayloadAlign-aligned
// (RingConsumer REQUIRES it), so a large payload starts on a 4 KiB boundary and the store
// writes it with O_DIRECT straight from the ring (osd_sim/store/README.md). The oid sits
// right before the payload, so oid + payload stay one contiguous run in both layouts (a
// TCP reader reads them into one destination; `payload_crc` covers the same bytes).
// record_bytes covers header, gap, oid, payload and padding. The gap is zeros.
//
// A record never wraps: when it does not fit before the end, the producer writes a PAD
// record covering the rest of the ring and puts the record at offset 0. An aligned record
// that does fit is preceded, when its offset is not yet kPayloadAlign-aligned, by a PAD
// record up to the next kPayloadAlign boundary instead. So a placement has at most one
// PAD, which either reaches the ring end or is shorter than kPayloadAlign and ends on a
// kPayloadAlign boundary. PAD records take a sequence number like any other record.
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
// Versions: kRecordVersion, in every record header, is the version of this whole layout
// -- the header fields, both record layouts and which one a length selects
// (kAlignedPayloadMinBytes), kRingAlign, kPayloadAlign, the PAD rules and
// MaxRecordBytes. Nothing about the layout is negotiated: READY tells the sender the
// ring's size, and the handshake's kFeatureRing only that rings exist. So any change to what this file defines bumps kRecordVersion, and keeps
// what lets every build recognise a header: magic at 0, version at 4, seq at 8 (the
// publication word) and header_crc at 60 over bytes [0, 60). Who checks:
//   * RDMA: the sender writes each header, with its own version, into the receiver's
//     ring; RingConsumer refuses a header of another version (kCorrupt, naming both) and
//     the OSD drops that connection with the reason logged. The sender learns only that
//     its session was closed: nothing in setup tells it the receiver's version.
//   * TCP: the receiver's reader lays records out and writes their headers itself (its
//     own version), so the ring never holds a foreign header; the sender's placement
//     travels in each RING_RECORD's prefix (ring_offset, ring_seq) and a slot that does
//     not match the reader's is a protocol error. The TCP sender's use of this layout is
//     part of the frame protocol, so a layout change bumps kFrameVersion (msg/frame.h) too.
//
// All integers are little-endian (the only byte order msgr supports; static_asserted).
#ifndef MSGR_MSG_RING_RING_FORMAT_H_
#define MSGR_MSG_RING_RING_FORMAT_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace msgr {

inline constexpr uint32_t kRecordMagic = 0x4d524543;  // "CERM" in memory
inline constexpr uint8_t kRecordVersion = 1;  // the ring layout's version: see "Versions"
inline constexpr size_t kRingAlign = 64;                // record alignment, one cache line
inline constexpr size_t kRecordHeaderBytes = 64;
inline constexpr size_t kMaxOidBytes = 256;
inline constexpr size_t kMinRingBytes = 64 * 1024;
// Aligned layout: where the payload of a large record starts (slot + kPayloadAlign), the
// alignment of such a slot, and of ring memory. 4 KiB: the O_DIRECT block (and page) size.
inline constexpr size_t kPayloadAlign = 4096;
// Payloads of at least this many bytes use the aligned layout. Below it the gap (up to
// 4 KiB - 64) and the pad before the slot (up to 4 KiB - 64) cost more ring space than the
// O_DIRECT write gains; the store only writes >= 128 KiB with O_DIRECT anyway.
inline constexpr size_t kAlignedPayloadMinBytes = 64 * 1024;
// 32 MiB: room for several 4 MiB writes in flight per connection (with 8 MiB the ring
// held one, and 4 MiB writes stalled on credits; see docs/BENCHMARKS.md).
inline constexpr size_t kDefaultRingBytes = 32 * 1024 * 1024;

enum class RecordType : uint8_t {
  kPad = 1,    // skip to offset 0 or to the next kPayloadAlign boundary; no oid, no payload
  kWrite = 2,  // write `payload` at `object_offset` of object `oid`
};

// Record flags.
inline constexpr uint16_t kRecordFlagTruncate = 1u << 0;  // replace the object (offset 0)
inline constexpr uint16_t kRecordFlagLast = 1u << 1;      // last chunk of a client op
// The record uses the aligned layout. Set by FillRecordHeader exactly when payload_len >=
// kAlignedPayloadMinBytes (the consumer rejects any other combination): a ring-layout
// flag, not a sender's op flag.
inline constexpr uint16_t kRecordFlagAlignedPayload = 1u << 2;

struct RecordHeader {
  uint32_t magic;          //  0 kRecordMagic
  uint8_t version;         //  4 kRecordVersion
  RecordType type;         //  5
  uint16_t flags;          //  6 kRecordFlag*
  uint64_t seq;            //  8 1, 2, 3 ... per ring; written last (publication word)
  uint32_t record_bytes;   // 16 whole record incl. header and padding; multiple of kRingAlign
  uint16_t oid_len;        // 20 bytes of object id (after the header, or the gap if aligned)
  uint16_t writer_depth;   // 22 kWrite: records the writer had in flight on this ring
                           //    when it wrote this one (saturates at 65535; 0 from writers
                           //    that do not say). A hint for the reader's polling only.
  uint32_t payload_len;    // 24 bytes of payload following the oid
  uint32_t payload_crc;    // 28 crc32c over oid bytes then payload
  uint64_t client_id;      // 32 sender's entity id
  uint64_t tid;            // 40 sender's op id (acknowledgements name it)
  uint64_t object_offset;  // 48 where in the object the payload goes
  uint32_t reserved1;      // 56 zero
  uint32_t header_crc;     // 60 crc32c over bytes [0, 60) with this field excluded
};
static_assert(sizeof(RecordHeader) == kRecordHeaderBytes, "record header is one cache line");
static_assert(offsetof(RecordHeader, magic) == 0 && offsetof(RecordHeader, version) == 4 &&
                  offsetof(RecordHeader, seq) == 8 && offsetof(RecordHeader, header_crc) == 60,
              "record header layout is part of the wire contract; these four fields stay put "
              "in every version");
static_assert(kRecordHeaderBytes % kRingAlign == 0, "header keeps payload alignment");
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "msgr's wire and ring formats are little-endian; big-endian hosts are unsupported"
#endif

// True when a record with this payload uses the aligned layout.
constexpr bool IsAlignedRecord(size_t payload_len) {
  return payload_len >= kAlignedPayloadMinBytes;
}

// Offset of the payload from the start of the record's slot; the oid ends there.
constexpr size_t RecordPayloadOffset(size_t oid_len, size_t payload_len) {
  return IsAlignedRecord(payload_len) ? kPayloadAlign : kRecordHeaderBytes + oid_len;
}

// Offset of the oid from the start of the record's slot.
constexpr size_t RecordOidOffset(size_t oid_len, size_t payload_len) {
  return RecordPayloadOffset(oid_len, payload_len) - oid_len;
}

// Bytes a record with this oid and payload occupies in the ring.
constexpr size_t RecordBytes(size_t oid_len, size_t payload_len) {
  return (RecordPayloadOffset(oid_len, payload_len) + payload_len + kRingAlign - 1) /
         kRingAlign * kRingAlign;
}

// Every aligned record has at least this many record_bytes and every packed record fewer,
// so a RecordBytes() value alone tells the producer which placement a record needs.
inline constexpr size_t kAlignedRecordMinBytes = kPayloadAlign + kAlignedPayloadMinBytes;
static_assert(RecordBytes(kMaxOidBytes, kAlignedPayloadMinBytes - 1) < kAlignedRecordMinBytes &&
                  RecordBytes(1, kAlignedPayloadMinBytes) == kAlignedRecordMinBytes,
              "record_bytes must tell the two layouts apart");
static_assert(kRecordHeaderBytes + kMaxOidBytes < kPayloadAlign, "the gap is never negative");
static_assert(kPayloadAlign % kRingAlign == 0 && kMinRingBytes % kPayloadAlign == 0,
              "offset 0 and every kPayloadAlign boundary are valid, aligned slots");

// Largest record_bytes a ring of `ring_bytes` accepts for a record of this layout: half
// the ring for packed records, so that a record always fits after at most one PAD (which
// is then shorter than the record); half the ring minus kPayloadAlign for aligned ones,
// whose wrapping PAD can be up to kPayloadAlign - kRingAlign longer than the record.
constexpr size_t MaxRecordBytes(size_t ring_bytes, bool aligned) {
  return aligned ? ring_bytes / 2 - kPayloadAlign : ring_bytes / 2;
}

// Largest payload a ring of `ring_bytes` accepts in one record (any oid length): the
// largest P with RecordBytes(kMaxOidBytes, P) <= MaxRecordBytes(ring_bytes, aligned(P)).
// Larger objects are sent in several records.
constexpr size_t MaxRecordPayload(size_t ring_bytes) {
  return MaxRecordBytes(ring_bytes, true) >= kAlignedRecordMinBytes
             ? MaxRecordBytes(ring_bytes, true) - kPayloadAlign
             : std::min(ring_bytes / 2 - kRecordHeaderBytes - kMaxOidBytes,
                        kAlignedPayloadMinBytes - 1);
}

// Fills `h` for a record (everything but `seq`, which is published last) and computes
// both crcs; `payload_crc` must already cover oid then payload. record_bytes and
// kRecordFlagAlignedPayload follow from the lengths (the flag in `flags` is ignored).
void FillRecordHeader(RecordHeader* h, RecordType type, uint16_t flags, uint64_t seq,
                      uint16_t oid_len, uint32_t payload_len, uint32_t payload_crc,
                      uint64_t client_id, uint64_t tid, uint64_t object_offset,
                      uint16_t writer_depth = 0);

// crc32c of the header as defined above.
uint32_t RecordHeaderCrc(const RecordHeader& h);

// crc32c over oid bytes then payload: the `payload_crc` field.
uint32_t RecordPayloadCrc(const void* oid, size_t oid_len, const void* payload, size_t len);

}  // namespace msgr

#endif  // MSGR_MSG_RING_RING_FORMAT_H_

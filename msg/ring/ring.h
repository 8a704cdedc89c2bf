// Receive-ring bookkeeping for both ends of the ring contract (format: ring_format.h).
//
// Positions are monotonic 64-bit byte counters; the ring offset of position p is
// p & (bytes - 1). Three positions matter:
//   produced  the producer's next write position (the sender's / the TCP reader's)
//   read      the consumer's next record to look at (the poller's)
//   released  everything before it is free again; the consumer reports it to the
//             producer as a *credit*, and the producer never writes past released + bytes.
//
// RingProducer decides where records go; the RDMA client and the TCP backend's reader
// both use it, so the client and the OSD agree on every slot without talking.
// RingConsumer is the poller's view. Neither class is thread-safe: each side of a ring
// has exactly one owner thread at a time. Publication between them goes through the
// record's `seq` word (release store / acquire load) and through credits.
#ifndef MSGR_MSG_RING_RING_H_
#define MSGR_MSG_RING_RING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "msg/ring/ring_format.h"

namespace msgr {

// True when `bytes` is a power of two and at least kMinRingBytes.
bool IsValidRingSize(size_t bytes);

// Where a reserved record goes, and the PAD record to write first if it wrapped or an
// aligned record needed a kPayloadAlign-aligned slot.
struct RingPlacement {
  bool has_pad = false;
  size_t pad_offset = 0;      // ring offset of the PAD record
  uint32_t pad_bytes = 0;     // its record_bytes (to the ring end, or to `offset`)
  uint64_t pad_seq = 0;
  size_t offset = 0;          // ring offset of the record
  uint64_t seq = 0;           // the record's sequence number
  uint64_t end_position = 0;  // producer position after the record
};

class RingProducer {
 public:
  // REQUIRES: IsValidRingSize(ring_bytes). `first_seq` is the seq of the first record:
  // 1 for a new session; a ring that replaces another one of the same session mid-stream
  // (a resized ring) goes on from the old ring's next seq, at position 0.
  explicit RingProducer(size_t ring_bytes, uint64_t first_seq = 1);

  // Reserves room for a record of `record_bytes` (a RecordBytes() value), or returns
  // nullopt when the free space (given the credits seen so far) is too small. A record of
  // at least kAlignedRecordMinBytes (the aligned layout) gets a kPayloadAlign-aligned
  // offset; the PAD in front of it, if any, is part of the reservation.
  // REQUIRES: record_bytes is a RecordBytes() value <= MaxRecordBytes(ring_bytes, aligned).
  std::optional<RingPlacement> Reserve(size_t record_bytes);

  // Applies a credit: the consumer has released everything before `released`.
  // Returns false (and changes nothing) for a credit beyond what was produced.
  bool OnCredit(uint64_t released);

  size_t ring_bytes() const { return bytes_; }
  uint64_t produced() const { return produced_; }
  uint64_t released() const { return released_; }
  size_t free_bytes() const { return bytes_ - static_cast<size_t>(produced_ - released_); }
  uint64_t next_seq() const { return next_seq_; }

 private:
  size_t bytes_;
  uint64_t produced_ = 0;
  uint64_t released_ = 0;
  uint64_t next_seq_ = 1;
};

// A record the consumer found, pointing into ring memory (no copy).
struct RecordView {
  const RecordHeader* header = nullptr;
  const char* oid = nullptr;      // header->oid_len bytes
  const uint8_t* payload = nullptr;  // header->payload_len bytes; kPayloadAlign-aligned
                                     // when the header has kRecordFlagAlignedPayload
  uint64_t position = 0;          // ring position of the header
  uint64_t end_position = 0;      // position just after the record
};

class RingConsumer {
 public:
  enum class Poll { kEmpty, kRecord, kCorrupt };

  // `base` is the ring memory (owned by the caller, outliving this object).
  // REQUIRES: IsValidRingSize(bytes), base aligned to kPayloadAlign (so that aligned
  // records' payloads are). `first_seq` as RingProducer's.
  RingConsumer(uint8_t* base, size_t bytes, uint64_t first_seq = 1);

  // Looks for the next record at the read position. PAD records are skipped
  // internally (and count as read). kRecord fills `out`; kCorrupt fills `error` with
  // what is wrong (a header of another kRecordVersion, naming both; bounds, type, layout: a PAD ending neither at the ring end nor on a
  // kPayloadAlign boundary, an aligned-layout flag that does not match the payload
  // length, an aligned record at an unaligned offset or with non-zero bytes in its gap;
  // payload crc): the ring is unusable
  // from here on and the connection must be dropped, but earlier records stay valid.
  Poll Next(RecordView* out, std::string* error);

  // Marks everything before `position` free (monotonic; a smaller value is ignored).
  // REQUIRES: position <= read_position().
  void Release(uint64_t position);

  uint64_t read_position() const { return read_; }
  uint64_t released() const { return released_; }
  uint64_t next_seq() const { return next_seq_; }
  size_t ring_bytes() const { return bytes_; }
  // Bytes between released and read: records handed out but not yet freed.
  size_t in_use() const { return static_cast<size_t>(read_ - released_); }
  // The payload crc32c checks made so far: bytes covered and time taken (steady clock;
  // the OSD reports it as the "crc" role of its CPU).
  uint64_t crc_bytes() const { return crc_bytes_; }
  uint64_t crc_ns() const { return crc_ns_; }

 private:
  uint8_t* base_;
  size_t bytes_;
  uint64_t read_ = 0;
  uint64_t released_ = 0;
  uint64_t next_seq_ = 1;
  uint64_t crc_bytes_ = 0;
  uint64_t crc_ns_ = 0;
};

// In-process producer helpers (TCP backend, tests): the record body is already in place
// at `slot`; these publish it by storing `seq` last with release semantics.
void PublishRecord(uint8_t* slot, const RecordHeader& header);
void WritePadRecord(uint8_t* slot, uint32_t pad_bytes, uint64_t seq);

// Acquire-load of a record's seq word (what pollers spin on).
uint64_t LoadRecordSeq(const uint8_t* slot);

}  // namespace msgr

#endif  // MSGR_MSG_RING_RING_H_

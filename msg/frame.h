// On-the-wire frames shared by every msgr stream transport (layout: msg/PROTOCOL.md).
//
// A frame is a fixed 48-byte little-endian header followed by `payload_len` bytes:
//
//   0 magic u32 | 4 version u8 | 5 type u8 | 6 flags u16 | 8 seq u64 | 16 ack_seq u64 |
//   24 payload_len u32 | 28 msg_type u16 | 30 reserved u16 | 32 aux u64 |
//   40 payload_crc u32 | 44 header_crc u32 (crc32c of bytes [0, 44))
//
// The header crc is checked before anything in the header is trusted, and the length
// limit before any payload buffer is allocated. Decoding errors are absl::Status values:
// kDataLoss for a crc mismatch, kInvalidArgument for everything else (bad magic,
// version, type, length); transports count them as crc_errors / protocol_errors.
//
// RING_RECORD frames carry a 40-byte RingPrefix, then the oid, then the record payload.
// Their payload_crc covers the prefix only: the prefix holds the record's own crc32c
// over oid+payload (the ring record's payload_crc), which the receiver checks after the
// bytes have landed in the ring slot -- one pass over the data, no staging copy.
//
// Everything here is a pure function or a single-owner object: thread-compatible.
#ifndef MSGR_MSG_FRAME_H_
#define MSGR_MSG_FRAME_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace msgr {

inline constexpr uint32_t kFrameMagic = 0x5247534d;  // "MSGR" in memory
inline constexpr uint8_t kFrameVersion = 1;
inline constexpr size_t kFrameHeaderBytes = 48;
inline constexpr size_t kRingPrefixBytes = 40;
// Handshake and control frames are small; anything larger is a protocol error.
inline constexpr uint32_t kMaxControlPayload = 4096;

enum class FrameType : uint8_t {
  // Handshake (seq 0, before the session exists), msg/handshake.h.
  kHello = 1,      // client -> server: who I am, my nonce
  kChallenge = 2,  // server -> client: who I am, my nonce, my proof
  kAuth = 3,       // client -> server: my proof, session cookie, resume state
  kReady = 4,      // server -> client: session new/resumed, resume state, ring size
  // Sequenced data (seq > 0, acknowledged, resent on lossless sessions).
  kMessage = 10,     // msg_type = Message::type, payload = Message::payload
  kRingRecord = 11,  // RingPrefix | oid | payload, lands in the peer's receive ring
  // Control (seq 0, never resent).
  kAck = 20,        // nothing but the header's ack_seq
  kCredit = 21,     // aux = ring credit (kFrameFlagCredit set)
  kKeepalive = 22,  // peer answers with kKeepaliveAck
  kKeepaliveAck = 23,
  kClose = 24,  // the session is over (MarkDown, auth failure); payload = reason text
};

// Header flags.
inline constexpr uint16_t kFrameFlagCredit = 1u << 0;  // aux = receiver's released ring position
inline constexpr uint16_t kKnownFrameFlags = kFrameFlagCredit;

const char* FrameTypeName(FrameType t);
bool IsKnownFrameType(uint8_t t);
inline bool IsSequenced(FrameType t) {
  return t == FrameType::kMessage || t == FrameType::kRingRecord;
}

struct FrameHeader {
  FrameType type = FrameType::kAck;
  uint16_t flags = 0;
  uint64_t seq = 0;
  uint64_t ack_seq = 0;
  uint32_t payload_len = 0;
  uint16_t msg_type = 0;
  uint64_t aux = 0;
  uint32_t payload_crc = 0;
};

// Writes the 48-byte header, filling in magic, version and header_crc.
void EncodeFrameHeader(const FrameHeader& h, uint8_t* out);

// Validates and decodes a 48-byte header. `max_payload` bounds payload_len (control and
// handshake frames are further bounded by kMaxControlPayload).
absl::Status DecodeFrameHeader(const uint8_t* in, uint32_t max_payload, FrameHeader* out);

// Bytes of the payload that payload_crc covers (all of it, or the prefix for records).
size_t CrcCoveredBytes(const FrameHeader& h);

// Checks payload_crc over the first CrcCoveredBytes(h) bytes of `covered`.
absl::Status VerifyPayloadCrc(const FrameHeader& h, const void* covered, size_t len);

// Prefix of a RING_RECORD payload. The sender's RingProducer placement is included so
// the receiver can check that its mirror producer chose the same slot.
struct RingPrefix {
  uint64_t ring_seq = 0;  // the record's seq in the ring
  uint64_t tid = 0;
  uint64_t object_offset = 0;
  uint32_t ring_offset = 0;  // slot offset in the ring
  uint32_t data_len = 0;     // record payload bytes
  uint32_t record_crc = 0;   // crc32c over oid then payload (RecordHeader::payload_crc)
  uint16_t oid_len = 0;
  uint16_t record_flags = 0;
};
void EncodeRingPrefix(const RingPrefix& p, uint8_t* out);
// Decodes and checks the prefix against the frame (lengths add up, oid in bounds).
absl::Status DecodeRingPrefix(const FrameHeader& h, const uint8_t* in, RingPrefix* out);

// A complete frame from FrameDecoder.
struct DecodedFrame {
  FrameHeader header;
  std::string payload;
};

// Streaming decoder: feed bytes as they arrive, take complete, verified frames out.
// The header is validated as soon as its 48 bytes are present, so an oversized length
// is refused before any payload is buffered. After an error the decoder stays failed.
class FrameDecoder {
 public:
  enum class Result { kNeedMore, kFrame, kError };
  explicit FrameDecoder(uint32_t max_payload) : max_payload_(max_payload) {}

  void Append(const void* data, size_t len);
  Result Next(DecodedFrame* out, absl::Status* error);
  size_t buffered() const { return buf_.size() - pos_; }

 private:
  uint32_t max_payload_;
  std::string buf_;
  size_t pos_ = 0;
  bool have_header_ = false;
  FrameHeader header_;
  absl::Status failed_;
};

// Encodes a whole frame (header + payload) into a string; for control frames and tests.
std::string EncodeFrame(FrameHeader h, std::string_view payload);

}  // namespace msgr

#endif  // MSGR_MSG_FRAME_H_

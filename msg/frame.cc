#include "msg/frame.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/str_format.h"
#include "msg/base/crc32c.h"
#include "msg/ring/ring_format.h"
#include "msg/base/wire.h"

namespace msgr {

static_assert(kFrameHeaderBytes == 48, "frame header layout is part of the wire contract");
static_assert(kRingPrefixBytes == 40, "ring prefix layout is part of the wire contract");

const char* FrameTypeName(FrameType t) {
  switch (t) {
    case FrameType::kHello:
      return "HELLO";
    case FrameType::kChallenge:
      return "CHALLENGE";
    case FrameType::kAuth:
      return "AUTH";
    case FrameType::kReady:
      return "READY";
    case FrameType::kMessage:
      return "MESSAGE";
    case FrameType::kRingRecord:
      return "RING_RECORD";
    case FrameType::kAck:
      return "ACK";
    case FrameType::kCredit:
      return "CREDIT";
    case FrameType::kKeepalive:
      return "KEEPALIVE";
    case FrameType::kKeepaliveAck:
      return "KEEPALIVE_ACK";
    case FrameType::kClose:
      return "CLOSE";
  }
  return "UNKNOWN";
}

bool IsKnownFrameType(uint8_t t) {
  switch (static_cast<FrameType>(t)) {
    case FrameType::kHello:
    case FrameType::kChallenge:
    case FrameType::kAuth:
    case FrameType::kReady:
    case FrameType::kMessage:
    case FrameType::kRingRecord:
    case FrameType::kAck:
    case FrameType::kCredit:
    case FrameType::kKeepalive:
    case FrameType::kKeepaliveAck:
    case FrameType::kClose:
      return true;
  }
  return false;
}

void EncodeFrameHeader(const FrameHeader& h, uint8_t* out) {
  StoreLe<uint32_t>(out + 0, kFrameMagic);
  out[4] = kFrameVersion;
  out[5] = static_cast<uint8_t>(h.type);
  StoreLe<uint16_t>(out + 6, h.flags);
  StoreLe<uint64_t>(out + 8, h.seq);
  StoreLe<uint64_t>(out + 16, h.ack_seq);
  StoreLe<uint32_t>(out + 24, h.payload_len);
  StoreLe<uint16_t>(out + 28, h.msg_type);
  StoreLe<uint16_t>(out + 30, 0);
  StoreLe<uint64_t>(out + 32, h.aux);
  StoreLe<uint32_t>(out + 40, h.payload_crc);
  StoreLe<uint32_t>(out + 44, Crc32c(0, out, 44));
}

absl::Status DecodeFrameHeader(const uint8_t* in, uint32_t max_payload, FrameHeader* out) {
  const uint32_t magic = LoadLe<uint32_t>(in);
  if (magic != kFrameMagic) {
    return absl::InvalidArgumentError(
        absl::StrFormat("bad frame magic 0x%08x (want 0x%08x)", magic, kFrameMagic));
  }
  const uint32_t want_crc = LoadLe<uint32_t>(in + 44);
  const uint32_t got_crc = Crc32c(0, in, 44);
  if (want_crc != got_crc) {
    return absl::DataLossError(
        absl::StrFormat("frame header crc mismatch (header says 0x%08x, "
                        "computed 0x%08x)",
                        want_crc, got_crc));
  }
  if (in[4] != kFrameVersion) {
    return absl::InvalidArgumentError(
        absl::StrFormat("unsupported frame version %d (want %d)", in[4], kFrameVersion));
  }
  if (!IsKnownFrameType(in[5])) {
    return absl::InvalidArgumentError(absl::StrFormat("unknown frame type %d", in[5]));
  }
  FrameHeader h;
  h.type = static_cast<FrameType>(in[5]);
  h.flags = LoadLe<uint16_t>(in + 6);
  h.seq = LoadLe<uint64_t>(in + 8);
  h.ack_seq = LoadLe<uint64_t>(in + 16);
  h.payload_len = LoadLe<uint32_t>(in + 24);
  h.msg_type = LoadLe<uint16_t>(in + 28);
  h.aux = LoadLe<uint64_t>(in + 32);
  h.payload_crc = LoadLe<uint32_t>(in + 40);
  if (LoadLe<uint16_t>(in + 30) != 0 || (h.flags & ~kKnownFrameFlags) != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s frame with reserved bits set", FrameTypeName(h.type)));
  }
  const bool sequenced = IsSequenced(h.type);
  if (sequenced != (h.seq != 0)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s frame with seq %d (data frames need seq > 0, control frames seq 0)",
                        FrameTypeName(h.type), h.seq));
  }
  const uint32_t limit = sequenced ? max_payload : kMaxControlPayload;
  uint32_t min_len = 0;
  if (h.type == FrameType::kRingRecord) {
    // A record also has to fit a ring: refuse it if it could not fit the largest one.
    min_len = kRingPrefixBytes + 1;
  }
  if (h.payload_len > limit || h.payload_len < min_len) {
    return absl::InvalidArgumentError(absl::StrFormat("%s frame payload length %d outside [%d, %d]",
                                                      FrameTypeName(h.type), h.payload_len, min_len,
                                                      limit));
  }
  *out = h;
  return absl::OkStatus();
}

size_t CrcCoveredBytes(const FrameHeader& h) {
  return h.type == FrameType::kRingRecord ? kRingPrefixBytes : h.payload_len;
}

absl::Status VerifyPayloadCrc(const FrameHeader& h, const void* covered, size_t len) {
  const uint32_t got = Crc32c(0, covered, len);
  if (got != h.payload_crc) {
    return absl::DataLossError(absl::StrFormat(
        "%s frame seq %d payload crc mismatch (header says 0x%08x, computed 0x%08x)",
        FrameTypeName(h.type), h.seq, h.payload_crc, got));
  }
  return absl::OkStatus();
}

void EncodeRingPrefix(const RingPrefix& p, uint8_t* out) {
  StoreLe<uint64_t>(out + 0, p.ring_seq);
  StoreLe<uint64_t>(out + 8, p.tid);
  StoreLe<uint64_t>(out + 16, p.object_offset);
  StoreLe<uint32_t>(out + 24, p.ring_offset);
  StoreLe<uint32_t>(out + 28, p.data_len);
  StoreLe<uint32_t>(out + 32, p.record_crc);
  StoreLe<uint16_t>(out + 36, p.oid_len);
  StoreLe<uint16_t>(out + 38, p.record_flags);
}

absl::Status DecodeRingPrefix(const FrameHeader& h, const uint8_t* in, RingPrefix* out) {
  RingPrefix p;
  p.ring_seq = LoadLe<uint64_t>(in + 0);
  p.tid = LoadLe<uint64_t>(in + 8);
  p.object_offset = LoadLe<uint64_t>(in + 16);
  p.ring_offset = LoadLe<uint32_t>(in + 24);
  p.data_len = LoadLe<uint32_t>(in + 28);
  p.record_crc = LoadLe<uint32_t>(in + 32);
  p.oid_len = LoadLe<uint16_t>(in + 36);
  p.record_flags = LoadLe<uint16_t>(in + 38);
  if (p.oid_len == 0 || p.oid_len > kMaxOidBytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring record seq %d: oid length %d outside [1, %d]", h.seq, p.oid_len, kMaxOidBytes));
  }
  if (uint64_t{kRingPrefixBytes} + p.oid_len + p.data_len != h.payload_len) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring record seq %d: prefix + oid %d + payload %d != frame payload length %d", h.seq,
        p.oid_len, p.data_len, h.payload_len));
  }
  if (p.ring_offset % kRingAlign != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "ring record seq %d: ring offset %d not %d-aligned", h.seq, p.ring_offset, kRingAlign));
  }
  *out = p;
  return absl::OkStatus();
}

void FrameDecoder::Append(const void* data, size_t len) {
  if (!failed_.ok()) return;
  if (pos_ > 0 && pos_ == buf_.size()) {
    buf_.clear();
    pos_ = 0;
  }
  buf_.append(static_cast<const char*>(data), len);
}

FrameDecoder::Result FrameDecoder::Next(DecodedFrame* out, absl::Status* error) {
  if (!failed_.ok()) {
    *error = failed_;
    return Result::kError;
  }
  const auto* base = reinterpret_cast<const uint8_t*>(buf_.data());
  if (!have_header_) {
    if (buffered() < kFrameHeaderBytes) return Result::kNeedMore;
    absl::Status s = DecodeFrameHeader(base + pos_, max_payload_, &header_);
    if (!s.ok()) {
      failed_ = s;
      *error = s;
      return Result::kError;
    }
    pos_ += kFrameHeaderBytes;
    have_header_ = true;
  }
  if (buffered() < header_.payload_len) return Result::kNeedMore;
  const uint8_t* payload = base + pos_;
  absl::Status s = VerifyPayloadCrc(header_, payload, CrcCoveredBytes(header_));
  if (s.ok() && header_.type == FrameType::kRingRecord) {
    RingPrefix p;
    s = DecodeRingPrefix(header_, payload, &p);
    if (s.ok()) {
      const uint8_t* oid = payload + kRingPrefixBytes;
      const uint32_t got = RecordPayloadCrc(oid, p.oid_len, oid + p.oid_len, p.data_len);
      if (got != p.record_crc) {
        s = absl::DataLossError(
            absl::StrFormat("ring record seq %d: payload crc mismatch", header_.seq));
      }
    }
  }
  if (!s.ok()) {
    failed_ = s;
    *error = s;
    return Result::kError;
  }
  out->header = header_;
  out->payload.assign(reinterpret_cast<const char*>(payload), header_.payload_len);
  pos_ += header_.payload_len;
  have_header_ = false;
  if (pos_ > (1u << 16) && pos_ * 2 > buf_.size()) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return Result::kFrame;
}

std::string EncodeFrame(FrameHeader h, std::string_view payload) {
  h.payload_len = static_cast<uint32_t>(payload.size());
  const size_t covered = std::min(CrcCoveredBytes(h), payload.size());
  h.payload_crc = Crc32c(0, payload.data(), covered);
  std::string out(kFrameHeaderBytes, '\0');
  EncodeFrameHeader(h, reinterpret_cast<uint8_t*>(out.data()));
  out.append(payload.data(), payload.size());
  return out;
}

}  // namespace msgr

// libFuzzer entry for the frame decoder and the handshake decoders: whatever the bytes,
// decoding must fail cleanly (no crash, no read out of bounds, no huge allocation).
// Built and run by tools/fuzz.sh (clang++ -fsanitize=fuzzer,address), outside Bazel.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "msg/frame.h"
#include "msg/handshake.h"

namespace {

void DecodeHandshake(uint8_t which, std::string_view b) {
  switch (which % 4) {
    case 0:
      (void)msgr::DecodeHello(b);
      break;
    case 1:
      (void)msgr::DecodeChallenge(b);
      break;
    case 2:
      (void)msgr::DecodeAuth(b);
      break;
    default:
      (void)msgr::DecodeReady(b);
      break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  // The raw input as one handshake payload.
  DecodeHandshake(data[0], std::string_view(reinterpret_cast<const char*>(data + 1), size - 1));

  // The input as a byte stream, fed in uneven chunks, through the streaming decoder.
  msgr::FrameDecoder dec(1 << 16);
  size_t pos = 0, chunk = 1;
  while (pos < size) {
    const size_t n = std::min(chunk, size - pos);
    dec.Append(data + pos, n);
    pos += n;
    chunk = chunk * 3 % 97 + 1;
    msgr::DecodedFrame f;
    absl::Status s;
    for (;;) {
      auto r = dec.Next(&f, &s);
      if (r != msgr::FrameDecoder::Result::kFrame) break;
      switch (f.header.type) {
        case msgr::FrameType::kHello:
          (void)msgr::DecodeHello(f.payload);
          break;
        case msgr::FrameType::kChallenge:
          (void)msgr::DecodeChallenge(f.payload);
          break;
        case msgr::FrameType::kAuth:
          (void)msgr::DecodeAuth(f.payload);
          break;
        case msgr::FrameType::kReady:
          (void)msgr::DecodeReady(f.payload);
          break;
        case msgr::FrameType::kRingRecord: {
          msgr::RingPrefix p;
          (void)msgr::DecodeRingPrefix(f.header, reinterpret_cast<const uint8_t*>(f.payload.data()),
                                       &p);
          break;
        }
        default:
          break;
      }
    }
  }
  // CRCs are hard to guess: also re-encode the input as a frame with valid crcs (fields
  // taken from the input) so the checks behind the crc get explored too.
  if (size >= 24) {
    msgr::FrameHeader h;
    h.type = static_cast<msgr::FrameType>(data[0]);
    h.flags = static_cast<uint16_t>(data[1] & 1);
    h.seq = data[2] & 1 ? data[3] : 0;
    std::memcpy(&h.ack_seq, data + 4, 8);
    std::memcpy(&h.aux, data + 12, 8);
    std::memcpy(&h.msg_type, data + 20, 2);
    std::string payload(reinterpret_cast<const char*>(data + 24), size - 24);
    if (msgr::IsKnownFrameType(data[0])) {
      std::string frame = msgr::EncodeFrame(h, payload);
      if (data[22] & 1) frame[24] ^= data[23];  // sometimes lie about the length
      msgr::FrameDecoder d2(1 << 16);
      d2.Append(frame.data(), frame.size());
      msgr::DecodedFrame f;
      absl::Status s;
      if (d2.Next(&f, &s) == msgr::FrameDecoder::Result::kFrame) {
        DecodeHandshake(static_cast<uint8_t>(f.header.type) - 1, f.payload);
        if (f.header.type == msgr::FrameType::kRingRecord) {
          msgr::RingPrefix p;
          (void)msgr::DecodeRingPrefix(f.header, reinterpret_cast<const uint8_t*>(f.payload.data()),
                                       &p);
        }
      }
    }
  }
  // Headers on their own, at every offset.
  for (size_t off = 0; off + msgr::kFrameHeaderBytes <= size; off += 7) {
    msgr::FrameHeader h;
    (void)msgr::DecodeFrameHeader(data + off, 1 << 20, &h);
  }
  return 0;
}

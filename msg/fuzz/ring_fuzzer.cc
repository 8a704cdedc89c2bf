// libFuzzer entry for the receive-ring consumer (msg/ring/ring.h): what an OSD's poller does
// with ring memory that a peer wrote -- over RDMA, bytes no CPU of ours checked. The input
// describes valid records (so that the fuzzer gets past the crcs), then damage: byte
// flips and raw overwrites anywhere in the ring. Whatever the bytes, RingConsumer::Next
// must either hand out a record that lies inside the ring and matches its header, or say
// kCorrupt/kEmpty -- never read outside the ring or loop.
// Built and run by tools/fuzz.sh (clang++ -fsanitize=fuzzer,address), outside Bazel.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "msg/ring/ring.h"
#include "msg/ring/ring_format.h"

namespace {

constexpr size_t kRing = 4 * msgr::kMinRingBytes;  // small (wraps, pads) yet fits aligned records

// Reads little pieces of the input in order; past its end, zeros.
struct Input {
  const uint8_t* p;
  size_t n;
  uint64_t Take(size_t bytes) {
    uint64_t v = 0;
    for (size_t i = 0; i < bytes; ++i) {
      v |= static_cast<uint64_t>(n > 0 ? *p : 0) << (8 * i);
      if (n > 0) ++p, --n;
    }
    return v;
  }
};

[[noreturn]] void Fail(const char* what) {
  std::fprintf(stderr, "ring_fuzzer: %s\n", what);
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Input in{data, size};
  // Ring memory aligned like a real ring (aligned records' payloads must be).
  static uint8_t* ring = static_cast<uint8_t*>(std::aligned_alloc(msgr::kPayloadAlign, kRing));
  std::memset(ring, 0, kRing);
  msgr::RingProducer producer(kRing);
  msgr::RingConsumer consumer(ring, kRing);

  // 1. Valid records: oid length, payload length, flags, tid.
  const int records = static_cast<int>(in.Take(1) % 24);
  int produced = 0;
  std::string oid(msgr::kMaxOidBytes, 'o');
  std::vector<uint8_t> payload(kRing, 0x5a);
  for (int i = 0; i < records; ++i) {
    const size_t oid_len = 1 + in.Take(1) % 64;
    size_t len = in.Take(2);
    if (in.Take(1) & 1) len += msgr::kAlignedPayloadMinBytes / 2;  // now and then, large
    len = std::min(len, msgr::MaxRecordPayload(kRing));
    const auto placed = producer.Reserve(msgr::RecordBytes(oid_len, len));
    if (!placed) break;  // full: the rest of the input is damage
    if (placed->has_pad) {
      msgr::WritePadRecord(ring + placed->pad_offset, placed->pad_bytes, placed->pad_seq);
    }
    uint8_t* slot = ring + placed->offset;
    const size_t payload_off = msgr::RecordPayloadOffset(oid_len, len);
    uint8_t* gap = slot + msgr::kRecordHeaderBytes;  // zeros before the oid (aligned layout)
    std::memset(gap, 0, payload_off - oid_len - msgr::kRecordHeaderBytes);
    std::memcpy(slot + payload_off - oid_len, oid.data(), oid_len);
    std::memcpy(slot + payload_off, payload.data(), len);
    msgr::RecordHeader h;
    msgr::FillRecordHeader(&h, msgr::RecordType::kWrite, static_cast<uint16_t>(in.Take(1) & 3),
                           placed->seq, static_cast<uint16_t>(oid_len),
                           static_cast<uint32_t>(len),
                           msgr::RecordPayloadCrc(oid.data(), oid_len, payload.data(), len), 7,
                           in.Take(2), 0);
    msgr::PublishRecord(slot, h);
    ++produced;
  }

  // 2. Damage: byte flips, then raw bytes at a chosen offset.
  const int flips = static_cast<int>(in.Take(1) % 8);
  for (int i = 0; i < flips; ++i) {
    const size_t at = in.Take(2) % kRing;
    ring[at] ^= static_cast<uint8_t>(in.Take(1) | 1);
  }
  const size_t raw_at = in.Take(2) % kRing;
  const size_t raw = std::min(in.n, kRing - raw_at);
  std::memcpy(ring + raw_at, in.p, raw);
  const bool intact = flips == 0 && raw == 0;

  // 3. Consume. Every record handed out lies inside the ring and agrees with its header;
  // the read position only moves forward; at most one record per ring byte.
  // Undamaged, it hands out exactly the records written, then kEmpty.
  uint64_t last_read = 0;
  int consumed = 0;
  for (size_t steps = 0; steps <= kRing; ++steps) {
    msgr::RecordView rec;
    std::string error;
    const auto r = consumer.Next(&rec, &error);
    if (r != msgr::RingConsumer::Poll::kRecord) {
      if (intact && (r != msgr::RingConsumer::Poll::kEmpty || consumed != produced)) {
        std::fprintf(stderr, "ring_fuzzer: %d of %d records, then %s\n", consumed, produced,
                     error.c_str());
        Fail("an undamaged ring did not give back exactly what was written");
      }
      return 0;
    }
    ++consumed;
    const uint8_t* end = ring + kRing;
    const msgr::RecordHeader* h = rec.header;
    if (reinterpret_cast<const uint8_t*>(h) < ring ||
        reinterpret_cast<const uint8_t*>(h) + sizeof(*h) > end) {
      Fail("header outside the ring");
    }
    if (reinterpret_cast<const uint8_t*>(rec.oid) < ring ||
        reinterpret_cast<const uint8_t*>(rec.oid) + h->oid_len > end || h->oid_len == 0) {
      Fail("oid outside the ring");
    }
    if (rec.payload < ring || rec.payload + h->payload_len > end) Fail("payload outside the ring");
    if (rec.end_position <= last_read || rec.end_position - rec.position != h->record_bytes) {
      Fail("positions do not advance by the record's size");
    }
    // Touch every byte the poller would hand to the store.
    volatile uint8_t sink = 0;
    for (uint32_t i = 0; i < h->payload_len; ++i) sink ^= rec.payload[i];
    (void)sink;
    last_read = rec.end_position;
    consumer.Release(rec.end_position);
  }
  Fail("more records than ring bytes");
}

#include "msg/ring/ring.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace msgr {
namespace {

constexpr size_t kRing = kMinRingBytes;

struct AlignedRing {
  explicit AlignedRing(size_t bytes)
      : mem(static_cast<uint8_t*>(std::aligned_alloc(kPayloadAlign, bytes)), &std::free),
        size(bytes) {
    std::memset(mem.get(), 0, bytes);
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> mem;
  size_t size;
};

// Writes one record the way the TCP backend does: body first (gap zeroed), seq last.
bool Produce(RingProducer* p, uint8_t* base, const std::string& oid, const std::string& payload,
             uint64_t tid, RingPlacement* placed = nullptr) {
  const size_t bytes = RecordBytes(oid.size(), payload.size());
  auto pl = p->Reserve(bytes);
  if (!pl) return false;
  if (placed != nullptr) *placed = *pl;
  if (pl->has_pad) WritePadRecord(base + pl->pad_offset, pl->pad_bytes, pl->pad_seq);
  uint8_t* slot = base + pl->offset;
  const size_t oid_at = RecordOidOffset(oid.size(), payload.size());
  std::memset(slot + kRecordHeaderBytes, 0, oid_at - kRecordHeaderBytes);
  std::memcpy(slot + oid_at, oid.data(), oid.size());
  std::memcpy(slot + oid_at + oid.size(), payload.data(), payload.size());
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, 0, pl->seq, static_cast<uint16_t>(oid.size()),
                   static_cast<uint32_t>(payload.size()),
                   RecordPayloadCrc(oid.data(), oid.size(), payload.data(), payload.size()), 7,
                   tid, 0);
  PublishRecord(slot, h);
  return true;
}

// A payload whose bytes depend on their position and the seed (so misplaced bytes show).
std::string Pattern(size_t len, uint32_t seed) {
  std::string s(len, '\0');
  uint32_t x = seed * 2654435761u + 1;
  for (size_t i = 0; i < len; ++i) {
    x = x * 1664525u + 1013904223u;
    s[i] = static_cast<char>(x >> 24);
  }
  return s;
}

std::string PayloadOf(const RecordView& v) {
  return std::string(reinterpret_cast<const char*>(v.payload), v.header->payload_len);
}

TEST(RingTest, RoundTripWithoutCopy) {
  AlignedRing r(kRing);
  RingProducer prod(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  RecordView v;
  std::string err;
  EXPECT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kEmpty);
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "obj.1", "hello ring", 42));
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(std::string(v.oid, v.header->oid_len), "obj.1");
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(v.payload), v.header->payload_len),
            "hello ring");
  EXPECT_EQ(v.header->tid, 42u);
  EXPECT_EQ(v.header->client_id, 7u);
  // The view points into ring memory: the payload was not copied.
  EXPECT_GE(v.payload, r.mem.get());
  EXPECT_LT(v.payload, r.mem.get() + kRing);
  EXPECT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kEmpty);
}

TEST(RingTest, ProducerStopsAtCreditAndResumesAfterRelease) {
  AlignedRing r(kRing);
  RingProducer prod(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  const std::string payload(4000, 'p');
  int produced = 0;
  while (Produce(&prod, r.mem.get(), "o", payload, produced)) ++produced;
  // 4000 B + header + oid rounds to 4096 B: exactly ring/4096 records fit.
  EXPECT_EQ(produced, static_cast<int>(kRing / 4096));
  EXPECT_EQ(prod.free_bytes(), 0u);
  RecordView v;
  std::string err;
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord);
  cons.Release(v.end_position);
  EXPECT_FALSE(Produce(&prod, r.mem.get(), "o", payload, 99)) << "no credit returned yet";
  EXPECT_TRUE(prod.OnCredit(cons.released()));
  EXPECT_TRUE(Produce(&prod, r.mem.get(), "o", payload, 99));
  EXPECT_FALSE(prod.OnCredit(prod.produced() + 1)) << "credit beyond produced is refused";
}

// A resized ring goes on with the session's seqs from position 0: the producer and the
// consumer of the new ring agree, and the consumer refuses a record that restarts at 1 (a
// stale or foreign ring) instead of serving it.
TEST(RingTest, RingThatContinuesASessionStartsAtItsFirstSeq) {
  AlignedRing r(kRing);
  RingProducer prod(kRing, /*first_seq=*/1001);
  RingConsumer cons(r.mem.get(), kRing, /*first_seq=*/1001);
  RingPlacement pl;
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "o", "after the resize", 5, &pl));
  EXPECT_EQ(pl.seq, 1001u);
  EXPECT_EQ(pl.offset, 0u);
  RecordView v;
  std::string err;
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(PayloadOf(v), "after the resize");
  EXPECT_EQ(cons.next_seq(), 1002u);

  AlignedRing other(kRing);
  RingProducer fresh(kRing);  // seq 1
  RingConsumer expects_more(other.mem.get(), kRing, /*first_seq=*/1001);
  ASSERT_TRUE(Produce(&fresh, other.mem.get(), "o", "new session", 6));
  EXPECT_NE(expects_more.Next(&v, &err), RingConsumer::Poll::kRecord);
}

TEST(RingTest, WrapAroundWithPadsPreservesEveryRecordInOrder) {
  AlignedRing r(kRing);
  RingProducer prod(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<size_t> len(0, kRing / 3);
  uint64_t next_tid = 0, expect_tid = 0;
  std::vector<std::string> sent;
  int pads_seen = 0;
  uint64_t last_seq = 0;
  for (int round = 0; round < 2000; ++round) {
    std::string payload(len(rng), static_cast<char>('a' + round % 26));
    if (Produce(&prod, r.mem.get(), "obj-" + std::to_string(next_tid), payload, next_tid)) {
      sent.push_back(payload);
      ++next_tid;
    }
    RecordView v;
    std::string err;
    while (cons.Next(&v, &err) == RingConsumer::Poll::kRecord) {
      ASSERT_EQ(v.header->tid, expect_tid);
      if (v.header->seq != last_seq + 1) ++pads_seen;  // a PAD took a seq in between
      last_seq = v.header->seq;
      ASSERT_EQ(std::string(reinterpret_cast<const char*>(v.payload), v.header->payload_len),
                sent[expect_tid]);
      ++expect_tid;
      cons.Release(v.end_position);
    }
    ASSERT_TRUE(err.empty()) << err;
    prod.OnCredit(cons.released());
  }
  EXPECT_EQ(expect_tid, next_tid);
  EXPECT_GT(next_tid, 100u);
  EXPECT_GT(pads_seen, 0) << "random sizes must have wrapped with a PAD";
  EXPECT_EQ(cons.in_use(), 0u);
}

TEST(RingTest, PayloadCorruptionIsReportedAndNotServed) {
  AlignedRing r(kRing);
  RingProducer prod(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "good", "first", 1));
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "bad", "second", 2));
  // Flip a payload byte of the second record.
  r.mem.get()[RecordBytes(4, 5) + kRecordHeaderBytes + 3 + 1] ^= 0x40;
  RecordView v;
  std::string err;
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord);
  EXPECT_EQ(v.header->tid, 1u);
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kCorrupt);
  EXPECT_NE(err.find("payload crc mismatch"), std::string::npos) << err;
  EXPECT_NE(err.find("tid 2"), std::string::npos) << err;
}

TEST(RingTest, StaleBytesMatchingSeqAreNotARecord) {
  AlignedRing r(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  // Garbage whose seq word equals the expected seq (1) but whose header crc is wrong.
  uint64_t one = 1;
  std::memcpy(r.mem.get() + offsetof(RecordHeader, seq), &one, sizeof(one));
  std::memcpy(r.mem.get(), &kRecordMagic, sizeof(kRecordMagic));
  RecordView v;
  std::string err;
  EXPECT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kEmpty);
}

// A complete header of another ring layout version (magic, seq and header crc all valid)
// is a peer running another build: refused by name, not waited for as "not yet" (which
// would stall the ring for good) and never served as a record.
TEST(RingTest, HeaderOfAnotherLayoutVersionIsRefusedNamingBothVersions) {
  for (const uint8_t other : {uint8_t{0}, uint8_t{kRecordVersion + 1}, uint8_t{0xff}}) {
    AlignedRing r(kRing);
    RingProducer prod(kRing);
    RingConsumer cons(r.mem.get(), kRing);
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "mine", "first", 1));
    RingPlacement second;
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "theirs", "second", 2, &second));
    auto* h = reinterpret_cast<RecordHeader*>(r.mem.get() + second.offset);
    h->version = other;
    h->header_crc = RecordHeaderCrc(*h);
    RecordView v;
    std::string err;
    ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << "records before it stay valid";
    EXPECT_EQ(v.header->tid, 1u);
    ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kCorrupt) << int{other};
    EXPECT_NE(err.find("ring layout version " + std::to_string(other) +
                       ", this build reads version " + std::to_string(kRecordVersion)),
              std::string::npos)
        << err;
  }
}

TEST(RingTest, OutOfBoundsLengthIsCorrupt) {
  AlignedRing r(kRing);
  RingConsumer cons(r.mem.get(), kRing);
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, 0, 1, 3, 10, 0, 0, 0, 0);
  h.record_bytes = static_cast<uint32_t>(kRing * 2);
  h.header_crc = RecordHeaderCrc(h);
  PublishRecord(r.mem.get(), h);
  RecordView v;
  std::string err;
  EXPECT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kCorrupt);
  EXPECT_NE(err.find("out of bounds"), std::string::npos) << err;
}

TEST(RingTest, SizesAndLimits) {
  EXPECT_TRUE(IsValidRingSize(kDefaultRingBytes));
  EXPECT_FALSE(IsValidRingSize(kMinRingBytes / 2));
  EXPECT_FALSE(IsValidRingSize(kMinRingBytes + 64));
  EXPECT_EQ(RecordBytes(0, 0), kRecordHeaderBytes);
  EXPECT_EQ(RecordBytes(1, 0), 2 * kRingAlign);
  EXPECT_LE(RecordBytes(kMaxOidBytes, MaxRecordPayload(kRing)), kRing / 2);
  // The aligned layout: payload at kPayloadAlign, oid right before it.
  EXPECT_EQ(RecordPayloadOffset(5, kAlignedPayloadMinBytes), kPayloadAlign);
  EXPECT_EQ(RecordOidOffset(5, kAlignedPayloadMinBytes), kPayloadAlign - 5);
  EXPECT_EQ(RecordBytes(5, kAlignedPayloadMinBytes), kPayloadAlign + kAlignedPayloadMinBytes);
  EXPECT_EQ(RecordBytes(5, kAlignedPayloadMinBytes + 1),
            kPayloadAlign + kAlignedPayloadMinBytes + kRingAlign);
  EXPECT_EQ(RecordPayloadOffset(5, kAlignedPayloadMinBytes - 1), kRecordHeaderBytes + 5);
  EXPECT_EQ(MaxRecordPayload(kDefaultRingBytes), kDefaultRingBytes / 2 - 2 * kPayloadAlign);
  EXPECT_GE(MaxRecordPayload(kDefaultRingBytes), size_t{4} << 20) << "4 MiB objects in one record";
  EXPECT_EQ(MaxRecordPayload(kMinRingBytes), kMinRingBytes / 2 - kRecordHeaderBytes - kMaxOidBytes);
}

TEST(RingTest, FillRecordHeaderSetsTheAlignedFlagFromThePayloadLength) {
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, kRecordFlagAlignedPayload | kRecordFlagLast, 1, 1,
                   100, 0, 0, 0, 0);
  EXPECT_EQ(h.flags, kRecordFlagLast) << "a sender cannot ask for the aligned layout";
  FillRecordHeader(&h, RecordType::kWrite, kRecordFlagLast, 1, 1, kAlignedPayloadMinBytes, 0, 0,
                   0, 0);
  EXPECT_EQ(h.flags, kRecordFlagLast | kRecordFlagAlignedPayload);
  EXPECT_EQ(h.record_bytes, kAlignedRecordMinBytes);
  EXPECT_EQ(RecordHeaderCrc(h), h.header_crc);
}

// Moves an idle producer's position forward by `bytes` (a multiple of kRingAlign) with
// packed reservations, everything released.
void Advance(RingProducer* prod, size_t bytes) {
  while (bytes > 0) {
    const size_t c = std::min<size_t>(bytes, 32 * 1024);  // packed, <= half of any ring
    ASSERT_TRUE(prod->Reserve(c).has_value());
    ASSERT_TRUE(prod->OnCredit(prod->produced()));
    bytes -= c;
  }
}

// Every ring size: the largest record, placed after the worst-case PAD, fits in an empty
// ring (the producer can always make progress once the consumer caught up).
TEST(RingTest, LargestRecordFitsAfterAnyPad) {
  for (size_t ring = kMinRingBytes; ring <= (size_t{64} << 20); ring *= 2) {
    const size_t max = MaxRecordPayload(ring);
    const size_t big = RecordBytes(kMaxOidBytes, max);
    ASSERT_LE(big, MaxRecordBytes(ring, IsAlignedRecord(max))) << ring;
    EXPECT_EQ(IsAlignedRecord(max), ring >= 256 * 1024) << ring;
    for (size_t at : {kRingAlign, kPayloadAlign - kRingAlign, kPayloadAlign + kRingAlign,
                      ring / 2 - kRingAlign, ring - big + kRingAlign, ring - kRingAlign}) {
      RingProducer prod(ring);
      Advance(&prod, at);
      auto p = prod.Reserve(big);
      ASSERT_TRUE(p.has_value()) << "ring " << ring << " at " << at;
      if (IsAlignedRecord(max)) {
        EXPECT_EQ(p->offset % kPayloadAlign, 0u);
      }
      EXPECT_LE(p->offset + big, ring);
      EXPECT_EQ(p->has_pad, p->offset != at) << ring << " " << at;
    }
  }
}

constexpr size_t kBigRing = 1 << 20;

TEST(RingTest, AlignedRecordGetsAPadToA4KiBSlotAndItsPayloadIsAligned) {
  AlignedRing r(kBigRing);
  RingProducer prod(kBigRing);
  RingConsumer cons(r.mem.get(), kBigRing);
  RingPlacement pl;
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "small", "x", 1, &pl));
  EXPECT_FALSE(pl.has_pad);
  const std::string big = Pattern(kAlignedPayloadMinBytes + 123, 1);
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "big.object", big, 2, &pl));
  // The small record ends at 128; one PAD of 4096 - 128 bytes, then the slot at 4096.
  ASSERT_TRUE(pl.has_pad);
  EXPECT_EQ(pl.pad_offset, RecordBytes(5, 1));
  EXPECT_EQ(pl.pad_bytes, kPayloadAlign - RecordBytes(5, 1));
  EXPECT_EQ(pl.offset, kPayloadAlign);
  EXPECT_EQ(pl.seq, pl.pad_seq + 1);
  EXPECT_EQ(pl.end_position, kPayloadAlign + RecordBytes(10, big.size()));
  // Already on a boundary: no PAD.
  const std::string big2 = Pattern(3 * kAlignedPayloadMinBytes, 2);
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "o", big2, 3, &pl));  // after big: unaligned
  EXPECT_TRUE(pl.has_pad);
  EXPECT_EQ(pl.offset % kPayloadAlign, 0u);
  ASSERT_TRUE(prod.Reserve(kPayloadAlign * 3 - (prod.produced() % kPayloadAlign)).has_value());
  ASSERT_EQ(prod.produced() % kPayloadAlign, 0u);
  auto p = prod.Reserve(RecordBytes(1, kAlignedPayloadMinBytes));
  ASSERT_TRUE(p.has_value());
  EXPECT_FALSE(p->has_pad);

  RecordView v;
  std::string err;
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(PayloadOf(v), "x");
  EXPECT_EQ(v.header->flags & kRecordFlagAlignedPayload, 0);
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;  // the PAD is skipped
  EXPECT_EQ(v.header->tid, 2u);
  EXPECT_EQ(v.position, kPayloadAlign);
  EXPECT_NE(v.header->flags & kRecordFlagAlignedPayload, 0);
  EXPECT_EQ(v.payload, r.mem.get() + kPayloadAlign + kPayloadAlign) << "zero copy, in place";
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.payload) % kPayloadAlign, 0u);
  EXPECT_EQ(v.oid + v.header->oid_len, reinterpret_cast<const char*>(v.payload));
  EXPECT_EQ(std::string(v.oid, v.header->oid_len), "big.object");
  EXPECT_EQ(PayloadOf(v), big);
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(v.payload) % kPayloadAlign, 0u);
  EXPECT_EQ(PayloadOf(v), big2);
}

TEST(RingTest, AlignedRecordThatDoesNotFitWrapsToOffsetZeroWithOnePad) {
  AlignedRing r(kBigRing);
  RingProducer prod(kBigRing);
  RingConsumer cons(r.mem.get(), kBigRing);
  const std::string big = Pattern(kBigRing / 4, 3);
  RingPlacement pl;
  // Three records of 256 KiB + 4 KiB, back to back on 4 KiB boundaries (no PAD): the
  // fourth does not fit before the ring end.
  for (uint64_t tid = 1; tid <= 3; ++tid) {
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "o" + std::to_string(tid), big, tid, &pl));
  }
  RecordView v;
  std::string err;
  for (uint64_t tid = 1; tid <= 3; ++tid) {
    ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
    EXPECT_EQ(PayloadOf(v), big);
  }
  cons.Release(cons.read_position());
  ASSERT_TRUE(prod.OnCredit(cons.released()));
  const size_t before = prod.produced() % kBigRing;
  ASSERT_GT(before + RecordBytes(2, big.size()), kBigRing) << "the test must force a wrap";
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "o4", big, 4, &pl));
  ASSERT_TRUE(pl.has_pad);
  EXPECT_EQ(pl.pad_offset, before);
  EXPECT_EQ(pl.pad_bytes, kBigRing - before) << "one PAD to the ring end, not two";
  EXPECT_EQ(pl.offset, 0u);
  ASSERT_EQ(cons.Next(&v, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(v.header->tid, 4u);
  EXPECT_EQ(v.payload, r.mem.get() + kPayloadAlign);
  EXPECT_EQ(PayloadOf(v), big);
}

TEST(RingTest, MixedSizesWrapManyTimesAlignedPayloadsStayAlignedAndIntact) {
  AlignedRing r(kBigRing);
  RingProducer prod(kBigRing);
  RingConsumer cons(r.mem.get(), kBigRing);
  std::mt19937 rng(4321);
  std::uniform_int_distribution<size_t> small_len(0, 9000);
  std::uniform_int_distribution<size_t> big_len(kAlignedPayloadMinBytes - 2,
                                                MaxRecordPayload(kBigRing));
  std::uniform_int_distribution<size_t> oid_len(1, kMaxOidBytes);
  std::vector<std::string> sent, oids;
  uint64_t next_tid = 0, expect_tid = 0, aligned_seen = 0, laps = 0;
  for (int round = 0; round < 3000; ++round) {
    const size_t len = rng() % 3 == 0 ? big_len(rng) : small_len(rng);
    const std::string payload = Pattern(len, static_cast<uint32_t>(round));
    const std::string oid(oid_len(rng), static_cast<char>('a' + round % 26));
    if (Produce(&prod, r.mem.get(), oid, payload, next_tid)) {
      sent.push_back(payload);
      oids.push_back(oid);
      ++next_tid;
    }
    RecordView v;
    std::string err;
    // Drain only every other round, so the producer also meets a full ring.
    while (round % 2 == 0 && cons.Next(&v, &err) == RingConsumer::Poll::kRecord) {
      ASSERT_EQ(v.header->tid, expect_tid);
      const bool aligned = IsAlignedRecord(v.header->payload_len);
      ASSERT_EQ(aligned, (v.header->flags & kRecordFlagAlignedPayload) != 0);
      if (aligned) {
        ++aligned_seen;
        ASSERT_EQ(reinterpret_cast<uintptr_t>(v.payload) % kPayloadAlign, 0u);
        ASSERT_EQ(v.position % kPayloadAlign, 0u);
      }
      ASSERT_EQ(std::string(v.oid, v.header->oid_len), oids[expect_tid]);
      ASSERT_TRUE(PayloadOf(v) == sent[expect_tid]) << "tid " << expect_tid;
      ++expect_tid;
      cons.Release(v.end_position);
    }
    ASSERT_TRUE(err.empty()) << err;
    prod.OnCredit(cons.released());
  }
  laps = prod.produced() / kBigRing;
  EXPECT_GT(next_tid, 500u);
  EXPECT_GT(aligned_seen, 100u);
  EXPECT_GT(laps, 20u);
  EXPECT_GE(expect_tid + 1, next_tid);
}

// Builds a kWrite header for a hand-placed body at `slot` (seq `seq`) and publishes it.
void PublishRaw(uint8_t* slot, uint64_t seq, uint16_t oid_len, const std::string& payload,
                const uint8_t* oid_at, uint16_t flags_xor = 0, uint32_t record_bytes = 0) {
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, 0, seq, oid_len, static_cast<uint32_t>(payload.size()),
                   RecordPayloadCrc(oid_at, oid_len, payload.data(), payload.size()), 7, 9, 0);
  h.flags ^= flags_xor;
  if (record_bytes != 0) h.record_bytes = record_bytes;
  h.header_crc = RecordHeaderCrc(h);
  PublishRecord(slot, h);
}

RingConsumer::Poll NextOf(RingConsumer* c, std::string* err) {
  RecordView v;
  return c->Next(&v, err);
}

TEST(RingTest, MalformedAlignedRecordsAreCorrupt) {
  const std::string big = Pattern(kAlignedPayloadMinBytes, 5);
  const std::string small = Pattern(100, 6);
  std::string err;
  {  // The packed layout (oid right after the header) for a large payload: the gap holds it.
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    uint8_t* slot = r.mem.get();
    std::memcpy(slot + kRecordHeaderBytes, "oid", 3);
    std::memcpy(slot + kRecordHeaderBytes + 3, big.data(), big.size());
    PublishRaw(slot, 1, 3, big, slot + kRecordHeaderBytes, 0,
               static_cast<uint32_t>(RecordBytes(3, big.size())));
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
    EXPECT_NE(err.find("gap"), std::string::npos) << err;
  }
  {  // Gap clean, oid where it belongs, but one stray byte in the gap.
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    RingProducer prod(kBigRing);
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "oid", big, 1));
    RingConsumer ok(r.mem.get(), kBigRing);
    EXPECT_EQ(NextOf(&ok, &err), RingConsumer::Poll::kRecord) << err;
    r.mem.get()[kPayloadAlign - 3 - 1] = 1;  // the byte right before the oid
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
    EXPECT_NE(err.find("gap"), std::string::npos) << err;
  }
  {  // Flag missing on a large payload / set on a small one.
    for (const std::string* p : {&big, &small}) {
      AlignedRing r(kBigRing);
      RingConsumer cons(r.mem.get(), kBigRing);
      uint8_t* slot = r.mem.get();
      const size_t oid_at = RecordOidOffset(3, p->size());
      std::memcpy(slot + oid_at, "oid", 3);
      std::memcpy(slot + oid_at + 3, p->data(), p->size());
      PublishRaw(slot, 1, 3, *p, slot + oid_at, kRecordFlagAlignedPayload);
      EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
      EXPECT_NE(err.find("aligned-layout flag"), std::string::npos) << err;
    }
  }
  {  // A well-formed aligned body at an offset that is not 4 KiB-aligned (no PAD before it).
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    RingProducer prod(kBigRing);
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "s", "tiny", 1));
    uint8_t* slot = r.mem.get() + RecordBytes(1, 4);
    const size_t oid_at = RecordOidOffset(3, big.size());
    std::memcpy(slot + oid_at, "oid", 3);
    std::memcpy(slot + oid_at + 3, big.data(), big.size());
    PublishRaw(slot, 2, 3, big, slot + oid_at);
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kRecord) << err;
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
    EXPECT_NE(err.find("unaligned offset"), std::string::npos) << err;
  }
  {  // oid_len past what the gap can hold (over kMaxOidBytes), record_bytes made to match.
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    uint8_t* slot = r.mem.get();
    const uint16_t oid_len = kPayloadAlign - kRecordHeaderBytes + 8;  // would overlap the header
    PublishRaw(slot, 1, oid_len, big, slot + kPayloadAlign - oid_len, 0,
               static_cast<uint32_t>(RecordBytes(oid_len, big.size())));
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
    EXPECT_NE(err.find("bad type or lengths"), std::string::npos) << err;
  }
  {  // record_bytes of the packed layout on an aligned record.
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    uint8_t* slot = r.mem.get();
    const size_t oid_at = RecordOidOffset(3, big.size());
    std::memcpy(slot + oid_at, "oid", 3);
    std::memcpy(slot + oid_at + 3, big.data(), big.size());
    PublishRaw(slot, 1, 3, big, slot + oid_at, 0,
               static_cast<uint32_t>(
                   (kRecordHeaderBytes + 3 + big.size() + kRingAlign - 1) / kRingAlign * kRingAlign));
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt);
    EXPECT_NE(err.find("bad type or lengths"), std::string::npos) << err;
  }
}

TEST(RingTest, PadMustEndAtTheRingEndOrOnA4KiBBoundary) {
  const size_t at = RecordBytes(1, 0);  // a PAD after one 128-byte record
  for (size_t bad : {kPayloadAlign - at - kRingAlign,     // ends short of the boundary
                     2 * kPayloadAlign - at}) {           // on a boundary, but too long
    AlignedRing r(kBigRing);
    RingConsumer cons(r.mem.get(), kBigRing);
    RingProducer prod(kBigRing);
    ASSERT_TRUE(Produce(&prod, r.mem.get(), "s", "", 1));
    WritePadRecord(r.mem.get() + at, static_cast<uint32_t>(bad), 2);
    std::string err;
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kRecord) << err;
    EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kCorrupt) << bad;
    EXPECT_NE(err.find("reaches neither"), std::string::npos) << err;
  }
  // The good one: up to the boundary.
  AlignedRing r(kBigRing);
  RingConsumer cons(r.mem.get(), kBigRing);
  RingProducer prod(kBigRing);
  ASSERT_TRUE(Produce(&prod, r.mem.get(), "s", "", 1));
  WritePadRecord(r.mem.get() + at, static_cast<uint32_t>(kPayloadAlign - at), 2);
  std::string err;
  EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kRecord) << err;
  EXPECT_EQ(NextOf(&cons, &err), RingConsumer::Poll::kEmpty) << err;
  EXPECT_EQ(cons.read_position(), kPayloadAlign);
  EXPECT_EQ(cons.next_seq(), 3u);
}

}  // namespace
}  // namespace msgr

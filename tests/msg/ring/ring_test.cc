#include "msg/ring/ring.h"

#include <gtest/gtest.h>

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
      : mem(static_cast<uint8_t*>(std::aligned_alloc(kRingAlign, bytes)), &std::free), size(bytes) {
    std::memset(mem.get(), 0, bytes);
  }
  std::unique_ptr<uint8_t, decltype(&std::free)> mem;
  size_t size;
};

// Writes one record the way the TCP backend does: body first, seq last.
bool Produce(RingProducer* p, uint8_t* base, const std::string& oid, const std::string& payload,
             uint64_t tid) {
  const size_t bytes = RecordBytes(oid.size(), payload.size());
  auto pl = p->Reserve(bytes);
  if (!pl) return false;
  if (pl->has_pad) WritePadRecord(base + pl->pad_offset, pl->pad_bytes, pl->pad_seq);
  uint8_t* slot = base + pl->offset;
  std::memcpy(slot + kRecordHeaderBytes, oid.data(), oid.size());
  std::memcpy(slot + kRecordHeaderBytes + oid.size(), payload.data(), payload.size());
  RecordHeader h;
  FillRecordHeader(&h, RecordType::kWrite, 0, pl->seq, static_cast<uint16_t>(oid.size()),
                   static_cast<uint32_t>(payload.size()),
                   RecordPayloadCrc(oid.data(), oid.size(), payload.data(), payload.size()), 7,
                   tid, 0);
  PublishRecord(slot, h);
  return true;
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
}

}  // namespace
}  // namespace msgr

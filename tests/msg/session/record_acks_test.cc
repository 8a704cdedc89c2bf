#include "msg/session/record_acks.h"

#include <gtest/gtest.h>

namespace msgr {
namespace {

TEST(RecordAcksTest, CreditAcknowledgesRecordsItCoversOnce) {
  SentRecords s;
  s.Add(1, 100);
  s.Add(2, 200);
  s.Add(3, 300);
  std::vector<RecordAck> out;
  s.OnCredit(150, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].tid, 1u);
  EXPECT_EQ(out[0].code, absl::StatusCode::kOk);
  out.clear();
  s.OnCredit(150, &out);  // repeated credit: nothing new
  EXPECT_TRUE(out.empty());
  s.OnCredit(300, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].tid, 3u);
  EXPECT_EQ(s.size(), 0u);
}

TEST(RecordAcksTest, NackedRecordIsNotAckedAgainByCredit) {
  SentRecords s;
  s.Add(7, 64);
  s.Add(8, 128);
  std::vector<RecordAck> out;
  const RecordAck fail{8, absl::StatusCode::kResourceExhausted};
  s.OnNack({&fail, 1}, &out);
  s.OnNack({&fail, 1}, &out);  // resent after a reconnect: ignored
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].code, absl::StatusCode::kResourceExhausted);
  s.OnCredit(128, &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].tid, 7u);
  EXPECT_EQ(out[1].code, absl::StatusCode::kOk);
}

TEST(RecordAcksTest, BarrierHoldsCreditUntilNackAcknowledged) {
  NackBarrier b;
  EXPECT_EQ(b.Clamp(500), 500u);
  b.Add(200);
  b.Add(400);
  EXPECT_EQ(b.Clamp(500), 200u);
  EXPECT_TRUE(b.LiftOldest());
  EXPECT_EQ(b.Clamp(500), 400u);
  EXPECT_TRUE(b.LiftOldest());
  EXPECT_FALSE(b.LiftOldest());
  EXPECT_EQ(b.Clamp(500), 500u);
}

TEST(RecordAcksTest, NackEncodingRoundTripsAndRejectsGarbage) {
  std::vector<RecordAck> v = {{1, absl::StatusCode::kResourceExhausted},
                              {99, absl::StatusCode::kDataLoss}};
  Message m = EncodeRecordNack(v);
  EXPECT_EQ(m.type, kRecordNackType);
  EXPECT_GE(m.type, kReservedMessageTypes);
  auto d = DecodeRecordNack(m.payload);
  ASSERT_TRUE(d.ok()) << d.status();
  ASSERT_EQ(d->size(), 2u);
  EXPECT_EQ((*d)[1].tid, 99u);
  EXPECT_EQ((*d)[1].code, absl::StatusCode::kDataLoss);
  for (size_t n = 0; n < m.payload.size(); ++n) {
    EXPECT_FALSE(DecodeRecordNack(m.payload.substr(0, n)).ok()) << "prefix " << n;
  }
  const RecordAck ok{5, absl::StatusCode::kOk};
  EXPECT_FALSE(DecodeRecordNack(EncodeRecordNack({&ok, 1}).payload).ok()) << "kOk is not a nack";
  EXPECT_FALSE(DecodeRecordNack(std::string(4, '\xff')).ok()) << "absurd count";
}

}  // namespace
}  // namespace msgr

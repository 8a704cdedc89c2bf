#include "osd_sim/osd_protocol.h"

#include <gtest/gtest.h>

namespace msgr::osd {
namespace {

TEST(OsdProtocolTest, WriteAckRoundTrip) {
  WriteAck a;
  a.map_epoch = 9;
  a.entries.push_back({1, absl::StatusCode::kOk, ""});
  a.entries.push_back({2, absl::StatusCode::kResourceExhausted, "store full"});
  auto d = DecodeWriteAck(Encode(a));
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->map_epoch, 9u);
  ASSERT_EQ(d->entries.size(), 2u);
  EXPECT_EQ(d->entries[1].tid, 2u);
  EXPECT_EQ(d->entries[1].code, absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(d->entries[1].error, "store full");
}

TEST(OsdProtocolTest, ReadRoundTrip) {
  auto q = DecodeReadRequest(Encode(ReadRequest{5, "obj"}));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->oid, "obj");
  ReadReply r{5, absl::StatusCode::kOk, "", std::string(100000, 'z')};
  auto p = DecodeReadReply(Encode(r));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->data, r.data);
}

TEST(OsdProtocolTest, TruncatedAndGarbageInputIsRejected) {
  Message m = Encode(ReadReply{5, absl::StatusCode::kOk, "", "data"});
  for (size_t n = 0; n < m.payload.size(); ++n) {
    Message cut{m.type, m.payload.substr(0, n)};
    EXPECT_FALSE(DecodeReadReply(cut).ok()) << "prefix " << n;
  }
  Message trailing{m.type, m.payload + "x"};
  EXPECT_FALSE(DecodeReadReply(trailing).ok());
  Message ack{kWriteAck, std::string(12, '\xff')};  // absurd entry count
  EXPECT_FALSE(DecodeWriteAck(ack).ok());
  EXPECT_FALSE(DecodeReadRequest(Encode(ReadRequest{1, ""})).ok()) << "empty oid";
  EXPECT_FALSE(DecodeReadRequest(Message{kWriteAck, ""}).ok()) << "wrong type";
}

}  // namespace
}  // namespace msgr::osd

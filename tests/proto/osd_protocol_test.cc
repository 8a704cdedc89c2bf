#include "proto/osd_protocol.h"

#include <gtest/gtest.h>

namespace msgr::osd {
namespace {

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
  EXPECT_FALSE(DecodeReadRequest(Encode(ReadRequest{1, ""})).ok()) << "empty oid";
  EXPECT_FALSE(DecodeReadRequest(Message{kReadReply, ""}).ok()) << "wrong type";
}

TEST(OsdProtocolTest, WriteFailuresAreDescribedForUsers) {
  EXPECT_NE(DescribeWriteFailure(absl::StatusCode::kResourceExhausted).find("full"),
            std::string::npos);
  EXPECT_NE(DescribeWriteFailure(absl::StatusCode::kInternal).find("INTERNAL"),
            std::string::npos);
}

}  // namespace
}  // namespace msgr::osd

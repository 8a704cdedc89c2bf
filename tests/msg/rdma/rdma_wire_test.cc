#include "msg/rdma/rdma_wire.h"

#include "gtest/gtest.h"

namespace msgr::rdma {
namespace {

TEST(RdmaWire, SendHeaderRoundTripAndRejects) {
  SendHeader h;
  h.kind = SendKind::kFragment;
  h.flags = kSendFirst | kSendDoorbell;
  h.msg_type = 9;
  h.credits = 5;
  h.frag_len = 3;
  h.seq = 77;
  h.ack_seq = 66;
  h.total_len = 10;
  uint8_t buf[kSendHeaderBytes + 3] = {};
  EncodeSendHeader(h, buf);
  SendHeader out;
  ASSERT_TRUE(DecodeSendHeader(buf, sizeof(buf), &out).ok());
  EXPECT_EQ(out.seq, 77u);
  EXPECT_EQ(out.ack_seq, 66u);
  EXPECT_EQ(out.credits, 5u);
  EXPECT_EQ(out.flags, h.flags);
  EXPECT_FALSE(DecodeSendHeader(buf, sizeof(buf) - 1, &out).ok());  // length mismatch
  buf[20] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(DecodeSendHeader(buf, sizeof(buf), &out)));
}

TEST(RdmaWire, SetupRoundTrip) {
  ServerSetup s;
  s.endpoint = "ep";
  s.ring_addr = 0x1000;
  s.ring_rkey = 5;
  s.ring_bytes = 1 << 20;
  s.ring_next_seq = 42;
  s.recv_buffers = 32;
  auto d = DecodeServerSetup(EncodeServerSetup(s));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->ring_next_seq, 42u);
  EXPECT_EQ(d->endpoint, "ep");
  EXPECT_FALSE(DecodeServerSetup(EncodeServerSetup(s) + "x").ok());
  ClientSetup c;
  c.ctrl_addr = 7;
  auto dc = DecodeClientSetup(EncodeClientSetup(c));
  ASSERT_TRUE(dc.ok());
  EXPECT_EQ(dc->ctrl_addr, 7u);
}

}  // namespace
}  // namespace msgr::rdma

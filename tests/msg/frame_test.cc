#include "msg/frame.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "msg/base/crc32c.h"
#include "msg/handshake.h"
#include "msg/ring/ring_format.h"

namespace msgr {
namespace {

TEST(FrameTest, HeaderRoundTripAndLayout) {
  FrameHeader h;
  h.type = FrameType::kMessage;
  h.flags = kFrameFlagCredit;
  h.seq = 0x0102030405060708;
  h.ack_seq = 77;
  h.payload_len = 5;
  h.msg_type = 0x1234;
  h.aux = 0xdeadbeef;
  h.payload_crc = Crc32c(0, "hello", 5);
  uint8_t buf[kFrameHeaderBytes];
  EncodeFrameHeader(h, buf);
  EXPECT_EQ(std::memcmp(buf, "MSGR", 4), 0);
  EXPECT_EQ(buf[4], kFrameVersion);
  EXPECT_EQ(buf[5], static_cast<uint8_t>(FrameType::kMessage));
  EXPECT_EQ(buf[8], 0x08);  // little-endian seq
  FrameHeader d;
  ASSERT_TRUE(DecodeFrameHeader(buf, 1 << 20, &d).ok());
  EXPECT_EQ(d.seq, h.seq);
  EXPECT_EQ(d.ack_seq, 77u);
  EXPECT_EQ(d.msg_type, 0x1234);
  EXPECT_EQ(d.aux, 0xdeadbeefu);
  EXPECT_TRUE(VerifyPayloadCrc(d, "hello", 5).ok());
  EXPECT_TRUE(absl::IsDataLoss(VerifyPayloadCrc(d, "hellO", 5)));
}

TEST(FrameTest, DecoderRejectsBadInput) {
  FrameHeader h;
  h.type = FrameType::kMessage;
  h.seq = 1;
  std::string f = EncodeFrame(h, "payload");
  // bad magic
  std::string bad = f;
  bad[0] ^= 1;
  FrameHeader d;
  absl::Status s = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(bad.data()), 1 << 20, &d);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("magic"), absl::string_view::npos);
  // header crc
  bad = f;
  bad[9] ^= 1;
  EXPECT_TRUE(absl::IsDataLoss(
      DecodeFrameHeader(reinterpret_cast<const uint8_t*>(bad.data()), 1 << 20, &d)));
  // over the limit
  s = DecodeFrameHeader(reinterpret_cast<const uint8_t*>(f.data()), 3, &d);
  EXPECT_TRUE(absl::IsInvalidArgument(s));
  EXPECT_NE(s.message().find("length"), absl::string_view::npos);
  // streaming: a huge length is refused from the header alone
  h.payload_len = 0;
  FrameDecoder dec(1024);
  std::string huge = EncodeFrame(h, std::string(2000, 'x')).substr(0, kFrameHeaderBytes);
  dec.Append(huge.data(), huge.size());
  DecodedFrame out;
  EXPECT_EQ(dec.Next(&out, &s), FrameDecoder::Result::kError);
  // payload crc
  FrameDecoder dec2(1024);
  bad = f;
  bad.back() ^= 1;
  dec2.Append(bad.data(), bad.size());
  EXPECT_EQ(dec2.Next(&out, &s), FrameDecoder::Result::kError);
  EXPECT_TRUE(absl::IsDataLoss(s));
}

TEST(FrameTest, DecoderStreamsByteByByte) {
  FrameHeader h;
  h.type = FrameType::kMessage;
  std::string stream;
  for (int i = 1; i <= 3; ++i) {
    h.seq = i;
    stream += EncodeFrame(h, std::string(i * 10, 'a' + i));
  }
  FrameDecoder dec(1024);
  std::vector<DecodedFrame> frames;
  for (char c : stream) {
    dec.Append(&c, 1);
    DecodedFrame f;
    absl::Status s;
    while (dec.Next(&f, &s) == FrameDecoder::Result::kFrame) frames.push_back(f);
  }
  ASSERT_EQ(frames.size(), 3u);
  EXPECT_EQ(frames[2].header.seq, 3u);
  EXPECT_EQ(frames[2].payload, std::string(30, 'd'));
}

TEST(FrameTest, RingRecordFrame) {
  RingPrefix p;
  p.ring_seq = 5;
  p.tid = 9;
  p.ring_offset = 128;
  p.oid_len = 3;
  p.data_len = 4;
  p.record_crc = RecordPayloadCrc("oid", 3, "data", 4);
  std::string payload(kRingPrefixBytes, '\0');
  EncodeRingPrefix(p, reinterpret_cast<uint8_t*>(payload.data()));
  payload += "oiddata";
  FrameHeader h;
  h.type = FrameType::kRingRecord;
  h.seq = 1;
  std::string f = EncodeFrame(h, payload);
  FrameDecoder dec(1024);
  dec.Append(f.data(), f.size());
  DecodedFrame out;
  absl::Status s;
  ASSERT_EQ(dec.Next(&out, &s), FrameDecoder::Result::kFrame) << s;
  RingPrefix q;
  ASSERT_TRUE(
      DecodeRingPrefix(out.header, reinterpret_cast<const uint8_t*>(out.payload.data()), &q).ok());
  EXPECT_EQ(q.tid, 9u);
  EXPECT_EQ(q.ring_offset, 128u);
  // corrupt the data: record crc catches it
  f.back() ^= 1;
  FrameDecoder dec2(1024);
  dec2.Append(f.data(), f.size());
  EXPECT_EQ(dec2.Next(&out, &s), FrameDecoder::Result::kError);
  EXPECT_TRUE(absl::IsDataLoss(s));
}

TEST(HandshakeTest, RoundTripsAndProofs) {
  Hello h;
  h.name = EntityName{EntityType::kClient, 4};
  h.features = kFeaturesSupported;
  h.auth = AuthMode::kSecret;
  h.nonce = NewNonce();
  auto d = DecodeHello(EncodeHello(h));
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->name, h.name);
  EXPECT_EQ(d->nonce, h.nonce);
  EXPECT_FALSE(DecodeHello(EncodeHello(h) + "x").ok());
  EXPECT_FALSE(DecodeHello(EncodeHello(h).substr(1)).ok());
  const Nonce nc = NewNonce(), ns = NewNonce();
  const EntityName c{EntityType::kClient, 1}, s{EntityType::kOsd, 2};
  const std::string ps = ServerProof("k", nc, ns, c, s);
  EXPECT_EQ(ps.size(), kProofBytes);
  EXPECT_TRUE(ProofEquals(ps, ServerProof("k", nc, ns, c, s)));
  EXPECT_FALSE(ProofEquals(ps, ServerProof("k2", nc, ns, c, s)));
  EXPECT_FALSE(ProofEquals(ps, ClientProof("k", nc, ns, c, s)));
  EXPECT_FALSE(ProofEquals("", ""));
  AuthReply a;
  a.cookie = 5;
  a.in_seq = 6;
  a.flags = kAuthWantRing;
  a.proof = ps;
  a.ring_bytes = 4u << 20;
  auto ad = DecodeAuth(EncodeAuth(a));
  ASSERT_TRUE(ad.ok());
  EXPECT_EQ(ad->proof, ps);
  EXPECT_EQ(ad->in_seq, 6u);
  EXPECT_EQ(ad->ring_bytes, 4u << 20);
  EXPECT_FALSE(DecodeAuth(EncodeAuth(a).substr(0, EncodeAuth(a).size() - 8)).ok())
      << "an AUTH without its ring size is refused";
  EXPECT_EQ(ad->instance, 0u);
  EXPECT_EQ(ad->flags & kAuthInstance, 0) << "no instance, no flag";
  a.instance = 0x1234567890abcdefull;  // the client messenger's incarnation, for fencing
  ad = DecodeAuth(EncodeAuth(a));
  ASSERT_TRUE(ad.ok());
  EXPECT_EQ(ad->instance, 0x1234567890abcdefull);
  EXPECT_NE(ad->flags & kAuthInstance, 0);
  EXPECT_EQ(ad->ring_bytes, 4u << 20);
  EXPECT_FALSE(DecodeAuth(EncodeAuth(a).substr(0, EncodeAuth(a).size() - 8)).ok())
      << "an AUTH whose flag announces an instance that is not there is refused";
  std::string zero = EncodeAuth(a);
  std::memset(&zero[zero.size() - 8], 0, 8);
  EXPECT_FALSE(DecodeAuth(zero).ok()) << "instance 0 is never sent";
  Ready r;
  r.ring_bytes = 1 << 20;
  auto rd = DecodeReady(EncodeReady(r));
  ASSERT_TRUE(rd.ok());
  EXPECT_EQ(rd->ring_bytes, 1u << 20);
}

}  // namespace
}  // namespace msgr

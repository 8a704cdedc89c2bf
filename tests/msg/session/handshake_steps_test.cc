// The handshake state machines driven against each other with no socket: frames go
// from one object's output straight into the other's input.
#include "msg/session/handshake_steps.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace msgr::session {
namespace {

const EntityName kClientName{EntityType::kClient, 7};
const EntityName kOsdName{EntityType::kOsd, 2};

AuthConfig Key(const std::string& k) { return AuthConfig{AuthConfig::Mode::kSecret, k}; }

// A whole frame split back into header and payload, as a transport's reader returns it.
std::pair<FrameHeader, std::string> Split(const std::string& frame) {
  FrameHeader h;
  EXPECT_GE(frame.size(), kFrameHeaderBytes);
  const absl::Status s =
      DecodeFrameHeader(reinterpret_cast<const uint8_t*>(frame.data()), 1 << 20, &h);
  EXPECT_TRUE(s.ok()) << s;
  return {h, frame.substr(kFrameHeaderBytes)};
}

AuthReply Resume(uint64_t cookie, uint8_t flags = kAuthLossless) {
  AuthReply a;
  a.cookie = cookie;
  a.in_seq = 41;
  a.flags = flags;
  return a;
}

std::string ReadyFrame(uint64_t ring_bytes) {
  Ready r;
  r.ring_bytes = ring_bytes;
  r.in_seq = 9;
  FrameHeader h;
  h.type = FrameType::kReady;
  return EncodeFrame(h, EncodeReady(r));
}

struct Pair {
  ClientHandshake client;
  ServerHandshake server;
  Pair(AuthConfig ca, AuthConfig sa)
      : client(kClientName, std::move(ca), "10.0.0.2:6800"),
        server(kOsdName, std::move(sa), "10.0.0.1:40000") {}
};

void ExpectCompletes(Pair& p) {
  auto [hh, hp] = Split(p.client.HelloFrame());
  auto challenge = p.server.OnHello(hh, hp);
  ASSERT_TRUE(challenge.ok()) << challenge.status();
  EXPECT_EQ(p.server.who(), "client.7 at 10.0.0.1:40000");
  auto [ch, cp] = Split(*challenge);
  auto auth = p.client.OnChallenge(ch, cp, Resume(0xfeed));
  ASSERT_TRUE(auth.ok()) << auth.status();
  EXPECT_EQ(p.client.peer(), kOsdName);
  EXPECT_EQ(p.client.who(), "osd.2 at 10.0.0.2:6800");
  auto [ah, ap] = Split(*auth);
  auto reply = p.server.OnAuth(ah, ap);
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->cookie, 0xfeedu);  // the resume state crossed intact
  EXPECT_EQ(reply->in_seq, 41u);
  EXPECT_EQ(reply->flags, kAuthLossless);
  EXPECT_EQ(p.server.hello().name, kClientName);
  auto [rh, rp] = Split(ReadyFrame(64 << 10));
  auto ready = p.client.OnReady(rh, rp, /*want_ring=*/true);
  ASSERT_TRUE(ready.ok()) << ready.status();
  EXPECT_EQ(ready->ring_bytes, 64u << 10);
  EXPECT_EQ(ready->in_seq, 9u);
}

TEST(HandshakeStepsTest, CompletesWithTheSameKeyAndWithoutKeys) {
  Pair keyed(Key("k1"), Key("k1"));
  ExpectCompletes(keyed);
  Pair open(AuthConfig::None(), AuthConfig::None());
  ExpectCompletes(open);
}

TEST(HandshakeStepsTest, ClientRefusesAServerWithAnotherKey) {
  Pair p(Key("client-key"), Key("server-key"));
  auto [hh, hp] = Split(p.client.HelloFrame());
  auto challenge = p.server.OnHello(hh, hp);
  ASSERT_TRUE(challenge.ok());
  auto [ch, cp] = Split(*challenge);
  auto auth = p.client.OnChallenge(ch, cp, Resume(1));
  ASSERT_FALSE(auth.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(auth.status())) << auth.status();
  EXPECT_NE(auth.status().message().find("osd.2 at 10.0.0.2:6800 failed to prove"),
            std::string::npos)
      << auth.status();
  EXPECT_EQ(p.client.last_error().blame, Blame::kAuth);
  ASSERT_TRUE(p.client.last_error().send_close);
  // The client's CLOSE reaches the server in place of AUTH.
  auto [xh, xp] = Split(CloseFrame(p.client.last_error()));
  EXPECT_EQ(xp, "authentication failed") << "a refusal does not say which check failed";
  auto reply = p.server.OnAuth(xh, xp);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(p.server.last_error().blame, Blame::kAuth);
  EXPECT_FALSE(p.server.last_error().send_close);
}

TEST(HandshakeStepsTest, ServerRefusesAClientWithoutItsKeyAndTheClientSaysWhy) {
  Pair p(AuthConfig::None(), Key("k"));
  auto [hh, hp] = Split(p.client.HelloFrame());
  auto challenge = p.server.OnHello(hh, hp);
  ASSERT_FALSE(challenge.ok());
  EXPECT_NE(challenge.status().message().find("no cluster key"), std::string::npos);
  ASSERT_TRUE(p.server.last_error().send_close);
  auto [xh, xp] = Split(CloseFrame(p.server.last_error()));
  auto auth = p.client.OnChallenge(xh, xp, Resume(1));
  ASSERT_FALSE(auth.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(auth.status())) << auth.status();
  EXPECT_EQ(std::string(auth.status().message()),
            "peer at 10.0.0.2:6800 refused the connection: authentication failed");
  EXPECT_EQ(p.client.last_error().blame, Blame::kAuth);
}

TEST(HandshakeStepsTest, ServerRefusesAForgedClientProof) {
  Pair p(Key("k"), Key("k"));
  auto [hh, hp] = Split(p.client.HelloFrame());
  auto challenge = p.server.OnHello(hh, hp);
  ASSERT_TRUE(challenge.ok());
  AuthReply forged = Resume(5);
  forged.proof = std::string(kProofBytes, 'x');
  FrameHeader ah;
  ah.type = FrameType::kAuth;
  auto [h, pl] = Split(EncodeFrame(ah, EncodeAuth(forged)));
  auto reply = p.server.OnAuth(h, pl);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(std::string(reply.status().message()), "peer failed to prove it holds the cluster key");
  EXPECT_EQ(p.server.last_error().blame, Blame::kAuth);
  EXPECT_TRUE(p.server.last_error().send_close);
}

TEST(HandshakeStepsTest, UnexpectedOrMalformedFramesAreProtocolErrors) {
  Pair p(AuthConfig::None(), AuthConfig::None());
  FrameHeader wrong;
  wrong.type = FrameType::kAuth;
  auto r = p.server.OnHello(wrong, "");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(std::string(r.status().message()), "expected HELLO, got AUTH frame");
  EXPECT_EQ(p.server.last_error().blame, Blame::kProtocol);
  EXPECT_EQ(p.server.who(), "peer at 10.0.0.1:40000") << "no HELLO named the peer";
  FrameHeader hello;
  hello.type = FrameType::kHello;
  EXPECT_FALSE(p.server.OnHello(hello, "short").ok());
  EXPECT_TRUE(absl::IsInvalidArgument(p.server.last_error().why));
  // A client gets READY's place taken by something else.
  FrameHeader msg;
  msg.type = FrameType::kKeepalive;
  auto ready = p.client.OnReady(msg, "", false);
  ASSERT_FALSE(ready.ok());
  EXPECT_NE(ready.status().message().find("where READY was expected"), std::string::npos);
}

TEST(HandshakeStepsTest, AZeroCookieAndAnUnusableRingAreRefused) {
  Pair p(AuthConfig::None(), AuthConfig::None());
  auto [hh, hp] = Split(p.client.HelloFrame());
  auto challenge = p.server.OnHello(hh, hp);
  ASSERT_TRUE(challenge.ok());
  auto [ch, cp] = Split(*challenge);
  auto auth = p.client.OnChallenge(ch, cp, Resume(0));
  ASSERT_TRUE(auth.ok());
  auto [ah, ap] = Split(*auth);
  auto reply = p.server.OnAuth(ah, ap);
  ASSERT_FALSE(reply.ok());
  EXPECT_EQ(std::string(reply.status().message()), "AUTH with a zero session cookie");
  auto [rh, rp] = Split(ReadyFrame(12345));  // not a valid ring size
  auto ready = p.client.OnReady(rh, rp, /*want_ring=*/true);
  ASSERT_FALSE(ready.ok());
  EXPECT_NE(ready.status().message().find("invalid ring of 12345 bytes"), std::string::npos);
  auto [nh, np] = Split(ReadyFrame(0));
  EXPECT_TRUE(p.client.OnReady(nh, np, /*want_ring=*/false).ok()) << "no ring asked, none given";
}

TEST(HandshakeStepsTest, APeerWithoutTheNeededFeaturesIsToldBothSets) {
  Pair p(AuthConfig::None(), AuthConfig::None());
  Hello old;
  old.name = kClientName;
  old.features = kFeatureRing;  // no resume
  old.nonce = NewNonce();
  FrameHeader h;
  h.type = FrameType::kHello;
  auto [hh, hp] = Split(EncodeFrame(h, EncodeHello(old)));
  auto r = p.server.OnHello(hh, hp);
  ASSERT_FALSE(r.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(r.status())) << r.status();
  EXPECT_NE(r.status().message().find("offers msgr features 0x1, this messenger needs 0x3"),
            std::string::npos)
      << r.status();
  ASSERT_TRUE(p.server.last_error().send_close);
  // The client learns the same reason, with its code.
  auto [xh, xp] = Split(CloseFrame(p.server.last_error()));
  const absl::Status why = RefusalFromClose(xh, xp, "osd.2 at x");
  EXPECT_TRUE(absl::IsFailedPrecondition(why)) << why;
  EXPECT_NE(why.message().find("needs 0x3"), std::string::npos) << why;
}

TEST(HandshakeStepsTest, FailuresAreCountedOnceByBlame) {
  LiveMessengerCounters c;
  CountFailure({absl::UnauthenticatedError("x"), Blame::kAuth, true}, &c);
  CountFailure({absl::DataLossError("crc"), Blame::kProtocol, false}, &c);
  CountFailure({absl::InvalidArgumentError("bad"), Blame::kProtocol, false}, &c);
  CountFailure({absl::UnavailableError("eof"), Blame::kNone, false}, &c);
  const MessengerCounters s = c.Snapshot();
  EXPECT_EQ(s.auth_failures, 1u);
  EXPECT_EQ(s.crc_errors, 1u);
  EXPECT_EQ(s.protocol_errors, 1u);
  ServerHandshake hs(kOsdName, AuthConfig::None(), "a:1");
  EXPECT_TRUE(absl::IsUnavailable(hs.OnReadError(absl::UnavailableError("peer closed"))));
  EXPECT_EQ(hs.last_error().blame, Blame::kNone) << "EOF between frames is a plain close";
  (void)hs.OnReadError(absl::DataLossError("header crc mismatch"));
  EXPECT_EQ(hs.last_error().blame, Blame::kProtocol);
  (void)hs.OnTimeout(absl::Milliseconds(400));
  EXPECT_EQ(std::string(hs.last_error().why.message()), "handshake did not finish within 400ms");
}

}  // namespace
}  // namespace msgr::session

// The handshake state machines driven against each other with no socket: frames go
// from one object's output straight into the other's input.
#include "msg/session/handshake_steps.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "tests/msg/test_pki.h"

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
  EXPECT_NE(r.status().message().find("offers msgr features 0x1, this messenger needs 0xb"),
            std::string::npos)
      << r.status();
  ASSERT_TRUE(p.server.last_error().send_close);
  // The client learns the same reason, with its code.
  auto [xh, xp] = Split(CloseFrame(p.server.last_error()));
  const absl::Status why = RefusalFromClose(xh, xp, "osd.2 at x");
  EXPECT_TRUE(absl::IsFailedPrecondition(why)) << why;
  EXPECT_NE(why.message().find("needs 0xb"), std::string::npos) << why;
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

// ------------------------------------------------------------------ entity certificates

// The frames of one attempt up to the server's verdict on AUTH.
struct Attempt {
  absl::StatusOr<std::string> challenge;
  absl::StatusOr<std::string> auth = absl::UnknownError("not reached");
  absl::StatusOr<AuthReply> reply = absl::UnknownError("not reached");
};

// `tamper`, if set, changes the client's AUTH on its way to the server (a forger).
Attempt RunAttempt(ClientHandshake& client, ServerHandshake& server,
                   const std::function<void(AuthReply*)>& tamper = nullptr) {
  Attempt a;
  auto [hh, hp] = Split(client.HelloFrame());
  a.challenge = server.OnHello(hh, hp);
  if (!a.challenge.ok()) return a;
  auto [ch, cp] = Split(*a.challenge);
  a.auth = client.OnChallenge(ch, cp, Resume(0xbeef));
  if (!a.auth.ok()) return a;
  auto [ah, ap] = Split(*a.auth);
  if (tamper) {
    auto decoded = DecodeAuth(ap);
    EXPECT_TRUE(decoded.ok()) << decoded.status();
    tamper(&*decoded);
    std::tie(ah, ap) = Split(EncodeFrame(ah, EncodeAuth(*decoded)));
  }
  a.reply = server.OnAuth(ah, ap);
  return a;
}

TEST(HandshakeStepsTest, EntityCertificatesOnBothSidesComplete) {
  testing::TestPki pki;
  Pair p(pki.Auth("k", "client.bench"), pki.Auth("k", "osd.2"));
  ExpectCompletes(p);
  // An OSD proves itself to another OSD under its own name.
  ClientHandshake osd1({EntityType::kOsd, 1}, pki.Auth("k", "osd.1"), "10.0.0.2:6800");
  ServerHandshake osd2(kOsdName, pki.Auth("k", "osd.2"), "10.0.0.1:40001");
  Attempt a = RunAttempt(osd1, osd2);
  ASSERT_TRUE(a.reply.ok()) << a.reply.status();
  EXPECT_EQ(osd2.hello().name, (EntityName{EntityType::kOsd, 1}));
}

TEST(HandshakeStepsTest, ACertificateOfAnotherEntityCannotClaimAnOsd) {
  testing::TestPki pki;
  // A keyring holder with a client certificate (or another OSD's) claims to be osd.5.
  for (const char* cert : {"client.bench", "osd.3"}) {
    ClientHandshake impostor({EntityType::kOsd, 5}, pki.Auth("k", cert), "10.0.0.2:6800");
    ServerHandshake server(kOsdName, pki.Auth("k", "osd.2"), "10.0.0.1:40000");
    Attempt a = RunAttempt(impostor, server);
    ASSERT_TRUE(a.auth.ok()) << a.auth.status();
    ASSERT_FALSE(a.reply.ok()) << cert;
    EXPECT_TRUE(absl::IsPermissionDenied(a.reply.status())) << a.reply.status();
    EXPECT_EQ(std::string(a.reply.status().message()),
              absl::StrCat("a peer with the certificate of '", cert, "' claimed to be osd.5"));
    EXPECT_EQ(server.last_error().blame, Blame::kAuth);
    ASSERT_TRUE(server.last_error().send_close);
    // The impostor is told why (a refusal that is not a proof failure keeps its text).
    auto [xh, xp] = Split(CloseFrame(server.last_error()));
    auto ready = impostor.OnReady(xh, xp, false);
    ASSERT_FALSE(ready.ok());
    EXPECT_NE(ready.status().message().find("claimed to be osd.5"), std::string::npos)
        << ready.status();
  }
}

TEST(HandshakeStepsTest, ClientRefusesAServerWhoseCertificateNamesAnotherOsd) {
  testing::TestPki pki;
  ClientHandshake client(kClientName, pki.Auth("k", "client.admin"), "10.0.0.2:6800");
  ServerHandshake impostor(kOsdName, pki.Auth("k", "osd.4"), "10.0.0.1:40000");  // says osd.2
  Attempt a = RunAttempt(client, impostor);
  ASSERT_TRUE(a.challenge.ok());
  ASSERT_FALSE(a.auth.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(a.auth.status())) << a.auth.status();
  EXPECT_EQ(std::string(a.auth.status().message()),
            "a peer with the certificate of 'osd.4' claimed to be osd.2");
  EXPECT_EQ(client.last_error().blame, Blame::kAuth);
}

TEST(HandshakeStepsTest, ACertificateFromAnotherClustersCaIsRefused) {
  testing::TestPki ours, theirs;
  Pair p(theirs.Auth("k", "client.bench"), ours.Auth("k", "osd.2"));
  Attempt a = RunAttempt(p.client, p.server);
  // The client cannot verify the server under its own (other) CA: it refuses first.
  ASSERT_FALSE(a.auth.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(a.auth.status())) << a.auth.status();
  EXPECT_NE(a.auth.status().message().find("the certificate of osd.2 is not valid for this "
                                           "cluster"),
            std::string::npos)
      << a.auth.status();
  // And a server never accepts a client certificate of another CA: a certificate of the
  // same name from the other CA swapped into the AUTH.
  Pair q(ours.Auth("k", "client.bench"), ours.Auth("k", "osd.2"));
  const std::string foreign = theirs.Credentials("client.bench")->cert_der();
  Attempt b = RunAttempt(q.client, q.server, [&](AuthReply* a) { a->entity_cert = foreign; });
  ASSERT_TRUE(b.auth.ok());
  ASSERT_FALSE(b.reply.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(b.reply.status())) << b.reply.status();
  EXPECT_EQ(q.server.last_error().blame, Blame::kAuth);
}

TEST(HandshakeStepsTest, ASignatureFromAnotherHandshakeIsRefused) {
  testing::TestPki pki;
  // Record a genuine AUTH of osd.1, then replay its certificate and signature in a new
  // attempt (fresh nonces): the signature covers the old nonces and fails.
  ClientHandshake first({EntityType::kOsd, 1}, pki.Auth("k", "osd.1"), "10.0.0.2:6800");
  ServerHandshake server1(kOsdName, pki.Auth("k", "osd.2"), "10.0.0.1:40000");
  Attempt a = RunAttempt(first, server1);
  ASSERT_TRUE(a.reply.ok()) << a.reply.status();
  const std::string old_cert = a.reply->entity_cert, old_sig = a.reply->entity_sig;
  ASSERT_FALSE(old_sig.empty());

  ClientHandshake again({EntityType::kOsd, 1}, pki.Auth("k", "client.x"), "10.0.0.2:6800");
  ServerHandshake server2(kOsdName, pki.Auth("k", "osd.2"), "10.0.0.1:40000");
  Attempt b = RunAttempt(again, server2, [&](AuthReply* replayed) {
    replayed->entity_cert = old_cert;
    replayed->entity_sig = old_sig;
  });
  ASSERT_TRUE(b.auth.ok());
  const auto& reply = b.reply;
  ASSERT_FALSE(reply.ok());
  EXPECT_TRUE(absl::IsUnauthenticated(reply.status())) << reply.status();
  EXPECT_EQ(std::string(reply.status().message()),
            "osd.1 (certificate 'osd.1') failed to prove it holds that certificate's key");
}

TEST(HandshakeStepsTest, AClientThatExpectsOneOsdRefusesAnother) {
  testing::TestPki pki;
  // The map says osd.3 is at this address; osd.2 answers (with its own valid certificate).
  ClientHandshake client(kClientName, pki.Auth("k", "client.bench"), "10.0.0.2:6800",
                         WireMode::kCrc, EntityName{EntityType::kOsd, 3});
  ServerHandshake server(kOsdName, pki.Auth("k", "osd.2"), "10.0.0.1:40000");
  Attempt a = RunAttempt(client, server);
  ASSERT_TRUE(a.challenge.ok());
  ASSERT_FALSE(a.auth.ok());
  EXPECT_TRUE(absl::IsPermissionDenied(a.auth.status())) << a.auth.status();
  EXPECT_EQ(std::string(a.auth.status().message()),
            "10.0.0.2:6800 answered as osd.2, not osd.3: the map is stale or another process "
            "took the address");
  EXPECT_EQ(client.last_error().blame, Blame::kAuth);
  // The expected one completes, with or without certificates.
  ClientHandshake right(kClientName, Key("k"), "10.0.0.2:6800", WireMode::kCrc, kOsdName);
  ServerHandshake osd2(kOsdName, Key("k"), "10.0.0.1:40001");
  EXPECT_TRUE(RunAttempt(right, osd2).reply.ok());
}

TEST(HandshakeStepsTest, BothEndsProveTheirEntityOrNeitherAndTheRefusalSaysWhich) {
  testing::TestPki pki;
  {
    // A client with only the keyring, a server with certificates.
    Pair p(Key("k"), pki.Auth("k", "osd.2"));
    Attempt a = RunAttempt(p.client, p.server);
    ASSERT_FALSE(a.challenge.ok());
    EXPECT_TRUE(absl::IsFailedPrecondition(a.challenge.status())) << a.challenge.status();
    EXPECT_EQ(std::string(a.challenge.status().message()),
              "osd.2 proves its entity with a certificate, client.7 has none: run both with "
              "the certificates of one cluster's PKI (--cluster-dir DIR, its pki/) or both "
              "without");
    EXPECT_EQ(p.server.last_error().blame, Blame::kAuth);
    ASSERT_TRUE(p.server.last_error().send_close);
    auto [xh, xp] = Split(CloseFrame(p.server.last_error()));
    auto auth = p.client.OnChallenge(xh, xp, Resume(1));
    ASSERT_FALSE(auth.ok());
    EXPECT_NE(auth.status().message().find("client.7 has none"), std::string::npos)
        << auth.status();
  }
  {
    // A client with a certificate, a server without: the client refuses at CHALLENGE.
    Pair p(pki.Auth("k", "client.bench"), Key("k"));
    Attempt a = RunAttempt(p.client, p.server);
    ASSERT_FALSE(a.challenge.ok());
    EXPECT_NE(a.challenge.status().message().find(
                  "client.7 proves its entity with a certificate, osd.2 has none"),
              std::string::npos)
        << a.challenge.status();
  }
}

TEST(HandshakeStepsTest, EntityProofCodecsRoundTripAndRejectDamage) {
  Challenge c;
  c.name = kOsdName;
  c.features = kFeaturesSupported | kFeatureEntityProof;
  c.auth = AuthMode::kSecret;
  c.proof = std::string(kProofBytes, 'p');
  c.entity_cert = "cert-bytes";
  c.entity_sig = "sig";
  auto back = DecodeChallenge(EncodeChallenge(c));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->entity_cert, "cert-bytes");
  EXPECT_EQ(back->entity_sig, "sig");
  EXPECT_EQ(back->mode, WireMode::kCrc);
  std::string enc = EncodeChallenge(c);
  EXPECT_FALSE(DecodeChallenge(enc.substr(0, enc.size() - 1)).ok());
  EXPECT_FALSE(DecodeChallenge(enc + "x").ok());

  AuthReply a = Resume(9);
  a.proof = std::string(kProofBytes, 'q');
  a.entity_cert = "c";
  a.entity_sig = "s";
  auto ab = DecodeAuth(EncodeAuth(a));
  ASSERT_TRUE(ab.ok()) << ab.status();
  EXPECT_EQ(ab->entity_cert, "c");
  EXPECT_EQ(ab->entity_sig, "s");
  std::string aenc = EncodeAuth(a);
  EXPECT_FALSE(DecodeAuth(aenc.substr(0, aenc.size() - 1)).ok());
  a.entity_cert.clear();
  a.entity_sig.clear();
  auto plain = DecodeAuth(EncodeAuth(a));
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->entity_cert.empty());
}

}  // namespace
}  // namespace msgr::session

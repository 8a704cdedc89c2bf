// Secure mode without sockets: the key schedule (fresh keys per session and direction,
// both ends agree) and the AES-GCM stream (round trip, tampering, replay, reordering),
// driven through the real handshake state machines.
#include "msg/session/secure_mode.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "msg/session/handshake_steps.h"

namespace msgr::session {
namespace {

const EntityName kClientName{EntityType::kClient, 7};
const EntityName kOsdName{EntityType::kOsd, 2};
const AuthConfig kKey{AuthConfig::Mode::kSecret, "cluster-key"};

std::pair<FrameHeader, std::string> Split(const std::string& frame) {
  FrameHeader h;
  EXPECT_TRUE(DecodeFrameHeader(reinterpret_cast<const uint8_t*>(frame.data()), 1 << 20, &h).ok());
  return {h, frame.substr(kFrameHeaderBytes)};
}

struct HandshakeRun {
  ClientHandshake client;
  ServerHandshake server;
  absl::Status status;
  HandshakeRun(WireMode cm, WireMode sm)
      : client(kClientName, kKey, "10.0.0.2:6800", cm),
        server(kOsdName, kKey, "10.0.0.1:40000", sm) {
    auto [hh, hp] = Split(client.HelloFrame());
    auto challenge = server.OnHello(hh, hp);
    if (!challenge.ok()) {
      status = challenge.status();
      return;
    }
    auto [ch, cp] = Split(*challenge);
    AuthReply resume;
    resume.cookie = 99;
    auto auth = client.OnChallenge(ch, cp, resume);
    if (!auth.ok()) {
      status = auth.status();
      return;
    }
    auto [ah, ap] = Split(*auth);
    status = server.OnAuth(ah, ap).status();
  }
};

TEST(SecureModeTest, BothEndsDeriveTheSameKeysAndEachSessionAndDirectionGetsItsOwn) {
  HandshakeRun a(WireMode::kSecureAes128Gcm, WireMode::kSecureAes128Gcm);
  ASSERT_TRUE(a.status.ok()) << a.status;
  ASSERT_TRUE(a.client.secure_keys().has_value());
  ASSERT_TRUE(a.server.secure_keys().has_value());
  const SecureKeys& ck = *a.client.secure_keys();
  const SecureKeys& sk = *a.server.secure_keys();
  EXPECT_EQ(ck.client_to_server.key, sk.client_to_server.key);
  EXPECT_EQ(ck.server_to_client.key, sk.server_to_client.key);
  EXPECT_EQ(ck.client_to_server.iv_salt, sk.client_to_server.iv_salt);
  EXPECT_EQ(ck.client_to_server.key.size(), 16u);
  EXPECT_NE(ck.client_to_server.key, ck.server_to_client.key) << "per direction";
  EXPECT_NE(ck.client_to_server.iv_salt, ck.server_to_client.iv_salt);

  // Same key, names and resume state; new nonces: new keys (a reconnect re-keys).
  HandshakeRun b(WireMode::kSecureAes128Gcm, WireMode::kSecureAes128Gcm);
  ASSERT_TRUE(b.status.ok()) << b.status;
  EXPECT_NE(b.client.secure_keys()->client_to_server.key, ck.client_to_server.key);
  EXPECT_NE(b.client.secure_keys()->server_to_client.key, ck.server_to_client.key);

  HandshakeRun c(WireMode::kSecureAes256Gcm, WireMode::kSecureAes256Gcm);
  ASSERT_TRUE(c.status.ok()) << c.status;
  EXPECT_EQ(c.client.secure_keys()->client_to_server.key.size(), 32u);
  EXPECT_EQ(c.client.secure_keys()->client_to_server.key,
            c.server.secure_keys()->client_to_server.key);

  HandshakeRun crc(WireMode::kCrc, WireMode::kCrc);
  ASSERT_TRUE(crc.status.ok()) << crc.status;
  EXPECT_FALSE(crc.client.secure_keys().has_value());
  EXPECT_FALSE(crc.server.secure_keys().has_value());
}

TEST(SecureModeTest, KeysDependOnEveryInput) {
  Nonce n1{}, n2{};
  n2[0] = 1;
  auto base = DeriveSecureKeys("k", WireMode::kSecureAes128Gcm, n1, n1, "t");
  ASSERT_TRUE(base.ok());
  for (auto other : {DeriveSecureKeys("K", WireMode::kSecureAes128Gcm, n1, n1, "t"),
                     DeriveSecureKeys("k", WireMode::kSecureAes128Gcm, n2, n1, "t"),
                     DeriveSecureKeys("k", WireMode::kSecureAes128Gcm, n1, n2, "t"),
                     DeriveSecureKeys("k", WireMode::kSecureAes128Gcm, n1, n1, "T")}) {
    ASSERT_TRUE(other.ok());
    EXPECT_NE(other->client_to_server.key, base->client_to_server.key);
    EXPECT_NE(other->server_to_client.key, base->server_to_client.key);
  }
  auto wide = DeriveSecureKeys("k", WireMode::kSecureAes256Gcm, n1, n1, "t");
  ASSERT_TRUE(wide.ok());
  EXPECT_NE(wide->client_to_server.key.substr(0, 16), base->client_to_server.key);
}

TEST(SecureModeTest, ModeMismatchIsRefusedNamingBothModes) {
  HandshakeRun a(WireMode::kCrc, WireMode::kSecureAes128Gcm);
  ASSERT_TRUE(absl::IsFailedPrecondition(a.status)) << a.status;
  EXPECT_EQ(std::string(a.status.message()),
            "client.7 wants ms_mode crc, osd.2 runs ms_mode secure (aes-128-gcm): use the same "
            "--ms-mode (and cipher) on both sides");
  EXPECT_TRUE(a.server.last_error().send_close);
  // The client learns it from the server's CLOSE.
  auto [xh, xp] = Split(CloseFrame(a.server.last_error()));
  auto auth = a.client.OnChallenge(xh, xp, AuthReply{});
  ASSERT_TRUE(absl::IsFailedPrecondition(auth.status())) << auth.status();
  EXPECT_NE(auth.status().message().find("client.7 wants ms_mode crc, osd.2 runs ms_mode secure"),
            std::string::npos)
      << auth.status();

  HandshakeRun b(WireMode::kSecureAes128Gcm, WireMode::kCrc);
  ASSERT_TRUE(absl::IsFailedPrecondition(b.status)) << b.status;
  EXPECT_NE(b.status.message().find("client.7 wants ms_mode secure (aes-128-gcm), osd.2 runs "
                                    "ms_mode crc"),
            std::string::npos)
      << b.status;
  HandshakeRun c(WireMode::kSecureAes128Gcm, WireMode::kSecureAes256Gcm);
  EXPECT_TRUE(absl::IsFailedPrecondition(c.status)) << c.status;
}

struct Streams {
  std::unique_ptr<SecureStream> tx, rx;
  Streams() {
    Nonce a{}, b{};
    a[3] = 9;
    auto k = DeriveSecureKeys("k", WireMode::kSecureAes128Gcm, a, b, "transcript");
    EXPECT_TRUE(k.ok());
    tx = *SecureStream::Create(WireMode::kSecureAes128Gcm, k->client_to_server);
    rx = *SecureStream::Create(WireMode::kSecureAes128Gcm, k->client_to_server);
  }
  std::string Seal(std::string_view a, std::string_view b = {}) {
    std::string out(a.size() + b.size() + kSecureTagBytes, '\0');
    tx->Seal(a, b, reinterpret_cast<uint8_t*>(out.data()));
    return out;
  }
  bool Open(std::string* sealed) {
    const size_t len = sealed->size() - kSecureTagBytes;
    auto* p = reinterpret_cast<uint8_t*>(sealed->data());
    if (!rx->Open(p, len, p + len)) return false;
    sealed->resize(len);
    return true;
  }
};

TEST(SecureModeTest, ManyPiecesRoundTripWithAFreshNonceEach) {
  Streams s;
  std::vector<std::string> sealed;
  for (int i = 0; i < 1000; ++i) {
    const std::string a(i % 97 + 1, static_cast<char>('a' + i % 26));
    sealed.push_back(s.Seal(a, std::to_string(i)));
    EXPECT_NE(sealed.back().substr(0, a.size()), a) << "encrypted";
  }
  EXPECT_EQ(s.tx->counter(), 1000u);
  // The same plaintext twice gives two different ciphertexts (the nonce moved on).
  EXPECT_NE(s.Seal("same"), s.Seal("same"));
  for (int i = 0; i < 1000; ++i) {
    ASSERT_TRUE(s.Open(&sealed[i])) << i;
    EXPECT_EQ(sealed[i], std::string(i % 97 + 1, static_cast<char>('a' + i % 26)) +
                             std::to_string(i));
  }
}

TEST(SecureModeTest, TamperedReplayedReorderedOrTruncatedPiecesFail) {
  {
    Streams s;
    std::string p = s.Seal("hello world");
    p[3] ^= 0x01;
    EXPECT_FALSE(s.Open(&p)) << "flipped ciphertext bit";
  }
  {
    Streams s;
    std::string p = s.Seal("hello world");
    p.back() ^= 0x80;
    EXPECT_FALSE(s.Open(&p)) << "flipped tag bit";
  }
  {
    Streams s;
    std::string p1 = s.Seal("one"), copy = p1;
    ASSERT_TRUE(s.Open(&p1));
    EXPECT_FALSE(s.Open(&copy)) << "replayed";
  }
  {
    Streams s;
    std::string p1 = s.Seal("one"), p2 = s.Seal("two");
    EXPECT_FALSE(s.Open(&p2)) << "reordered";
  }
  {
    Streams s;
    std::string p = s.Seal("hello world");
    p.erase(2, 1);  // one byte short: the tag is read from the wrong place
    EXPECT_FALSE(s.Open(&p)) << "truncated";
  }
}

}  // namespace
}  // namespace msgr::session

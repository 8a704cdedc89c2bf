// The msgr session handshake: payload encodings of HELLO / CHALLENGE / AUTH / READY and
// the HMAC-SHA256 proofs (msg/PROTOCOL.md, "Handshake"). Backend-neutral: any stream
// transport runs the same exchange.
//
//   client                                   server
//   HELLO      name, features, mode, Nc  -->
//                                        <-- CHALLENGE  name, features, mode, Ns,
//                                                       Ps = HMAC(K, "server" Nc Ns names)
//   (checks Ps)
//   AUTH       Pc = HMAC(K, "client" Ns Nc names), cookie, resume state  -->
//                                            (checks Pc; finds or creates the session)
//                                        <-- READY      new/resumed, resume state, ring
//
// Each side proves it holds the cluster secret K over a fresh nonce chosen by the other
// side, so neither proof can be replayed. With entity certificates (kFeatureEntityProof,
// msg/entity_credentials.h) CHALLENGE and AUTH also carry the sender's certificate and
// its signature of EntityProofInput: the peer's entity is proven, not only its cluster
// membership. Pure functions: thread-safe.
#ifndef MSGR_MSG_HANDSHAKE_H_
#define MSGR_MSG_HANDSHAKE_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "msg/messenger.h"

namespace msgr {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  // HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceBytes>;

// Feature bits exchanged in HELLO / CHALLENGE.
inline constexpr uint64_t kFeatureRing = 1ull << 0;    // RING_RECORD frames and credits
inline constexpr uint64_t kFeatureResume = 1ull << 1;  // lossless session resume
// rdma: doorbells and credit wake-up requests may come as zero-length WRITE_WITH_IMMs
// (msg/PROTOCOL.md "Doorbells"); an OSD without it would fault the session on the first.
inline constexpr uint64_t kFeatureImmWakeups = 1ull << 3;
inline constexpr uint64_t kFeaturesSupported = kFeatureRing | kFeatureResume | kFeatureImmWakeups;
// Offered (in HELLO / CHALLENGE) by a side that proves its entity with a certificate and
// requires the peer to: both ends of a cluster run with certificates or both without.
inline constexpr uint64_t kFeatureEntityProof = 1ull << 2;
// A certificate and signature ride in CHALLENGE / AUTH, whose frames are bounded by
// kMaxControlPayload (4096): EntityCredentials refuses a larger certificate at load time.
inline constexpr size_t kMaxEntityCertBytes = 3072;  // DER
inline constexpr size_t kMaxEntitySigBytes = 512;

enum class AuthMode : uint8_t { kNone = 0, kSecret = 1 };

// How frames after the handshake are protected (MessengerOptions::ms_mode and
// ms_secure_cipher; msg/PROTOCOL.md, "Secure mode"). Both ends must run the same one.
enum class WireMode : uint8_t { kCrc = 0, kSecureAes128Gcm = 1, kSecureAes256Gcm = 2 };
// "crc", "secure (aes-128-gcm)", "secure (aes-256-gcm)": for error messages.
const char* WireModeName(WireMode m);
// The options' mode. REQUIRES: options validated by Messenger::Create.
WireMode WireModeOf(const MessengerOptions& options);

struct Hello {
  EntityName name;
  uint64_t features = 0;
  AuthMode auth = AuthMode::kNone;
  Nonce nonce{};
  // Encoded as a trailing byte only when not kCrc, so crc mode's HELLO is unchanged (an
  // older peer reads it as before); its absence decodes as kCrc.
  WireMode mode = WireMode::kCrc;
};

struct Challenge {
  EntityName name;
  uint64_t features = 0;
  AuthMode auth = AuthMode::kNone;
  Nonce nonce{};
  std::string proof;  // empty when auth == kNone
  WireMode mode = WireMode::kCrc;  // trailing byte when not kCrc, as in Hello
  // With kFeatureEntityProof in `features` (then the mode byte is always written): the
  // server's certificate (DER) and its signature of EntityProofInput(true, ...).
  std::string entity_cert;
  std::string entity_sig;
};

// AUTH flags.
inline constexpr uint8_t kAuthWantRing = 1u << 0;
inline constexpr uint8_t kAuthLossless = 1u << 1;
inline constexpr uint8_t kAuthHadSession = 1u << 2;  // the client was connected before
inline constexpr uint8_t kAuthInstance = 1u << 3;    // an instance follows ring_bytes

struct AuthReply {
  std::string proof;
  uint64_t cookie = 0;  // client's session cookie (random, fixed for the session)
  uint64_t in_seq = 0;  // last data frame seq the client received in this session
  uint8_t flags = 0;
  // The ring size the client asks for (kAuthWantRing; 0: the server's initial size). A
  // server that resizes rings (rdma) clamps it to its limits; READY says what it chose.
  uint64_t ring_bytes = 0;
  // The client messenger's incarnation (MessengerOptions::instance), what the cluster
  // fences (Messenger::SetFenced); sent when not 0 (kAuthInstance, set by EncodeAuth).
  uint64_t instance = 0;
  // The client's certificate (DER) and its signature of EntityProofInput(false, ...):
  // trailing, present only when the client offered kFeatureEntityProof.
  std::string entity_cert;
  std::string entity_sig;
};

// READY flags.
inline constexpr uint8_t kReadyResumed = 1u << 0;

struct Ready {
  uint8_t flags = 0;
  uint64_t in_seq = 0;       // last data frame seq the server received in this session
  uint64_t ring_bytes = 0;   // 0: no ring
  uint64_t ring_credit = 0;  // released position of the ring so far
};

std::string EncodeHello(const Hello& m);
std::string EncodeChallenge(const Challenge& m);
std::string EncodeAuth(const AuthReply& m);
std::string EncodeReady(const Ready& m);

// Decoders reject short, long or out-of-range input with kInvalidArgument.
absl::StatusOr<Hello> DecodeHello(std::string_view b);
absl::StatusOr<Challenge> DecodeChallenge(std::string_view b);
absl::StatusOr<AuthReply> DecodeAuth(std::string_view b);
absl::StatusOr<Ready> DecodeReady(std::string_view b);

// Fresh nonce from OpenSSL's RAND_bytes; a random u64 cookie likewise.
Nonce NewNonce();
uint64_t NewCookie();

// Ps / Pc as above. `client` and `server` are the entity names from HELLO / CHALLENGE.
std::string ServerProof(const std::string& secret, const Nonce& client_nonce,
                        const Nonce& server_nonce, const EntityName& client,
                        const EntityName& server);
std::string ClientProof(const std::string& secret, const Nonce& client_nonce,
                        const Nonce& server_nonce, const EntityName& client,
                        const EntityName& server);
// What each side signs with its entity key: a label for the side, both fresh nonces and
// both names, so a signature proves this handshake and cannot be replayed in another.
std::string EntityProofInput(bool server_side, const Nonce& client_nonce,
                             const Nonce& server_nonce, const EntityName& client,
                             const EntityName& server);
// Constant-time comparison (CRYPTO_memcmp); false when sizes differ.
bool ProofEquals(std::string_view a, std::string_view b);

}  // namespace msgr

#endif  // MSGR_MSG_HANDSHAKE_H_

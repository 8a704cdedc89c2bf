// Secure mode (msgr2's "secure"): the key schedule and the AEAD that seals every frame of a
// TCP session after the handshake (msg/PROTOCOL.md, "Secure mode"). Sans-I/O: it turns
// plaintext pieces into ciphertext + tag and back, and never touches a socket, so it is
// unit-tested without one (tests/msg/session/secure_mode_test.cc).
//
//   keys   HKDF-SHA256(IKM = cluster key K, salt = Nc || Ns,
//                      info = "msgr-secure-v1" || cipher id || SHA-256(HELLO || CHALLENGE || AUTH))
//          -> client->server key, IV salt, server->client key, IV salt
//   piece  AES-GCM(key, nonce = IV salt XOR (0^4 || be64(counter)), no AAD) -> ciphertext || tag
//
// The transcript hash binds the keys to every byte both sides exchanged in the clear
// (names, features, modes, nonces, cookie, resume state): a handshake tampered with on the
// way gives the two ends different keys, and the first sealed frame (READY) fails. Each
// piece takes the next counter of its direction, so a (key, nonce) pair is never reused
// and a replayed, dropped or reordered piece is opened under the wrong nonce and fails.
//
// Thread-safety: DeriveSecureKeys is a pure function. A SecureStream is one direction of
// one socket, used by one thread at a time (the connection's writer under its lock, or its
// reader on the strand).
#ifndef MSGR_MSG_SESSION_SECURE_MODE_H_
#define MSGR_MSG_SESSION_SECURE_MODE_H_

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "msg/handshake.h"

typedef struct evp_cipher_ctx_st EVP_CIPHER_CTX;

namespace msgr::session {

inline constexpr size_t kSecureTagBytes = 16;    // GCM tag per sealed piece
inline constexpr size_t kSecureIvBytes = 12;     // GCM nonce
inline constexpr size_t kSecureMaxKeyBytes = 32;

// Key bytes of `mode`'s cipher (16 or 32). REQUIRES: mode is a secure mode.
size_t SecureKeyBytes(WireMode mode);

// The key and IV salt of one direction.
struct DirectionKeys {
  std::string key;  // SecureKeyBytes(mode) bytes
  std::array<uint8_t, kSecureIvBytes> iv_salt{};
};

struct SecureKeys {
  WireMode mode = WireMode::kCrc;
  DirectionKeys client_to_server;
  DirectionKeys server_to_client;
};

// The keys of one session attempt. `transcript` is HELLO's, CHALLENGE's and AUTH's
// payloads, concatenated in that order, as sent and received. REQUIRES: a secure mode,
// a non-empty secret. Errors only if OpenSSL fails (kInternal).
absl::StatusOr<SecureKeys> DeriveSecureKeys(std::string_view secret, WireMode mode,
                                            const Nonce& client_nonce, const Nonce& server_nonce,
                                            std::string_view transcript);

// One direction of a secure session: seals (or opens) pieces in order, each with the next
// nonce. Not copyable; the EVP context is keyed once and re-used for every piece.
class SecureStream {
 public:
  static absl::StatusOr<std::unique_ptr<SecureStream>> Create(WireMode mode,
                                                              const DirectionKeys& keys);
  ~SecureStream();
  SecureStream(const SecureStream&) = delete;
  SecureStream& operator=(const SecureStream&) = delete;

  // Seals the concatenation of `a` and `b` (either may be empty, not both) into `out`
  // (a.size() + b.size() bytes of ciphertext, then kSecureTagBytes of tag). `out` may
  // not overlap the input.
  void Seal(std::string_view a, std::string_view b, uint8_t* out);
  // Opens `len` bytes of ciphertext in place, checking `tag`. False: the piece is not
  // the one the peer sealed next (tampered, truncated, replayed, reordered or under
  // another key); the stream must not be used again.
  bool Open(uint8_t* data, size_t len, const uint8_t* tag);

  // Pieces sealed or opened so far: the next nonce's counter.
  uint64_t counter() const { return counter_; }

 private:
  SecureStream(const DirectionKeys& keys, EVP_CIPHER_CTX* enc, EVP_CIPHER_CTX* dec);
  void NextNonce(uint8_t* iv);

  const std::array<uint8_t, kSecureIvBytes> iv_salt_;
  EVP_CIPHER_CTX* const enc_;  // owned
  EVP_CIPHER_CTX* const dec_;  // owned
  uint64_t counter_ = 0;
};

// The bytes a sealed frame takes on the wire: header (48 + tag), then for RING_RECORD
// prefix (40 + tag) and body (oid + data + tag), else the payload (+ tag) when not empty.
inline size_t SealedPayloadBytes(bool ring_record, size_t payload_len) {
  if (ring_record) return payload_len + 2 * kSecureTagBytes;
  return payload_len == 0 ? 0 : payload_len + kSecureTagBytes;
}

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_SECURE_MODE_H_

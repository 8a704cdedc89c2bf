#include "msg/session/secure_mode.h"

#include <openssl/evp.h>
#include <openssl/kdf.h>

#include <cassert>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace msgr::session {
namespace {

const EVP_CIPHER* CipherOf(WireMode mode) {
  return mode == WireMode::kSecureAes256Gcm ? EVP_aes_256_gcm() : EVP_aes_128_gcm();
}

std::string_view Bytes(const Nonce& n) {
  return std::string_view(reinterpret_cast<const char*>(n.data()), n.size());
}

}  // namespace

size_t SecureKeyBytes(WireMode mode) { return mode == WireMode::kSecureAes256Gcm ? 32 : 16; }

absl::StatusOr<SecureKeys> DeriveSecureKeys(std::string_view secret, WireMode mode,
                                            const Nonce& client_nonce, const Nonce& server_nonce,
                                            std::string_view transcript) {
  unsigned char th[EVP_MAX_MD_SIZE];
  unsigned int th_len = 0;
  if (EVP_Digest(transcript.data(), transcript.size(), th, &th_len, EVP_sha256(), nullptr) != 1) {
    return absl::InternalError("secure mode: SHA-256 of the handshake transcript failed");
  }
  // info: a label (so these keys are never the proofs' HMAC outputs), the cipher (an
  // AES-128 and an AES-256 session never share key bytes) and the transcript hash.
  std::string info = "msgr-secure-v1";
  info.push_back(static_cast<char>(mode));
  info.append(reinterpret_cast<const char*>(th), th_len);
  std::string salt(Bytes(client_nonce));
  salt.append(Bytes(server_nonce));

  const size_t key_bytes = SecureKeyBytes(mode);
  const size_t dir_bytes = key_bytes + kSecureIvBytes;
  unsigned char okm[2 * (kSecureMaxKeyBytes + kSecureIvBytes)];
  size_t okm_len = 2 * dir_bytes;

  EVP_PKEY_CTX* pctx = EVP_PKEY_CTX_new_id(EVP_PKEY_HKDF, nullptr);
  bool ok = pctx != nullptr && EVP_PKEY_derive_init(pctx) == 1 &&
            EVP_PKEY_CTX_set_hkdf_md(pctx, EVP_sha256()) == 1 &&
            EVP_PKEY_CTX_set1_hkdf_salt(pctx, reinterpret_cast<const unsigned char*>(salt.data()),
                                        static_cast<int>(salt.size())) == 1 &&
            EVP_PKEY_CTX_set1_hkdf_key(pctx, reinterpret_cast<const unsigned char*>(secret.data()),
                                       static_cast<int>(secret.size())) == 1 &&
            EVP_PKEY_CTX_add1_hkdf_info(pctx, reinterpret_cast<const unsigned char*>(info.data()),
                                        static_cast<int>(info.size())) == 1 &&
            EVP_PKEY_derive(pctx, okm, &okm_len) == 1 && okm_len == 2 * dir_bytes;
  EVP_PKEY_CTX_free(pctx);
  if (!ok) return absl::InternalError("secure mode: HKDF-SHA256 key derivation failed");

  SecureKeys k;
  k.mode = mode;
  const unsigned char* p = okm;
  for (DirectionKeys* d : {&k.client_to_server, &k.server_to_client}) {
    d->key.assign(reinterpret_cast<const char*>(p), key_bytes);
    std::memcpy(d->iv_salt.data(), p + key_bytes, kSecureIvBytes);
    p += dir_bytes;
  }
  OPENSSL_cleanse(okm, sizeof(okm));
  return k;
}

absl::StatusOr<std::unique_ptr<SecureStream>> SecureStream::Create(WireMode mode,
                                                                   const DirectionKeys& keys) {
  if (mode == WireMode::kCrc || keys.key.size() != SecureKeyBytes(mode)) {
    return absl::InvalidArgumentError("secure stream needs a secure mode and its key");
  }
  EVP_CIPHER_CTX* enc = EVP_CIPHER_CTX_new();
  EVP_CIPHER_CTX* dec = EVP_CIPHER_CTX_new();
  const auto* key = reinterpret_cast<const unsigned char*>(keys.key.data());
  // Keyed once here (the AES key schedule); each piece only sets its nonce.
  const bool ok = enc != nullptr && dec != nullptr &&
                  EVP_EncryptInit_ex(enc, CipherOf(mode), nullptr, key, nullptr) == 1 &&
                  EVP_DecryptInit_ex(dec, CipherOf(mode), nullptr, key, nullptr) == 1;
  if (!ok) {
    EVP_CIPHER_CTX_free(enc);
    EVP_CIPHER_CTX_free(dec);
    return absl::InternalError("secure mode: AES-GCM context setup failed");
  }
  return std::unique_ptr<SecureStream>(new SecureStream(keys, enc, dec));
}

SecureStream::SecureStream(const DirectionKeys& keys, EVP_CIPHER_CTX* enc, EVP_CIPHER_CTX* dec)
    : iv_salt_(keys.iv_salt), enc_(enc), dec_(dec) {}

SecureStream::~SecureStream() {
  EVP_CIPHER_CTX_free(enc_);
  EVP_CIPHER_CTX_free(dec_);
}

void SecureStream::NextNonce(uint8_t* iv) {
  // TLS 1.3's construction: the per-direction salt XOR the big-endian piece counter. A
  // session seals far fewer than 2^64 pieces, so the counter never wraps.
  std::memcpy(iv, iv_salt_.data(), kSecureIvBytes);
  const uint64_t c = counter_++;
  for (int i = 0; i < 8; ++i) iv[kSecureIvBytes - 1 - i] ^= static_cast<uint8_t>(c >> (8 * i));
}

void SecureStream::Seal(std::string_view a, std::string_view b, uint8_t* out) {
  uint8_t iv[kSecureIvBytes];
  NextNonce(iv);
  int n = 0;
  // These calls fail only on misuse (null context, bad sizes): assert, do not propagate.
  [[maybe_unused]] bool ok = EVP_EncryptInit_ex(enc_, nullptr, nullptr, nullptr, iv) == 1;
  uint8_t* p = out;
  for (std::string_view part : {a, b}) {
    if (part.empty()) continue;
    ok &= EVP_EncryptUpdate(enc_, p, &n, reinterpret_cast<const unsigned char*>(part.data()),
                            static_cast<int>(part.size())) == 1;
    p += n;
  }
  ok &= EVP_EncryptFinal_ex(enc_, p, &n) == 1;
  p += n;
  ok &= EVP_CIPHER_CTX_ctrl(enc_, EVP_CTRL_GCM_GET_TAG, kSecureTagBytes, p) == 1;
  assert(ok && static_cast<size_t>(p - out) == a.size() + b.size());
}

bool SecureStream::Open(uint8_t* data, size_t len, const uint8_t* tag) {
  uint8_t iv[kSecureIvBytes];
  NextNonce(iv);
  int n = 0;
  bool ok = EVP_DecryptInit_ex(dec_, nullptr, nullptr, nullptr, iv) == 1;
  if (len > 0) ok = ok && EVP_DecryptUpdate(dec_, data, &n, data, static_cast<int>(len)) == 1;
  ok = ok && EVP_CIPHER_CTX_ctrl(dec_, EVP_CTRL_GCM_SET_TAG, kSecureTagBytes,
                                 const_cast<uint8_t*>(tag)) == 1;
  // The tag check: DecryptFinal fails unless every byte and the tag are the peer's.
  ok = ok && EVP_DecryptFinal_ex(dec_, data + n, &n) == 1;
  return ok;
}

}  // namespace msgr::session

#include "msg/handshake.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "msg/base/wire.h"

namespace msgr {
namespace {

void PutName(WireWriter* w, const EntityName& n) {
  w->Put<uint8_t>(static_cast<uint8_t>(n.type));
  w->Put<uint64_t>(n.id);
}

bool GetName(WireReader* r, EntityName* n) {
  uint8_t t;
  if (!r->Get(&t) || !r->Get(&n->id)) return false;
  if (t < static_cast<uint8_t>(EntityType::kClient) || t > static_cast<uint8_t>(EntityType::kMon)) {
    return false;
  }
  n->type = static_cast<EntityType>(t);
  return true;
}

bool GetNonce(WireReader* r, Nonce* n) {
  std::string b;
  if (!r->GetBytes(kNonceBytes, &b)) return false;
  std::memcpy(n->data(), b.data(), kNonceBytes);
  return true;
}

bool GetMode(WireReader* r, AuthMode* m) {
  uint8_t v;
  if (!r->Get(&v) || v > static_cast<uint8_t>(AuthMode::kSecret)) return false;
  *m = static_cast<AuthMode>(v);
  return true;
}

// The optional trailing wire-mode byte (absent: crc).
bool GetWireMode(WireReader* r, WireMode* m) {
  if (r->remaining() == 0) {
    *m = WireMode::kCrc;
    return true;
  }
  uint8_t v;
  if (!r->Get(&v) || v == 0 || v > static_cast<uint8_t>(WireMode::kSecureAes256Gcm)) return false;
  *m = static_cast<WireMode>(v);
  return true;
}

void PutWireMode(WireWriter* w, WireMode m) {
  if (m != WireMode::kCrc) w->Put<uint8_t>(static_cast<uint8_t>(m));
}

absl::Status Bad(const char* what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", what, " handshake payload"));
}

std::string Proof(const std::string& secret, std::string_view label, const Nonce& first,
                  const Nonce& second, const EntityName& client, const EntityName& server) {
  std::string msg;
  WireWriter w(&msg);
  w.PutBytes("msgr-auth-v1 ");
  w.PutBytes(label);
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(first.data()), first.size()));
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(second.data()), second.size()));
  PutName(&w, client);
  PutName(&w, server);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &out_len);
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

}  // namespace

const char* WireModeName(WireMode m) {
  switch (m) {
    case WireMode::kCrc:
      return "crc";
    case WireMode::kSecureAes128Gcm:
      return "secure (aes-128-gcm)";
    case WireMode::kSecureAes256Gcm:
      return "secure (aes-256-gcm)";
  }
  return "unknown";
}

WireMode WireModeOf(const MessengerOptions& options) {
  if (options.ms_mode != "secure") return WireMode::kCrc;
  return options.ms_secure_cipher == "aes-256-gcm" ? WireMode::kSecureAes256Gcm
                                                   : WireMode::kSecureAes128Gcm;
}

std::string EncodeHello(const Hello& m) {
  std::string s;
  WireWriter w(&s);
  PutName(&w, m.name);
  w.Put<uint64_t>(m.features);
  w.Put<uint8_t>(static_cast<uint8_t>(m.auth));
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(m.nonce.data()), kNonceBytes));
  PutWireMode(&w, m.mode);
  return s;
}

absl::StatusOr<Hello> DecodeHello(std::string_view b) {
  WireReader r(b);
  Hello m;
  if (!GetName(&r, &m.name) || !r.Get(&m.features) || !GetMode(&r, &m.auth) ||
      !GetNonce(&r, &m.nonce) || !GetWireMode(&r, &m.mode) || r.remaining() != 0) {
    return Bad("HELLO");
  }
  return m;
}

std::string EncodeChallenge(const Challenge& m) {
  std::string s;
  WireWriter w(&s);
  PutName(&w, m.name);
  w.Put<uint64_t>(m.features);
  w.Put<uint8_t>(static_cast<uint8_t>(m.auth));
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(m.nonce.data()), kNonceBytes));
  w.PutString16(m.proof);
  if ((m.features & kFeatureEntityProof) != 0) {
    w.Put<uint8_t>(static_cast<uint8_t>(m.mode));
    w.PutString16(m.entity_cert);
    w.PutString16(m.entity_sig);
  } else {
    PutWireMode(&w, m.mode);
  }
  return s;
}

absl::StatusOr<Challenge> DecodeChallenge(std::string_view b) {
  WireReader r(b);
  Challenge m;
  if (!GetName(&r, &m.name) || !r.Get(&m.features) || !GetMode(&r, &m.auth) ||
      !GetNonce(&r, &m.nonce) || !r.GetString16(kProofBytes, &m.proof)) {
    return Bad("CHALLENGE");
  }
  if ((m.features & kFeatureEntityProof) != 0) {
    uint8_t mode;
    if (!r.Get(&mode) || mode > static_cast<uint8_t>(WireMode::kSecureAes256Gcm) ||
        !r.GetString16(kMaxEntityCertBytes, &m.entity_cert) ||
        !r.GetString16(kMaxEntitySigBytes, &m.entity_sig)) {
      return Bad("CHALLENGE");
    }
    m.mode = static_cast<WireMode>(mode);
  } else if (!GetWireMode(&r, &m.mode)) {
    return Bad("CHALLENGE");
  }
  if (r.remaining() != 0) return Bad("CHALLENGE");
  return m;
}

std::string EncodeAuth(const AuthReply& m) {
  std::string s;
  WireWriter w(&s);
  w.PutString16(m.proof);
  w.Put<uint64_t>(m.cookie);
  w.Put<uint64_t>(m.in_seq);
  w.Put<uint8_t>(m.instance != 0 ? (m.flags | kAuthInstance) : (m.flags & ~kAuthInstance));
  w.Put<uint64_t>(m.ring_bytes);
  if (m.instance != 0) w.Put<uint64_t>(m.instance);
  if (!m.entity_cert.empty()) {
    w.PutString16(m.entity_cert);
    w.PutString16(m.entity_sig);
  }
  return s;
}

absl::StatusOr<AuthReply> DecodeAuth(std::string_view b) {
  WireReader r(b);
  AuthReply m;
  if (!r.GetString16(kProofBytes, &m.proof) || !r.Get(&m.cookie) || !r.Get(&m.in_seq) ||
      !r.Get(&m.flags) || !r.Get(&m.ring_bytes) ||
      (m.flags & ~(kAuthWantRing | kAuthLossless | kAuthHadSession | kAuthInstance)) != 0 ||
      ((m.flags & kAuthInstance) != 0 && (!r.Get(&m.instance) || m.instance == 0))) {
    return Bad("AUTH");
  }
  if (r.remaining() != 0 && (!r.GetString16(kMaxEntityCertBytes, &m.entity_cert) ||
                             m.entity_cert.empty() ||
                             !r.GetString16(kMaxEntitySigBytes, &m.entity_sig))) {
    return Bad("AUTH");
  }
  if (r.remaining() != 0) return Bad("AUTH");
  return m;
}

std::string EncodeReady(const Ready& m) {
  std::string s;
  WireWriter w(&s);
  w.Put<uint8_t>(m.flags);
  w.Put<uint64_t>(m.in_seq);
  w.Put<uint64_t>(m.ring_bytes);
  w.Put<uint64_t>(m.ring_credit);
  return s;
}

absl::StatusOr<Ready> DecodeReady(std::string_view b) {
  WireReader r(b);
  Ready m;
  if (!r.Get(&m.flags) || !r.Get(&m.in_seq) || !r.Get(&m.ring_bytes) || !r.Get(&m.ring_credit) ||
      r.remaining() != 0 || (m.flags & ~kReadyResumed) != 0) {
    return Bad("READY");
  }
  return m;
}

Nonce NewNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), static_cast<int>(n.size())) != 1) std::abort();  // no entropy
  return n;
}

uint64_t NewCookie() {
  uint64_t c = 0;
  while (c == 0) {
    if (RAND_bytes(reinterpret_cast<unsigned char*>(&c), sizeof(c)) != 1) std::abort();
  }
  return c;
}

std::string ServerProof(const std::string& secret, const Nonce& client_nonce,
                        const Nonce& server_nonce, const EntityName& client,
                        const EntityName& server) {
  return Proof(secret, "server", client_nonce, server_nonce, client, server);
}

std::string ClientProof(const std::string& secret, const Nonce& client_nonce,
                        const Nonce& server_nonce, const EntityName& client,
                        const EntityName& server) {
  return Proof(secret, "client", server_nonce, client_nonce, client, server);
}

std::string EntityProofInput(bool server_side, const Nonce& client_nonce,
                             const Nonce& server_nonce, const EntityName& client,
                             const EntityName& server) {
  std::string msg;
  WireWriter w(&msg);
  w.PutBytes(server_side ? "msgr-entity-v1 server " : "msgr-entity-v1 client ");
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(client_nonce.data()), kNonceBytes));
  w.PutBytes(std::string_view(reinterpret_cast<const char*>(server_nonce.data()), kNonceBytes));
  PutName(&w, client);
  PutName(&w, server);
  return msg;
}

bool ProofEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size() || a.empty()) return false;
  return CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace msgr

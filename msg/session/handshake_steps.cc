#include "msg/session/handshake_steps.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/entity_credentials.h"

namespace msgr::session {
namespace {

bool Secret(const AuthConfig& a) { return a.mode == AuthConfig::Mode::kSecret; }

std::string Frame(FrameType type, const std::string& payload) {
  FrameHeader h;
  h.type = type;
  return EncodeFrame(h, payload);
}

absl::Status Unexpected(const char* want, const FrameHeader& h) {
  return absl::InvalidArgumentError(
      absl::StrCat("expected ", want, ", got ", FrameTypeName(h.type), " frame"));
}

// A peer without the features this build needs cannot talk to it: say which and what to do.
absl::Status CheckFeatures(uint64_t theirs, std::string_view who) {
  if ((theirs & kFeaturesRequired) == kFeaturesRequired) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrFormat(
      "%s offers msgr features 0x%x, this messenger needs 0x%x (features 0x%x missing): "
      "run the same msgr version on both sides",
      std::string(who), theirs, kFeaturesRequired, kFeaturesRequired & ~theirs));
}

// EOF or a cancelled read between frames is the peer leaving, not an error of its.
Blame ReadErrorBlame(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsCancelled(s) ? Blame::kNone : Blame::kProtocol;
}

}  // namespace

void CountFailure(const HandshakeError& e, LiveMessengerCounters* c) {
  switch (e.blame) {
    case Blame::kNone:
      return;
    case Blame::kAuth:
      c->auth_failures++;
      return;
    case Blame::kProtocol:
      if (absl::IsDataLoss(e.why)) {
        c->crc_errors++;
      } else {
        c->protocol_errors++;
      }
      return;
  }
}

std::string CloseFrame(const HandshakeError& e) {
  FrameHeader h;
  h.type = FrameType::kClose;
  h.msg_type = static_cast<uint16_t>(e.why.code());
  const bool proof = e.blame == Blame::kAuth && absl::IsUnauthenticated(e.why);
  return EncodeFrame(h, proof ? std::string("authentication failed") : std::string(e.why.message()));
}

absl::Status RefusalFromClose(const FrameHeader& h, std::string_view payload,
                              std::string_view who) {
  // msg_type: the refusal's absl::StatusCode; 0 (or out of range) from older peers.
  const bool has_code = h.msg_type > 0 && h.msg_type <= 16;
  const auto code = has_code ? static_cast<absl::StatusCode>(h.msg_type)
                             : absl::StatusCode::kUnauthenticated;
  return absl::Status(code, absl::StrCat(std::string(who), " refused the connection: ", std::string(payload)));
}

// ------------------------------------------------------------------------------ both

HandshakeSide::HandshakeSide(EntityName me, AuthConfig auth, std::string peer_addr,
                             WireMode mode)
    : me_(me), auth_(std::move(auth)), peer_addr_(std::move(peer_addr)), mode_(mode) {}

absl::Status HandshakeSide::CheckMode(WireMode theirs, const EntityName& client,
                                      const EntityName& server, bool we_are_client) {
  if (theirs == mode_) return absl::OkStatus();
  const WireMode client_mode = we_are_client ? mode_ : theirs;
  const WireMode server_mode = we_are_client ? theirs : mode_;
  // Never a silent downgrade: a mismatch ends the attempt, whichever side wants secure.
  return Fail(absl::FailedPreconditionError(absl::StrFormat(
                  "%s wants ms_mode %s, %s runs ms_mode %s: use the same --ms-mode (and "
                  "cipher) on both sides",
                  client.ToString(), WireModeName(client_mode), server.ToString(),
                  WireModeName(server_mode))),
              Blame::kProtocol, true);
}

absl::Status HandshakeSide::CheckEntityOffer(uint64_t theirs, const EntityName& client,
                                            const EntityName& server, bool we_are_client) {
  const bool their_proof = (theirs & kFeatureEntityProof) != 0;
  if (their_proof == proves_entity()) return absl::OkStatus();
  const bool client_proves = we_are_client ? proves_entity() : their_proof;
  const EntityName& with = client_proves ? client : server;
  const EntityName& without = client_proves ? server : client;
  // Not UNAUTHENTICATED: the peer must learn the reason (CloseFrame hides proof failures).
  return Fail(absl::FailedPreconditionError(absl::StrFormat(
                  "%s proves its entity with a certificate, %s has none: run both with the "
                  "certificates of one cluster's PKI (--cluster-dir DIR, its pki/) or both "
                  "without",
                  with.ToString(), without.ToString())),
              Blame::kAuth, true);
}

uint64_t HandshakeSide::OfferedFeatures() const {
  return kFeaturesSupported | (proves_entity() ? kFeatureEntityProof : 0);
}

absl::Status HandshakeSide::SignEntity(bool server_side, const Nonce& client_nonce,
                                       const Nonce& server_nonce, const EntityName& client,
                                       const EntityName& server, std::string* cert,
                                       std::string* sig) {
  auto s = auth_.entity->Sign(EntityProofInput(server_side, client_nonce, server_nonce, client, server));
  if (!s.ok()) return Fail(s.status(), Blame::kNone, false);
  *cert = auth_.entity->cert_der();
  *sig = std::move(*s);
  return absl::OkStatus();
}

absl::Status HandshakeSide::VerifyEntity(std::string_view cert, std::string_view sig,
                                         bool peer_is_server, const Nonce& client_nonce,
                                         const Nonce& server_nonce, const EntityName& client,
                                         const EntityName& server) {
  const EntityName& claimed = peer_is_server ? server : client;
  auto cn = auth_.entity->VerifyPeer(
      cert, claimed, EntityProofInput(peer_is_server, client_nonce, server_nonce, client, server),
      sig);
  if (!cn.ok()) return Fail(cn.status(), Blame::kAuth, true);
  return absl::OkStatus();
}

absl::Status HandshakeSide::DeriveKeys(const Nonce& client_nonce, const Nonce& server_nonce) {
  if (mode_ == WireMode::kCrc) return absl::OkStatus();
  auto k = DeriveSecureKeys(auth_.secret, mode_, client_nonce, server_nonce, transcript_);
  if (!k.ok()) return Fail(k.status(), Blame::kNone, false);
  keys_ = std::move(*k);
  return absl::OkStatus();
}

std::string HandshakeSide::who() const {
  return has_peer_ ? absl::StrCat(peer_.ToString(), " at ", peer_addr_)
                   : absl::StrCat("peer at ", peer_addr_);
}

absl::Status HandshakeSide::Fail(absl::Status why, Blame blame, bool send_close) {
  error_ = HandshakeError{why, blame, send_close};
  return why;
}

void HandshakeSide::SetPeer(const EntityName& peer) {
  peer_ = peer;
  has_peer_ = true;
}

// ------------------------------------------------------------------------------ server

ServerHandshake::ServerHandshake(EntityName me, AuthConfig auth, std::string peer_addr,
                                 WireMode mode)
    : HandshakeSide(me, std::move(auth), std::move(peer_addr), mode) {}

absl::Status ServerHandshake::Refuse(absl::Status why, Blame blame, bool send_close) {
  return Fail(std::move(why), blame, send_close);
}

absl::Status ServerHandshake::OnReadError(const absl::Status& s) {
  return Fail(s, ReadErrorBlame(s), false);
}

absl::Status ServerHandshake::OnTimeout(absl::Duration timeout) {
  return Fail(absl::DeadlineExceededError(absl::StrCat("handshake did not finish within ",
                                                       absl::FormatDuration(timeout))),
              Blame::kProtocol, false);
}

absl::StatusOr<std::string> ServerHandshake::OnHello(const FrameHeader& h,
                                                     std::string_view payload) {
  if (h.type != FrameType::kHello) return Fail(Unexpected("HELLO", h), Blame::kProtocol, false);
  auto hello = DecodeHello(payload);
  if (!hello.ok()) return Fail(hello.status(), Blame::kProtocol, false);
  hello_ = *hello;
  SetPeer(hello_.name);
  if (absl::Status s = CheckFeatures(hello_.features, "peer"); !s.ok()) {
    return Fail(s, Blame::kProtocol, true);
  }
  if (absl::Status s = CheckMode(hello_.mode, hello_.name, me_, false); !s.ok()) return s;
  const bool secret = Secret(auth_);
  if (secret && hello_.auth != AuthMode::kSecret) {
    return Fail(absl::UnauthenticatedError("peer has no cluster key (authentication required)"),
                Blame::kAuth, true);
  }
  if (!secret && hello_.auth == AuthMode::kSecret) {
    return Fail(absl::UnauthenticatedError(
                    "peer wants to authenticate but this messenger has no cluster key"),
                Blame::kAuth, true);
  }
  if (absl::Status s = CheckEntityOffer(hello_.features, hello_.name, me_, false); !s.ok()) {
    return s;
  }
  Challenge c;
  c.name = me_;
  c.features = OfferedFeatures();
  c.auth = secret ? AuthMode::kSecret : AuthMode::kNone;
  c.nonce = nonce_ = NewNonce();
  if (secret) c.proof = ServerProof(auth_.secret, hello_.nonce, nonce_, hello_.name, me_);
  c.mode = mode_;
  if (proves_entity()) {
    if (absl::Status s = SignEntity(true, hello_.nonce, nonce_, hello_.name, me_, &c.entity_cert,
                                    &c.entity_sig);
        !s.ok()) {
      return s;
    }
  }
  std::string challenge = EncodeChallenge(c);
  if (mode_ != WireMode::kCrc) transcript_ = std::string(payload) + challenge;
  return Frame(FrameType::kChallenge, challenge);
}

absl::StatusOr<AuthReply> ServerHandshake::OnAuth(const FrameHeader& h,
                                                  std::string_view payload) {
  if (h.type == FrameType::kClose) {
    // The client could not verify our proof (a different cluster key).
    return Fail(absl::UnauthenticatedError(
                    absl::StrCat("peer refused our proof of the cluster key: ", std::string(payload))),
                Blame::kAuth, false);
  }
  if (h.type != FrameType::kAuth) return Fail(Unexpected("AUTH", h), Blame::kProtocol, false);
  auto a = DecodeAuth(payload);
  if (!a.ok()) return Fail(a.status(), Blame::kProtocol, false);
  if (Secret(auth_) &&
      !ProofEquals(a->proof, ClientProof(auth_.secret, hello_.nonce, nonce_, hello_.name, me_))) {
    return Fail(absl::UnauthenticatedError("peer failed to prove it holds the cluster key"),
                Blame::kAuth, true);
  }
  if (proves_entity()) {
    if (absl::Status s = VerifyEntity(a->entity_cert, a->entity_sig, /*peer_is_server=*/false,
                                      hello_.nonce, nonce_, hello_.name, me_);
        !s.ok()) {
      return s;
    }
  } else if (!a->entity_cert.empty()) {
    return Fail(absl::InvalidArgumentError("AUTH carries a certificate the peer did not offer"),
                Blame::kProtocol, false);
  }
  if (a->cookie == 0) {
    return Fail(absl::InvalidArgumentError("AUTH with a zero session cookie"), Blame::kProtocol,
                false);
  }
  if (mode_ != WireMode::kCrc) {
    transcript_.append(payload);
    if (absl::Status s = DeriveKeys(hello_.nonce, nonce_); !s.ok()) return s;
  }
  return *a;
}

// ------------------------------------------------------------------------------ client

ClientHandshake::ClientHandshake(EntityName me, AuthConfig auth, std::string peer_addr,
                                 WireMode mode, std::optional<EntityName> expect_peer)
    : HandshakeSide(me, std::move(auth), std::move(peer_addr), mode),
      expect_peer_(std::move(expect_peer)) {}

absl::Status ClientHandshake::OnReadError(const absl::Status& s) {
  return Fail(s, Blame::kNone, false);
}

absl::Status ClientHandshake::OnTimeout(absl::Duration timeout) {
  return Fail(absl::DeadlineExceededError(absl::StrCat("handshake with ", who(),
                                                       " did not finish within ",
                                                       absl::FormatDuration(timeout))),
              Blame::kNone, false);
}

std::string ClientHandshake::HelloFrame() {
  Hello h;
  h.name = me_;
  h.features = OfferedFeatures();
  h.auth = Secret(auth_) ? AuthMode::kSecret : AuthMode::kNone;
  h.nonce = nonce_ = NewNonce();
  h.mode = mode_;
  std::string hello = EncodeHello(h);
  if (mode_ != WireMode::kCrc) transcript_ = hello;
  return Frame(FrameType::kHello, hello);
}

absl::StatusOr<std::string> ClientHandshake::OnChallenge(const FrameHeader& h,
                                                         std::string_view payload,
                                                         AuthReply resume) {
  if (h.type == FrameType::kClose) {
    const absl::Status why = RefusalFromClose(h, payload, who());
    return Fail(why, absl::IsUnauthenticated(why) ? Blame::kAuth : Blame::kNone, false);
  }
  if (h.type != FrameType::kChallenge) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(who(), " sent ", FrameTypeName(h.type),
                                                        " where CHALLENGE was expected")),
                Blame::kProtocol, false);
  }
  auto c = DecodeChallenge(payload);
  if (!c.ok()) return Fail(c.status(), Blame::kProtocol, false);
  SetPeer(c->name);
  if (expect_peer_.has_value() && !(c->name == *expect_peer_)) {
    return Fail(absl::PermissionDeniedError(absl::StrCat(
                    peer_addr_, " answered as ", c->name.ToString(), ", not ",
                    expect_peer_->ToString(),
                    ": the map is stale or another process took the address")),
                Blame::kAuth, true);
  }
  if (absl::Status s = CheckFeatures(c->features, who()); !s.ok()) {
    return Fail(s, Blame::kProtocol, true);
  }
  if (absl::Status s = CheckMode(c->mode, me_, peer_, true); !s.ok()) return s;
  const bool secret = Secret(auth_);
  if (secret && c->auth != AuthMode::kSecret) {
    return Fail(absl::UnauthenticatedError(
                    absl::StrCat(who(), " does not authenticate itself (no cluster key)")),
                Blame::kAuth, true);
  }
  if (!secret && c->auth == AuthMode::kSecret) {
    return Fail(absl::UnauthenticatedError(
                    absl::StrCat(who(), " requires a cluster key and we have none")),
                Blame::kAuth, true);
  }
  if (secret && !ProofEquals(c->proof, ServerProof(auth_.secret, nonce_, c->nonce, me_, peer_))) {
    return Fail(absl::UnauthenticatedError(
                    absl::StrCat(who(), " failed to prove it holds the cluster key")),
                Blame::kAuth, true);
  }
  if (absl::Status s = CheckEntityOffer(c->features, me_, peer_, true); !s.ok()) return s;
  if (proves_entity()) {
    if (absl::Status s = VerifyEntity(c->entity_cert, c->entity_sig, /*peer_is_server=*/true,
                                      nonce_, c->nonce, me_, peer_);
        !s.ok()) {
      return s;
    }
    if (absl::Status s = SignEntity(false, nonce_, c->nonce, me_, peer_, &resume.entity_cert,
                                    &resume.entity_sig);
        !s.ok()) {
      return s;
    }
  }
  resume.proof = secret ? ClientProof(auth_.secret, nonce_, c->nonce, me_, peer_) : std::string();
  std::string auth = EncodeAuth(resume);
  if (mode_ != WireMode::kCrc) {
    transcript_.append(payload);
    transcript_.append(auth);
    if (absl::Status s = DeriveKeys(nonce_, c->nonce); !s.ok()) return s;
  }
  return Frame(FrameType::kAuth, auth);
}

absl::StatusOr<Ready> ClientHandshake::OnReady(const FrameHeader& h, std::string_view payload,
                                               bool want_ring) {
  if (h.type == FrameType::kClose) {
    const absl::Status why = RefusalFromClose(h, payload, who());
    return Fail(why, absl::IsUnauthenticated(why) ? Blame::kAuth : Blame::kNone, false);
  }
  if (h.type != FrameType::kReady) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(who(), " sent ", FrameTypeName(h.type),
                                                        " where READY was expected")),
                Blame::kProtocol, false);
  }
  auto r = DecodeReady(payload);
  if (!r.ok()) return Fail(r.status(), Blame::kProtocol, false);
  if (want_ring && !IsValidRingSize(r->ring_bytes)) {
    return Fail(absl::InvalidArgumentError(
                    absl::StrCat(who(), " offered an invalid ring of ", r->ring_bytes, " bytes")),
                Blame::kProtocol, false);
  }
  return *r;
}

}  // namespace msgr::session

// The session handshake as two state machines, written once for every backend and
// sans-I/O: they consume the frames a transport read (header + payload) and return the
// frames it must write, or the reason to stop. They never touch a socket, a side channel
// or a QP, so they are unit-tested without any (tests/msg/session/).
//
//   client (ClientHandshake)                    server (ServerHandshake)
//   HelloFrame()                 HELLO    -->   OnHello()     -> CHALLENGE to write
//   OnChallenge() -> AUTH       <-- CHALLENGE
//                                AUTH     -->   OnAuth()      -> the peer's AuthReply
//                                                (the backend finds or creates the session
//                                                 and writes READY: msg/handshake.h)
//   OnReady()     -> Ready      <-- READY / CLOSE
//
// Payload codecs and proofs are msg/handshake.h; the exchange is msg/PROTOCOL.md,
// "Handshake". A failed step returns its Status and leaves the details in last_error():
// who is to blame (for the counters), and whether to answer with CLOSE first. Error texts
// are the same on every backend.
//
// Thread-safety: an object belongs to one handshake attempt, driven by one thread at a
// time (or a strand). No internal locking.
#ifndef MSGR_MSG_SESSION_HANDSHAKE_STEPS_H_
#define MSGR_MSG_SESSION_HANDSHAKE_STEPS_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "msg/frame.h"
#include "msg/handshake.h"
#include "msg/messenger.h"
#include "msg/messenger_counters.h"
#include "msg/ring/ring.h"
#include "msg/session/secure_mode.h"

namespace msgr::session {

// Features a peer must offer in HELLO / CHALLENGE, or it is refused with both sets named.
inline constexpr uint64_t kFeaturesRequired = kFeatureRing | kFeatureResume | kFeatureImmWakeups;

// Who a failed handshake step blames, for the counters.
enum class Blame {
  kNone,      // the peer went away or the attempt was cancelled: not an error of anyone's
  kProtocol,  // malformed or unexpected input (crc_errors when the status is DATA_LOSS)
  kAuth,      // authentication or authorization refused (auth_failures)
};

struct HandshakeError {
  absl::Status why;
  Blame blame = Blame::kNone;
  // Answer with CloseFrame() before closing (the peer learns why it was refused).
  bool send_close = false;
};

// Counts `e` once in `c`: auth_failures, crc_errors (DATA_LOSS) or protocol_errors.
void CountFailure(const HandshakeError& e, LiveMessengerCounters* c);

// The CLOSE frame that refuses a peer: msg_type carries the status code, the payload the
// reason ("authentication failed" for every proof or key mismatch: the peer learns that
// it was refused, not which check failed).
std::string CloseFrame(const HandshakeError& e);

// What a CLOSE received during the handshake means: its code (UNAUTHENTICATED when it
// carries none) and "<who> refused the connection: <reason>".
absl::Status RefusalFromClose(const FrameHeader& h, std::string_view payload,
                              std::string_view who);

// What both halves keep: who we are, the key, the peer's address, the last failure.
class HandshakeSide {
 public:
  const HandshakeError& last_error() const { return error_; }
  // "osd.0 at 127.0.0.1:6800" once the peer named itself, else "peer at 127.0.0.1:6800".
  std::string who() const;
  WireMode mode() const { return mode_; }
  // Secure mode: the session keys of this attempt (msg/session/secure_mode.h), derived
  // from the cluster key, both nonces and the handshake transcript. Set once the server's
  // OnAuth / the client's OnChallenge succeeded; empty in crc mode.
  const std::optional<SecureKeys>& secure_keys() const { return keys_; }

 protected:
  HandshakeSide(EntityName me, AuthConfig auth, std::string peer_addr, WireMode mode);
  // Both ends must run the same wire mode: the refusal names each side's.
  absl::Status CheckMode(WireMode theirs, const EntityName& client, const EntityName& server,
                         bool we_are_client);
  // Both ends prove their entity with a certificate or neither does: a mismatch ends the
  // attempt, naming which side has none (`theirs`: the peer's offered features).
  absl::Status CheckEntityOffer(uint64_t theirs, const EntityName& client,
                                const EntityName& server, bool we_are_client);
  bool proves_entity() const { return auth_.entity != nullptr; }
  // Features this side offers in HELLO / CHALLENGE.
  uint64_t OfferedFeatures() const;
  // Our certificate and signature of EntityProofInput(server_side, ...) into *cert, *sig.
  absl::Status SignEntity(bool server_side, const Nonce& client_nonce, const Nonce& server_nonce,
                          const EntityName& client, const EntityName& server, std::string* cert,
                          std::string* sig);
  // Checks the peer's certificate and signature; a failure is recorded and returned.
  absl::Status VerifyEntity(std::string_view cert, std::string_view sig, bool peer_is_server,
                            const Nonce& client_nonce, const Nonce& server_nonce,
                            const EntityName& client, const EntityName& server);
  // Secure mode: derives keys_ from the transcript (HELLO, CHALLENGE, AUTH payloads).
  absl::Status DeriveKeys(const Nonce& client_nonce, const Nonce& server_nonce);
  absl::Status Fail(absl::Status why, Blame blame, bool send_close);
  void SetPeer(const EntityName& peer);

  const EntityName me_;
  const AuthConfig auth_;
  const std::string peer_addr_;
  bool has_peer_ = false;
  EntityName peer_;
  const WireMode mode_;
  Nonce nonce_{};  // ours, for this attempt
  HandshakeError error_;
  std::string transcript_;  // secure mode: HELLO || CHALLENGE || AUTH payloads
  std::optional<SecureKeys> keys_;
};

class ServerHandshake : public HandshakeSide {
 public:
  // `peer_addr` only names the peer in errors and logs.
  ServerHandshake(EntityName me, AuthConfig auth, std::string peer_addr,
                  WireMode mode = WireMode::kCrc);

  // HELLO arrived: returns the CHALLENGE frame to write.
  absl::StatusOr<std::string> OnHello(const FrameHeader& h, std::string_view payload);
  // AUTH arrived: checks the proof; returns the peer's AuthReply (cookie, resume state).
  // REQUIRES: OnHello succeeded.
  absl::StatusOr<AuthReply> OnAuth(const FrameHeader& h, std::string_view payload);
  // The transport could not read the next frame (EOF, reset, malformed frame).
  absl::Status OnReadError(const absl::Status& s);
  // The handshake did not finish within `timeout`.
  absl::Status OnTimeout(absl::Duration timeout);
  // The backend refuses the authenticated peer (session rules, shutdown): records why.
  absl::Status Refuse(absl::Status why, Blame blame, bool send_close);

  bool has_hello() const { return has_peer_; }
  const Hello& hello() const { return hello_; }

 private:
  Hello hello_;
};

class ClientHandshake : public HandshakeSide {
 public:
  // `peer_addr` is where we connect: it names the peer until CHALLENGE does. With
  // `expect_peer`, a CHALLENGE from any other entity is refused (PERMISSION_DENIED).
  ClientHandshake(EntityName me, AuthConfig auth, std::string peer_addr,
                  WireMode mode = WireMode::kCrc,
                  std::optional<EntityName> expect_peer = std::nullopt);

  // The HELLO frame to write first (a fresh nonce).
  std::string HelloFrame();
  // CHALLENGE (or a CLOSE) arrived: checks the server's proof and returns the AUTH frame
  // to write, carrying `resume`'s cookie, in_seq and flags (its proof is filled in here).
  absl::StatusOr<std::string> OnChallenge(const FrameHeader& h, std::string_view payload,
                                          AuthReply resume);
  // READY (or a CLOSE) arrived. `want_ring`: a usable ring size is required.
  absl::StatusOr<Ready> OnReady(const FrameHeader& h, std::string_view payload, bool want_ring);
  absl::Status OnReadError(const absl::Status& s);
  absl::Status OnTimeout(absl::Duration timeout);

  // The server's name (from CHALLENGE); empty before.
  const EntityName& peer() const { return peer_; }

 private:
  const std::optional<EntityName> expect_peer_;
};

}  // namespace msgr::session

#endif  // MSGR_MSG_SESSION_HANDSHAKE_STEPS_H_

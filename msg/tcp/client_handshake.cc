// TcpConnection, connecting side: connect, HELLO -> CHALLENGE -> AUTH -> READY
// (msg/handshake.h), then the session is open. Lossless connections retry with
// exponential backoff; lossy ones reset on the first failure.
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "msg/tcp/error.h"
#include "msg/tcp/frame_io.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

void TcpConnection::StartConnect() {
  asio::post(strand_, [self = shared_from_this()] { self->DoConnect(); });
}

void TcpConnection::DoConnect() {
  if (reset_done_ || shared_->stopping) return;
  auto ep = ParseEndpoint(peer_addr());
  if (!ep.ok()) return Reset(ep.status(), false);
  CloseSocket();
  socket_ = std::make_shared<asio::ip::tcp::socket>(msgr_->io());
  const uint64_t gen = gen_;
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(msgr_->io());
  timer_->expires_after(absl::ToChronoNanoseconds(shared_->options.handshake_timeout));
  timer_->async_wait(
      asio::bind_executor(strand_, [self = shared_from_this(), gen](boost::system::error_code ec) {
        if (ec || gen != self->gen_ || self->open_) return;
        self->OnConnectFailed(absl::DeadlineExceededError(absl::StrCat(
                                  "handshake with ", self->PeerDesc(), " did not finish within ",
                                  absl::FormatDuration(self->shared_->options.handshake_timeout))),
                              false);
      }));
  socket_->async_connect(*ep, asio::bind_executor(strand_, [self = shared_from_this(),
                                                            gen](boost::system::error_code ec) {
    if (gen != self->gen_) return;
    if (ec) {
      return self->OnConnectFailed(
          ErrorToStatus(ec, absl::StrCat("connect to ", self->peer_addr())),
          ec == asio::error::connection_refused);
    }
    boost::system::error_code ignored;
    self->socket_->set_option(asio::ip::tcp::no_delay(true), ignored);
    self->SendHello(gen);
  }));
}

void TcpConnection::SendHello(uint64_t gen) {
  const AuthConfig& auth = shared_->options.auth;
  Hello h;
  h.name = shared_->options.name;
  h.features = kFeaturesSupported;
  h.auth = auth.mode == AuthConfig::Mode::kSecret ? AuthMode::kSecret : AuthMode::kNone;
  h.nonce = nonce_ = NewNonce();
  FrameHeader fh;
  fh.type = FrameType::kHello;
  AsyncWriteBytes(socket_, strand_, EncodeFrame(fh, EncodeHello(h)),
                  [self = shared_from_this(), gen](absl::Status s) {
                    if (gen != self->gen_) return;
                    if (!s.ok()) return self->OnConnectFailed(s, false);
                    AsyncReadFrame(self->socket_, self->strand_,
                                   [self, gen](absl::Status s, FrameHeader h, std::string p) {
                                     if (gen != self->gen_) return;
                                     if (!s.ok()) return self->OnConnectFailed(s, false);
                                     self->OnChallenge(gen, h, p);
                                   });
                  });
}

void TcpConnection::OnChallenge(uint64_t gen, const FrameHeader& fh, const std::string& payload) {
  const AuthConfig& auth = shared_->options.auth;
  const std::string addr = peer_addr();
  if (fh.type == FrameType::kClose) {
    shared_->counters.auth_failures++;
    return OnConnectFailed(absl::PermissionDeniedError(absl::StrCat(
                               "peer at ", addr, " refused the connection: ", payload)),
                           true);
  }
  if (fh.type != FrameType::kChallenge) {
    shared_->counters.protocol_errors++;
    return OnConnectFailed(
        absl::InvalidArgumentError(absl::StrCat("peer at ", addr, " sent ", FrameTypeName(fh.type),
                                                " where CHALLENGE was expected")),
        false);
  }
  auto c = DecodeChallenge(payload);
  if (!c.ok()) {
    shared_->counters.protocol_errors++;
    return OnConnectFailed(c.status(), false);
  }
  const EntityName me = shared_->options.name;
  const bool secret = auth.mode == AuthConfig::Mode::kSecret;
  absl::Status refuse;
  if (secret && c->auth != AuthMode::kSecret) {
    refuse = absl::UnauthenticatedError(absl::StrCat(
        c->name.ToString(), " at ", addr, " does not authenticate itself (no cluster key)"));
  } else if (!secret && c->auth == AuthMode::kSecret) {
    refuse = absl::UnauthenticatedError(
        absl::StrCat(c->name.ToString(), " at ", addr, " requires a cluster key and we have none"));
  } else if (secret &&
             !ProofEquals(c->proof, ServerProof(auth.secret, nonce_, c->nonce, me, c->name))) {
    refuse = absl::UnauthenticatedError(absl::StrCat(c->name.ToString(), " at ", addr,
                                                     " failed to prove it holds the cluster key"));
  }
  if (!refuse.ok()) {
    shared_->counters.auth_failures++;
    FrameHeader close;
    close.type = FrameType::kClose;
    AsyncWriteBytes(socket_, strand_, EncodeFrame(close, "authentication failed"),
                    [](absl::Status) {});
    return OnConnectFailed(refuse, true);
  }
  AuthReply a;
  if (secret) a.proof = ClientProof(auth.secret, nonce_, c->nonce, me, c->name);
  a.cookie = cookie_;
  a.in_seq = in_seq_.load();
  a.flags = (want_ring_ ? kAuthWantRing : 0) | (policy_.lossless ? kAuthLossless : 0) |
            (had_session_ ? kAuthHadSession : 0);
  const EntityName peer = c->name;
  FrameHeader ah;
  ah.type = FrameType::kAuth;
  AsyncWriteBytes(socket_, strand_, EncodeFrame(ah, EncodeAuth(a)),
                  [self = shared_from_this(), gen, peer](absl::Status s) {
                    if (gen != self->gen_) return;
                    if (!s.ok()) return self->OnConnectFailed(s, false);
                    AsyncReadFrame(self->socket_, self->strand_,
                                   [self, gen, peer](absl::Status s, FrameHeader h, std::string p) {
                                     if (gen != self->gen_) return;
                                     if (!s.ok()) return self->OnConnectFailed(s, false);
                                     self->hs_peer_ = peer;
                                     self->OnReady(gen, h, p);
                                   });
                  });
}

void TcpConnection::OnReady(uint64_t gen, const FrameHeader& fh, const std::string& payload) {
  const std::string who = absl::StrCat(hs_peer_.ToString(), " at ", peer_addr());
  if (fh.type == FrameType::kClose) {
    shared_->counters.auth_failures++;
    return OnConnectFailed(
        absl::PermissionDeniedError(absl::StrCat(who, " refused the connection: ", payload)), true);
  }
  if (fh.type != FrameType::kReady) {
    shared_->counters.protocol_errors++;
    return OnConnectFailed(absl::InvalidArgumentError(absl::StrCat(
                               who, " sent ", FrameTypeName(fh.type), " where READY was expected")),
                           false);
  }
  auto r = DecodeReady(payload);
  absl::Status bad = r.status();
  if (r.ok() && want_ring_ && !IsValidRingSize(r->ring_bytes)) {
    bad = absl::InvalidArgumentError(
        absl::StrCat(who, " offered an invalid ring of ", r->ring_bytes, " bytes"));
  }
  if (!bad.ok()) {
    shared_->counters.protocol_errors++;
    return OnConnectFailed(bad, false);
  }
  // A credit the server released after it encoded READY rides on READY's header (the
  // batch that carries it clears the server's dirty flag): take the newer of the two.
  if ((fh.flags & kFrameFlagCredit) != 0) r->ring_credit = std::max(r->ring_credit, fh.aux);
  if (timer_) timer_->cancel();
  OnEstablished(*r, hs_peer_);
}

void TcpConnection::OnConnectFailed(const absl::Status& why, bool refused_by_peer) {
  if (reset_done_ || shared_->stopping) return;
  CloseSocket();
  spdlog::warn("msgr tcp: connecting to {} failed: {}", peer_addr(), why.ToString());
  (void)refused_by_peer;  // every failed attempt is reported, whatever the cause
  shared_->dispatcher->OnConnectRefused(shared_from_this(), why);
  if (reset_done_) return;  // MarkDown from the callback
  if (!policy_.lossless) return Reset(why, false);
  ScheduleReconnect();
}

void TcpConnection::ScheduleReconnect() {
  const absl::Duration max = shared_->options.reconnect_backoff_max;
  backoff_ = backoff_ == absl::ZeroDuration() ? absl::Milliseconds(5) : backoff_ * 2;
  if (backoff_ > max) backoff_ = max;
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(msgr_->io());
  timer_->expires_after(absl::ToChronoNanoseconds(backoff_));
  timer_->async_wait(asio::bind_executor(
      strand_, [self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
        if (ec || gen != self->gen_) return;
        self->DoConnect();
      }));
}

}  // namespace msgr::tcp

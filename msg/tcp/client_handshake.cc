// TcpConnection, connecting side: connect, HELLO -> CHALLENGE -> AUTH -> READY (the steps
// are msg/session/handshake_steps.h, shared with the rdma backend), then the session is
// open. Lossless connections retry with
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
  hs_.emplace(shared_->options.name, shared_->options.auth, peer_addr(),
              WireModeOf(shared_->options), expect_peer_);
  AsyncWriteBytes(socket_, strand_, hs_->HelloFrame(),
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

bool TcpConnection::HandshakeFailed() {
  const session::HandshakeError& e = hs_->last_error();
  session::CountFailure(e, &shared_->counters);
  if (e.send_close) {
    AsyncWriteBytes(socket_, strand_, session::CloseFrame(e), [](absl::Status) {});
  }
  OnConnectFailed(e.why, e.blame == session::Blame::kAuth);
  return false;
}

void TcpConnection::OnChallenge(uint64_t gen, const FrameHeader& fh, const std::string& payload) {
  AuthReply resume;
  resume.cookie = cookie_;
  resume.instance = shared_->options.instance;
  resume.in_seq = in_seq_.load();
  resume.flags = (want_ring_ ? kAuthWantRing : 0) | (policy_.lossless ? kAuthLossless : 0) |
                 (had_session_ ? kAuthHadSession : 0);
  auto auth = hs_->OnChallenge(fh, payload, resume);
  if (!auth.ok()) {
    HandshakeFailed();
    return;
  }
  if (const auto& keys = hs_->secure_keys()) {
    // Secure: this attempt's keys. READY is the server's first sealed frame, our next
    // frame after it our first (the writer takes pending_tx_ in OnEstablished).
    auto rx = session::SecureStream::Create(keys->mode, keys->server_to_client);
    auto tx = session::SecureStream::Create(keys->mode, keys->client_to_server);
    if (!rx.ok() || !tx.ok()) return OnConnectFailed(rx.ok() ? tx.status() : rx.status(), false);
    rx_ = std::move(*rx);
    pending_tx_ = std::move(*tx);
    rx_header_bytes_ = kFrameHeaderBytes + session::kSecureTagBytes;
    rx_prefix_bytes_ = kRingPrefixBytes + session::kSecureTagBytes;
  }
  AsyncWriteBytes(socket_, strand_, *auth, [self = shared_from_this(), gen](absl::Status s) {
    if (gen != self->gen_) return;
    if (!s.ok()) return self->OnConnectFailed(s, false);
    auto on_ready = [self, gen](absl::Status s, FrameHeader h, std::string p) {
      if (gen != self->gen_) return;
      if (!s.ok()) {
        if (absl::IsDataLoss(s) && self->rx_) self->shared_->counters.secure_auth_failures++;
        return self->OnConnectFailed(s, false);
      }
      self->OnReady(gen, h, p);
    };
    if (self->rx_) {
      AsyncReadSealedFrame(self->socket_, self->strand_, self->rx_, on_ready);
    } else {
      AsyncReadFrame(self->socket_, self->strand_, on_ready);
    }
  });
}

void TcpConnection::OnReady(uint64_t gen, const FrameHeader& fh, const std::string& payload) {
  auto r = hs_->OnReady(fh, payload, want_ring_);
  if (!r.ok()) {
    HandshakeFailed();
    return;
  }
  // A credit the server released after it encoded READY rides on READY's header (the
  // batch that carries it clears the server's dirty flag): take the newer of the two.
  if ((fh.flags & kFrameFlagCredit) != 0) r->ring_credit = std::max(r->ring_credit, fh.aux);
  if (timer_) timer_->cancel();
  OnEstablished(*r, hs_->peer());
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
  if (!timer_) timer_ = std::make_unique<asio::steady_timer>(msgr_->io());
  timer_->expires_after(absl::ToChronoNanoseconds(backoff_.Next()));
  timer_->async_wait(asio::bind_executor(
      strand_, [self = shared_from_this(), gen = gen_](boost::system::error_code ec) {
        if (ec || gen != self->gen_) return;
        self->DoConnect();
      }));
}

}  // namespace msgr::tcp

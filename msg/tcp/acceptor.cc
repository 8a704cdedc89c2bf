// Accepting side: the listening socket and the server half of the handshake.
// A ServerHandshake owns a freshly accepted socket until the peer has authenticated;
// only then does the socket reach a session (TcpMessenger::AttachAccepted) and the
// Dispatcher hear about the peer. Every failure is logged with the peer's address and
// counted (protocol_errors, crc_errors, auth_failures).
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "msg/tcp/error.h"
#include "msg/tcp/frame_io.h"
#include "msg/tcp/tcp_connection.h"
#include "msg/tcp/tcp_messenger.h"

namespace msgr::tcp {

namespace asio = boost::asio;

namespace {
constexpr int kAcceptRetryMs = 100;
}  // namespace

class ServerHandshake : public std::enable_shared_from_this<ServerHandshake> {
 public:
  ServerHandshake(TcpMessenger* msgr, SocketPtr socket)
      : msgr_(msgr),
        shared_(msgr->shared()),
        socket_(std::move(socket)),
        strand_(asio::make_strand(msgr->io())),
        timer_(msgr->io()) {
    boost::system::error_code ec;
    auto ep = socket_->remote_endpoint(ec);
    peer_ = ec ? std::string("unknown peer") : EndpointToString(ep);
  }

  void Start() {
    asio::post(strand_, [self = shared_from_this()] { self->Begin(); });
  }

  // Shutdown (no worker running): drop the socket so pending handlers finish.
  void Abort() {
    boost::system::error_code ec;
    socket_->close(ec);
    timer_.cancel();
  }

 private:
  void Begin() {
    if (shared_->stopping) return;
    boost::system::error_code ec;
    socket_->set_option(asio::ip::tcp::no_delay(true), ec);
    timer_.expires_after(absl::ToChronoNanoseconds(shared_->options.handshake_timeout));
    timer_.async_wait(
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec) {
          if (ec || self->done_) return;
          self->Fail(absl::DeadlineExceededError(absl::StrCat(
                         "handshake did not finish within ",
                         absl::FormatDuration(self->shared_->options.handshake_timeout))),
                     Counter::kProtocol, false);
        }));
    AsyncReadFrame(socket_, strand_,
                   [self = shared_from_this()](absl::Status s, FrameHeader h, std::string p) {
                     self->OnHello(s, h, p);
                   });
  }

  enum class Counter { kNone, kProtocol, kAuth };

  void Fail(const absl::Status& why, Counter counter, bool send_close) {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    if (counter == Counter::kAuth) {
      shared_->counters.auth_failures++;
    } else if (absl::IsDataLoss(why)) {
      shared_->counters.crc_errors++;
    } else if (counter == Counter::kProtocol) {
      shared_->counters.protocol_errors++;
    }
    const std::string who = have_hello_ ? absl::StrCat(hello_.name.ToString(), " at ", peer_)
                                        : absl::StrCat("peer at ", peer_);
    if (counter == Counter::kNone) {
      spdlog::info("msgr tcp: handshake with {} ended: {}", who, why.ToString());
    } else {
      spdlog::warn("msgr tcp: refusing connection from {}: {}", who, why.ToString());
    }
    if (!send_close) {
      boost::system::error_code ec;
      socket_->close(ec);
      return;
    }
    FrameHeader h;
    h.type = FrameType::kClose;
    const std::string reason =
        counter == Counter::kAuth ? "authentication failed" : std::string(why.message());
    AsyncWriteBytes(socket_, strand_, EncodeFrame(h, reason), [socket = socket_](absl::Status) {
      boost::system::error_code ec;
      socket->close(ec);
    });
  }

  // A read failed before or during a frame: EOF between frames is a plain close.
  static Counter ReadFailureCounter(const absl::Status& s) {
    return absl::IsUnavailable(s) || absl::IsCancelled(s) ? Counter::kNone : Counter::kProtocol;
  }

  void OnHello(const absl::Status& s, const FrameHeader& fh, const std::string& payload) {
    if (done_ || shared_->stopping) return;
    if (!s.ok()) return Fail(s, ReadFailureCounter(s), false);
    if (fh.type != FrameType::kHello) {
      return Fail(absl::InvalidArgumentError(
                      absl::StrCat("expected HELLO, got ", FrameTypeName(fh.type), " frame")),
                  Counter::kProtocol, false);
    }
    auto h = DecodeHello(payload);
    if (!h.ok()) return Fail(h.status(), Counter::kProtocol, false);
    hello_ = *h;
    have_hello_ = true;
    const AuthConfig& auth = shared_->options.auth;
    const bool secret = auth.mode == AuthConfig::Mode::kSecret;
    if (secret && hello_.auth != AuthMode::kSecret) {
      return Fail(absl::UnauthenticatedError("peer has no cluster key (authentication required)"),
                  Counter::kAuth, true);
    }
    if (!secret && hello_.auth == AuthMode::kSecret) {
      return Fail(absl::UnauthenticatedError(
                      "peer wants to authenticate but this messenger has no cluster key"),
                  Counter::kAuth, true);
    }
    Challenge c;
    c.name = shared_->options.name;
    c.features = kFeaturesSupported;
    c.auth = secret ? AuthMode::kSecret : AuthMode::kNone;
    c.nonce = nonce_ = NewNonce();
    if (secret) c.proof = ServerProof(auth.secret, hello_.nonce, nonce_, hello_.name, c.name);
    FrameHeader ch;
    ch.type = FrameType::kChallenge;
    AsyncWriteBytes(socket_, strand_, EncodeFrame(ch, EncodeChallenge(c)),
                    [self = shared_from_this()](absl::Status s) {
                      if (self->done_ || self->shared_->stopping) return;
                      if (!s.ok()) return self->Fail(s, Counter::kNone, false);
                      AsyncReadFrame(self->socket_, self->strand_,
                                     [self](absl::Status s, FrameHeader h, std::string p) {
                                       self->OnAuth(s, h, p);
                                     });
                    });
  }

  void OnAuth(const absl::Status& s, const FrameHeader& fh, const std::string& payload) {
    if (done_ || shared_->stopping) return;
    if (!s.ok()) return Fail(s, ReadFailureCounter(s), false);
    if (fh.type == FrameType::kClose) {
      return Fail(absl::UnauthenticatedError(
                      absl::StrCat("peer refused our proof of the cluster key: ", payload)),
                  Counter::kAuth, false);
    }
    if (fh.type != FrameType::kAuth) {
      return Fail(absl::InvalidArgumentError(
                      absl::StrCat("expected AUTH, got ", FrameTypeName(fh.type), " frame")),
                  Counter::kProtocol, false);
    }
    auto a = DecodeAuth(payload);
    if (!a.ok()) return Fail(a.status(), Counter::kProtocol, false);
    const AuthConfig& auth = shared_->options.auth;
    if (auth.mode == AuthConfig::Mode::kSecret &&
        !ProofEquals(a->proof, ClientProof(auth.secret, hello_.nonce, nonce_, hello_.name,
                                           shared_->options.name))) {
      return Fail(absl::UnauthenticatedError("peer failed to prove it holds the cluster key"),
                  Counter::kAuth, true);
    }
    if (a->cookie == 0) {
      return Fail(absl::InvalidArgumentError("AUTH with a zero session cookie"), Counter::kProtocol,
                  false);
    }
    if (absl::Status st = msgr_->AttachAccepted(socket_, peer_, hello_, *a); !st.ok()) {
      if (absl::IsUnavailable(st)) return Fail(st, Counter::kNone, false);  // shutting down
      return Fail(st, Counter::kAuth, true);
    }
    done_ = true;
    timer_.cancel();
  }

  TcpMessenger* const msgr_;
  const std::shared_ptr<TcpShared> shared_;
  SocketPtr socket_;
  Strand strand_;
  asio::steady_timer timer_;
  std::string peer_;
  bool done_ = false;
  bool have_hello_ = false;
  Hello hello_;
  Nonce nonce_{};
};

void AbortHandshake(ServerHandshake* hs) { hs->Abort(); }

absl::StatusOr<std::string> TcpMessenger::Bind(const std::string& addr) {
  auto ep = ParseEndpoint(addr);
  if (!ep.ok()) return ep.status();
  absl::MutexLock l(&mu_);
  if (shut_down_) return absl::FailedPreconditionError("messenger is shut down");
  if (acceptor_) return absl::FailedPreconditionError("messenger is already bound");
  auto acc = std::make_unique<asio::ip::tcp::acceptor>(accept_strand_);
  boost::system::error_code ec;
  acc->open(ep->protocol(), ec);
  if (!ec) acc->set_option(asio::ip::tcp::acceptor::reuse_address(true), ec);
  if (!ec) acc->bind(*ep, ec);
  if (!ec) acc->listen(asio::socket_base::max_listen_connections, ec);
  if (ec) return ErrorToStatus(ec, absl::StrCat("bind/listen on ", addr));
  const std::string bound = EndpointToString(acc->local_endpoint(ec));
  acceptor_ = std::move(acc);
  asio::post(accept_strand_, [this] { StartAccept(); });
  spdlog::info("msgr tcp: {} listening on {}", shared_->options.name.ToString(), bound);
  return bound;
}

void TcpMessenger::StartAccept() {
  asio::ip::tcp::acceptor* acc;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_ || !acceptor_) return;
    acc = acceptor_.get();
  }
  auto socket = std::make_shared<asio::ip::tcp::socket>(shared_->io);
  acc->async_accept(
      *socket, asio::bind_executor(accept_strand_, [this, socket](boost::system::error_code ec) {
        if (shared_->stopping) return;
        if (ec) {
          // Out of descriptors (EMFILE/ENFILE) the listening socket stays readable and
          // accept fails at once: wait a little instead of spinning and flooding the log.
          spdlog::warn("msgr tcp: accept failed: {}; retrying in {} ms", ec.message(),
                       kAcceptRetryMs);
          auto t = std::make_shared<asio::steady_timer>(accept_strand_);
          t->expires_after(std::chrono::milliseconds(kAcceptRetryMs));
          // A weak reference: the io_context (in TcpShared) holds this handler until it
          // runs, and a strong one would keep TcpShared alive through its own io_context.
          t->async_wait([this, t, weak = std::weak_ptr<TcpShared>(shared_)](
                            boost::system::error_code) {
            auto shared = weak.lock();
            if (shared && !shared->stopping) StartAccept();  // set before `this` goes
          });
          return;
        }
        auto hs = std::make_shared<ServerHandshake>(this, socket);
        TrackHandshake(hs);
        hs->Start();
        StartAccept();
      }));
}

}  // namespace msgr::tcp

// Accepting side: the listening socket and the server half of the handshake.
// A ServerHandshake owns a freshly accepted socket until the peer has authenticated;
// only then does the socket reach a session (TcpMessenger::AttachAccepted) and the
// Dispatcher hear about the peer. The steps themselves are msg/session/handshake_steps.h
// (shared with the rdma backend); this file reads and writes their frames. Every failure
// is logged with the peer's address and counted (protocol_errors, crc_errors,
// auth_failures).
#include <spdlog/spdlog.h>

#include <boost/asio/bind_executor.hpp>
#include <boost/asio/steady_timer.hpp>

#include "absl/strings/str_cat.h"
#include "msg/session/handshake_steps.h"
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
        timer_(msgr->io()),
        hs_(shared_->options.name, shared_->options.auth, PeerOf(*socket_),
            WireModeOf(shared_->options)) {}

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
  static std::string PeerOf(const asio::ip::tcp::socket& s) {
    boost::system::error_code ec;
    auto ep = s.remote_endpoint(ec);
    return ec ? std::string("unknown peer") : EndpointToString(ep);
  }

  void Begin() {
    if (shared_->stopping) return;
    boost::system::error_code ec;
    socket_->set_option(asio::ip::tcp::no_delay(true), ec);
    timer_.expires_after(absl::ToChronoNanoseconds(shared_->options.handshake_timeout));
    timer_.async_wait(
        asio::bind_executor(strand_, [self = shared_from_this()](boost::system::error_code ec) {
          if (ec || self->done_) return;
          (void)self->hs_.OnTimeout(self->shared_->options.handshake_timeout);
          self->Fail();
        }));
    ReadNext(&ServerHandshake::OnHello);
  }

  void ReadNext(void (ServerHandshake::*step)(const FrameHeader&, const std::string&)) {
    AsyncReadFrame(socket_, strand_,
                   [self = shared_from_this(), step](absl::Status s, FrameHeader h, std::string p) {
                     if (self->done_ || self->shared_->stopping) return;
                     if (!s.ok()) {
                       (void)self->hs_.OnReadError(s);
                       return self->Fail();
                     }
                     ((*self).*step)(h, p);
                   });
  }

  // Ends the attempt as hs_.last_error() says: counted, logged, CLOSE first if due.
  void Fail() {
    if (done_) return;
    done_ = true;
    timer_.cancel();
    const session::HandshakeError& e = hs_.last_error();
    session::CountFailure(e, &shared_->counters);
    if (e.blame == session::Blame::kNone && !e.send_close) {
      spdlog::info("msgr tcp: handshake with {} ended: {}", hs_.who(), e.why.ToString());
    } else {
      spdlog::warn("msgr tcp: refusing connection from {}: {}", hs_.who(), e.why.ToString());
    }
    if (!e.send_close) {
      boost::system::error_code ec;
      socket_->close(ec);
      return;
    }
    AsyncWriteBytes(socket_, strand_, session::CloseFrame(e), [socket = socket_](absl::Status) {
      boost::system::error_code ec;
      socket->close(ec);
    });
  }

  void OnHello(const FrameHeader& fh, const std::string& payload) {
    auto challenge = hs_.OnHello(fh, payload);
    if (!challenge.ok()) return Fail();
    AsyncWriteBytes(socket_, strand_, *challenge, [self = shared_from_this()](absl::Status s) {
      if (self->done_ || self->shared_->stopping) return;
      if (!s.ok()) {
        (void)self->hs_.OnReadError(s);
        return self->Fail();
      }
      self->ReadNext(&ServerHandshake::OnAuth);
    });
  }

  void OnAuth(const FrameHeader& fh, const std::string& payload) {
    auto auth = hs_.OnAuth(fh, payload);
    if (!auth.ok()) return Fail();
    if (absl::Status fenced = shared_->fence.Check(hs_.hello().name, auth->instance);
        !fenced.ok()) {
      shared_->counters.fenced_refusals++;
      (void)hs_.Refuse(fenced, session::Blame::kNone, /*send_close=*/true);
      return Fail();
    }
    if (absl::Status st = msgr_->AttachAccepted(socket_, PeerOf(*socket_), hs_.hello(), *auth,
                                                 hs_.secure_keys());
        !st.ok()) {
      // Unavailable: shutting down, not the peer's fault. Else a session rule refused it.
      const bool shutdown = absl::IsUnavailable(st);
      (void)hs_.Refuse(st, shutdown ? session::Blame::kNone : session::Blame::kAuth, !shutdown);
      return Fail();
    }
    done_ = true;
    timer_.cancel();
  }

  TcpMessenger* const msgr_;
  const std::shared_ptr<TcpShared> shared_;
  SocketPtr socket_;
  Strand strand_;
  asio::steady_timer timer_;
  session::ServerHandshake hs_;
  bool done_ = false;
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

#include "msg/tcp/tcp_messenger.h"

#include <poll.h>
#include <pthread.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <boost/asio/post.hpp>

#include "absl/strings/str_cat.h"
#include "msg/ring/ring.h"
#include "msg/tcp/error.h"
#include "msg/tcp/tcp_connection.h"

namespace msgr::tcp {

namespace asio = boost::asio;

// The longest WaitFor blocks in one go (an infinite timeout would overflow Asio's clock).
constexpr absl::Duration kMaxDrivenWait = absl::Hours(1);
// How long Shutdown waits, in all, for the CLOSEs of its goodbye to leave.
constexpr absl::Duration kGoodbyeWait = absl::Milliseconds(200);

class ServerHandshake;
void AbortHandshake(ServerHandshake* hs);  // acceptor.cc


absl::StatusOr<std::unique_ptr<Messenger>> TcpMessenger::Create(const MessengerOptions& options,
                                                                Dispatcher* dispatcher) {
  if (dispatcher == nullptr) return absl::InvalidArgumentError("dispatcher must not be null");
  if (options.worker_threads < 0) {
    return absl::InvalidArgumentError(
        "worker_threads must be at least 0 (0: the owner's thread drives the messenger)");
  }
  if (!IsValidRingSize(options.ring_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("ring_bytes ", options.ring_bytes,
                                                   " must be a power of two >= ", kMinRingBytes));
  }
  if (options.max_message_bytes < 4096) {
    return absl::InvalidArgumentError("max_message_bytes must be at least 4096");
  }
  auto shared = std::make_shared<TcpShared>();
  shared->options = options;
  shared->dispatcher = dispatcher;
  return std::unique_ptr<Messenger>(new TcpMessenger(std::move(shared)));
}

TcpMessenger::TcpMessenger(std::shared_ptr<TcpShared> shared)
    : shared_(std::move(shared)),
      work_(asio::make_work_guard(shared_->io)),
      accept_strand_(asio::make_strand(shared_->io)),
      driven_(shared_->options.worker_threads == 0) {
  for (int i = 0; i < shared_->options.worker_threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "ms-tcp-io");
      shared_->io.run();
    });
  }
}

TcpMessenger::~TcpMessenger() { Shutdown(); }

bool TcpMessenger::Poll() {
  if (!driven_) return false;
  absl::MutexLock l(&drive_mu_);
  if (drive_stopped_) return false;
  return shared_->io.poll() > 0;
}

void TcpMessenger::WaitFor(int fd, absl::Duration timeout) {
  if (!driven_) return Messenger::WaitFor(fd, timeout);
  {
    absl::MutexLock l(&drive_mu_);
    if (!drive_stopped_) {
      if (wait_source_fd_ != fd) {
        wait_desc_.reset();  // cancels a pending wait (its handler runs on a later poll)
        wait_armed_ = false;
        const int copy = dup(fd);
        if (copy < 0) {
          spdlog::error("msgr tcp: dup of a wait fd failed: {}", std::strerror(errno));
        } else {
          wait_desc_ = std::make_unique<asio::posix::stream_descriptor>(shared_->io, copy);
          wait_source_fd_ = fd;
        }
      }
      // Until `fd` is readable, a frame arrived (records, acks, messages: what the caller
      // waits for), the messenger stopped, or the time is up; a handler that only ran a
      // timer or finished a write (a flow timer fires 200 us after most reads) waits again
      // here instead of costing the caller a pass and another sleep.
      const uint64_t frames = shared_->frames_in.load(std::memory_order_relaxed);
      const absl::Time deadline = absl::Now() + std::min(timeout, kMaxDrivenWait);
      while (wait_desc_) {
        if (!wait_armed_) {
          wait_armed_ = true;
          wait_desc_->async_wait(asio::posix::stream_descriptor::wait_read,
                                 [this](const boost::system::error_code&) { wait_armed_ = false; });
        }
        // `fd` readable before the wait was armed: its edge may have gone by unwatched.
        pollfd p{fd, POLLIN, 0};
        if (poll(&p, 1, 0) != 0) break;
        const absl::Duration left = deadline - absl::Now();
        if (left <= absl::ZeroDuration()) break;
        shared_->io.run_one_for(absl::ToChronoMicroseconds(left));
        if (shared_->io.stopped() || !wait_armed_ ||
            shared_->frames_in.load(std::memory_order_relaxed) != frames) {
          break;
        }
      }
      if (wait_desc_) return;
    }
  }
  Messenger::WaitFor(fd, timeout);  // stopped: no io_context to run
}

absl::StatusOr<ConnectionRef> TcpMessenger::Connect(const std::string& addr,
                                                    const ConnectOptions& options) {
  auto ep = ParseEndpoint(addr);
  if (!ep.ok()) return ep.status();
  std::shared_ptr<TcpConnection> conn;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return absl::FailedPreconditionError("messenger is shut down");
    if (auto open = sessions_.Outgoing(addr)) return ConnectionRef(open);
    conn = std::make_shared<TcpConnection>(this, TcpConnection::Side::kClient, options.policy, addr,
                                           options.want_ring, NewCookie());
    conn->set_expected_peer(options.peer);
    sessions_.InsertOutgoing(addr, conn);
    all_.Add(conn);
  }
  conn->StartConnect();
  return ConnectionRef(conn);
}

void TcpMessenger::SetPolicy(EntityType type, Policy policy) {
  absl::MutexLock l(&mu_);
  policies_[type] = policy;
}

Policy TcpMessenger::PolicyFor(EntityType type) const {
  absl::MutexLock l(&mu_);
  auto it = policies_.find(type);
  if (it != policies_.end()) return it->second;
  // Sessions are lossless unless the owner set a policy for this peer type.
  return Policy::Lossless();
}

absl::Status TcpMessenger::AttachAccepted(std::shared_ptr<asio::ip::tcp::socket> socket,
                                          const std::string& peer_addr, const Hello& hello,
                                          const AuthReply& auth,
                                          const std::optional<session::SecureKeys>& keys) {
  const Policy policy = PolicyFor(hello.name.type);
  const bool want_ring = (auth.flags & kAuthWantRing) != 0;
  std::shared_ptr<TcpConnection> conn;
  std::vector<std::shared_ptr<TcpConnection>> replaced;
  bool new_session = false;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return absl::UnavailableError("messenger is shutting down");
    // msg/session/session_table.h: resume, or a new session that replaces the peer's
    // unlinked ones.
    auto admitted = sessions_.Admit(session::SessionRequest{
        hello.name, auth.cookie, policy.lossless, (auth.flags & kAuthHadSession) != 0});
    if (!admitted.ok()) return admitted.status();
    replaced = std::move(admitted->replaced);
    conn = std::move(admitted->resume);
    if (conn == nullptr) {
      conn = std::make_shared<TcpConnection>(this, TcpConnection::Side::kServer, policy, peer_addr,
                                             want_ring, auth.cookie, hello.name);
      new_session = true;
      sessions_.Insert(conn);
      all_.Add(conn);
    }
  }
  for (auto& s : replaced) s->ResetAsync(session::ReplacedError(hello.name, peer_addr));
  if (new_session) conn->set_peer_instance(auth.instance);
  // Fenced after the acceptor checked and before SetFenced's sweep could see the session.
  if (absl::Status fenced = shared_->fence.Check(hello.name, auth.instance); !fenced.ok()) {
    shared_->counters.fenced_refusals++;
    conn->ResetAsync(fenced);
    return fenced;
  }
  conn->Attach(std::move(socket), peer_addr, hello, auth, new_session, keys);
  return absl::OkStatus();
}

void TcpMessenger::SetFenced(std::vector<FencedPeer> fenced) {
  std::vector<std::shared_ptr<TcpConnection>> accepted;
  {
    absl::MutexLock l(&mu_);
    accepted = sessions_.Accepted();
  }
  shared_->counters.fenced_sessions_closed += shared_->fence.SetAndSweep(
      std::move(fenced), accepted, "tcp",
      [](const std::shared_ptr<TcpConnection>& c, const absl::Status& why) {
        c->ResetAndWait(why);
      });
}

void TcpMessenger::Forget(const TcpConnection* conn) {
  absl::MutexLock l(&mu_);
  sessions_.Erase(conn);
}

std::vector<SessionInfo> TcpMessenger::DumpSessions() const {
  std::vector<std::shared_ptr<TcpConnection>> conns;  // copied under the lock: session::InfoOf
  {
    absl::MutexLock l(&mu_);
    conns = sessions_.All();
  }
  return session::InfoOf(conns);
}

void TcpMessenger::TrackHandshake(std::weak_ptr<ServerHandshake> hs) {
  absl::MutexLock l(&mu_);
  handshakes_.Add(std::move(hs));
}

void TcpMessenger::SayGoodbye(const std::vector<std::shared_ptr<TcpConnection>>& conns) {
  std::vector<std::shared_ptr<TcpConnection>> leaving;
  for (const auto& c : conns) {
    if (c->side() == TcpConnection::Side::kClient && c->lossless() && c->is_connected()) {
      c->SayGoodbye();
      leaving.push_back(c);
    }
  }
  // The strands write the CLOSEs; give them a moment before the io threads stop.
  const absl::Time until = absl::Now() + kGoodbyeWait;
  for (const auto& c : leaving) {
    while (c->is_connected() && absl::Now() < until) absl::SleepFor(absl::Microseconds(200));
  }
}

void TcpMessenger::Shutdown() {
  std::vector<std::shared_ptr<TcpConnection>> conns;
  std::vector<std::shared_ptr<ServerHandshake>> hss;
  {
    absl::MutexLock l(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
    shared_->stopping = true;
    for (auto& w : all_.items) {
      if (auto c = w.lock()) conns.push_back(std::move(c));
    }
    for (auto& w : handshakes_.items) {
      if (auto h = w.lock()) hss.push_back(std::move(h));
    }
  }
  SayGoodbye(conns);
  for (auto& c : conns) c->Stop();
  // No callbacks after this returns: stop the workers, then tear down I/O objects
  // with no thread running, then run the cancelled handlers so they drop their refs.
  work_.reset();
  shared_->io.stop();
  {
    // A driving thread leaves the stopped io_context at once, and does not enter it again.
    absl::MutexLock l(&drive_mu_);
    drive_stopped_ = true;
  }
  for (auto& t : threads_) {
    if (t.get_id() == std::this_thread::get_id()) {
      spdlog::error("msgr tcp: Shutdown called from a worker thread; detaching it");
      t.detach();
    } else if (t.joinable()) {
      t.join();
    }
  }
  threads_.clear();
  {
    absl::MutexLock l(&mu_);
    if (acceptor_) {
      boost::system::error_code ec;
      acceptor_->close(ec);
    }
  }
  wait_desc_.reset();
  for (auto& c : conns) c->DestroyIo();
  for (auto& h : hss) AbortHandshake(h.get());
  hss.clear();
  shared_->io.restart();
  shared_->io.poll();
  {
    absl::MutexLock l(&mu_);
    acceptor_.reset();
    sessions_.Clear();
    all_.items.clear();
    handshakes_.items.clear();
  }
  shared_->io.poll();
}

namespace {
const bool kRegistered = [] {
  RegisterMessengerBackend("tcp", &TcpMessenger::Create);
  return true;
}();
}  // namespace

}  // namespace msgr::tcp

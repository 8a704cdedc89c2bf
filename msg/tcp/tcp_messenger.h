// TcpMessenger: the "tcp" messenger backend (Boost.Asio). One io_context driven by
// `worker_threads` threads, or, with 0 of them, by the owner's thread through Poll and
// WaitFor (driven mode, messenger.h); every connection runs its socket, timers and
// Dispatcher callbacks on its own strand, so callbacks for one connection are serialized.
//
// Layout of the backend (one topic per file):
//   tcp_messenger.cc     this class: workers, Connect, session table, counters, Shutdown
//   acceptor.cc          listening socket and the server half of the handshake
//   client_handshake.cc  connecting, the client half of the handshake, reconnect backoff
//   connection.cc        TcpConnection public API and its state machine (faults, resets)
//   reader.cc / writer.cc  the data path of an open connection
//
// Thread-safety: every public method may be called from any thread (see messenger.h).
#ifndef MSGR_MSG_TCP_TCP_MESSENGER_H_
#define MSGR_MSG_TCP_TCP_MESSENGER_H_

#include <algorithm>
#include <atomic>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/strand.hpp>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "msg/handshake.h"
#include "msg/messenger_counters.h"
#include "msg/messenger.h"
#include "msg/session/fence.h"
#include "msg/session/secure_mode.h"
#include "msg/session/session_table.h"

namespace msgr::tcp {

class TcpConnection;

// All of the TCP backend's counters are the common ones (Snapshot() gives the view).
using TcpCounters = LiveMessengerCounters;

// State shared by the messenger and its connections; connections hold it by shared_ptr
// so that a ConnectionRef kept after the messenger is gone never dangles.
struct TcpShared {
  // Owned here so that it outlives every connection's strand and socket.
  boost::asio::io_context io;
  MessengerOptions options;
  Dispatcher* dispatcher = nullptr;
  TcpCounters counters;
  std::atomic<uint64_t> bytes_in_flight{0};  // over all connections (flow control)
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> frames_in{0};  // frames read (a driven WaitFor's "something came")
  session::FenceSet fence;  // peers whose handshakes are refused (SetFenced)
};

class TcpMessenger : public Messenger {
 public:
  static absl::StatusOr<std::unique_ptr<Messenger>> Create(const MessengerOptions& options,
                                                           Dispatcher* dispatcher);
  ~TcpMessenger() override;

  absl::StatusOr<std::string> Bind(const std::string& addr) override;
  absl::StatusOr<ConnectionRef> Connect(const std::string& addr,
                                        const ConnectOptions& options) override;
  void SetPolicy(EntityType type, Policy policy) override;
  MessengerCounters counters() const override { return shared_->counters.Snapshot(); }
  const MessengerOptions& options() const override { return shared_->options; }
  std::vector<SessionInfo> DumpSessions() const override;
  void SetFenced(std::vector<FencedPeer> fenced) override;
  void Shutdown() override;
  bool driven() const override { return driven_; }
  bool Poll() override;
  void WaitFor(int fd, absl::Duration timeout) override;

  // --- backend internals (acceptor, handshake, connections) ---
  boost::asio::io_context& io() { return shared_->io; }
  const std::shared_ptr<TcpShared>& shared() const { return shared_; }
  Policy PolicyFor(EntityType type) const;

  // Server side, after a peer passed authentication: finds the lossless session named by
  // `auth.cookie` or creates a new one, and hands it the socket. Thread-safe. An error (a
  // resume under another name than the session's; shutdown) leaves the socket to the caller.
  // `keys`: secure mode's keys from the handshake (empty in crc mode).
  absl::Status AttachAccepted(std::shared_ptr<boost::asio::ip::tcp::socket> socket,
                              const std::string& peer_addr, const Hello& hello,
                              const AuthReply& auth,
                              const std::optional<session::SecureKeys>& keys);
  // A connection is gone for good: drop it from the tables. Thread-safe.
  void Forget(const TcpConnection* conn);
  // The acceptor tracks handshakes in progress so Shutdown can close them.
  void TrackHandshake(std::weak_ptr<class ServerHandshake> hs);

 private:
  // Shutdown's goodbye: the open lossless sessions we opened end with a CLOSE.
  void SayGoodbye(const std::vector<std::shared_ptr<TcpConnection>>& conns);
  explicit TcpMessenger(std::shared_ptr<TcpShared> shared);
  void StartAccept();

  std::shared_ptr<TcpShared> shared_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> work_;
  boost::asio::strand<boost::asio::io_context::executor_type> accept_strand_;
  std::vector<std::thread> threads_;

  // Driven mode (worker_threads 0). The driving thread runs the io_context under drive_mu_;
  // Shutdown stops the io_context, then takes drive_mu_ to end the driving for good (it
  // tears the sockets down with no thread inside the io_context).
  const bool driven_;
  absl::Mutex drive_mu_;
  bool drive_stopped_ ABSL_GUARDED_BY(drive_mu_) = false;
  // WaitFor's `fd` (a dup of it) watched by the io_context; the driving thread only.
  std::unique_ptr<boost::asio::posix::stream_descriptor> wait_desc_;
  int wait_source_fd_ = -1;
  bool wait_armed_ = false;  // an async_wait on wait_desc_ is pending

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::unique_ptr<boost::asio::ip::tcp::acceptor> acceptor_ ABSL_GUARDED_BY(mu_);
  std::map<EntityType, Policy> policies_ ABSL_GUARDED_BY(mu_);
  // Our sessions by peer address and the accepted ones (msg/session/session_table.h).
  session::SessionTable<TcpConnection> sessions_ ABSL_GUARDED_BY(mu_);
  // Every connection and handshake made (expired entries pruned as the lists grow), for
  // Shutdown. A weak_ptr to a make_shared object keeps its memory: pruning bounds that.
  template <typename T>
  struct WeakList {
    std::vector<std::weak_ptr<T>> items;
    size_t prune_at = 64;
    // Drops expired entries once the list has doubled since the last prune: amortised
    // O(1) per Add, at most twice the live entries kept.
    void Add(std::weak_ptr<T> w) {
      if (items.size() >= prune_at) {
        items.erase(std::remove_if(items.begin(), items.end(),
                                   [](const std::weak_ptr<T>& e) { return e.expired(); }),
                    items.end());
        prune_at = std::max<size_t>(64, 2 * items.size());
      }
      items.push_back(std::move(w));
    }
  };
  WeakList<TcpConnection> all_ ABSL_GUARDED_BY(mu_);
  WeakList<class ServerHandshake> handshakes_ ABSL_GUARDED_BY(mu_);

  friend class Acceptor;
};

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_TCP_MESSENGER_H_

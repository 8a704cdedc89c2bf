// RdmaMessenger: the "rdma" messenger backend (msg/messenger.h), one code path over both
// verbs providers (msg/rdma/verbs/device.h). The device comes from
// MessengerOptions::backend_options["rdma_device"] ("soft", an ibverbs device name such as
// "rxe0", or ""/absent = auto); the environment variable MSGR_RDMA_DEVICE overrides it.
// Other backend options (all optional): "rdma_recv_buffers", "rdma_buffer_bytes",
// "rdma_send_buffers", "rdma_sq_depth", "rdma_signal_every", "rdma_cq_spin_us" (the
// completion thread's longest spin after work, default 20), "rdma_cq_spin_adaptive" (1:
// spin only while it pays, event_loop.h, the default of OSDs; 0: always the full spin, the
// default of clients),
// "rdma_shared_loop" (1, default: one completion thread for every messenger of the process
// with the same spin settings; 0: a thread of its own),
// "rdma_app_poll_window_us", "rdma_zero_copy_min_bytes", "rdma_max_registered_mb" (the
// registered-memory budget, registered_budget.h), "rdma_cutoff_ban_s" (how long a peer
// cut off for an access outside its memory is refused, default 60),
// "rdma_record_buffer_cache_mb" (AllocRecordBuffer's buffers kept registered for reuse,
// default 64; record_buffer_pool.h).
//
// Layout (one topic per file):
//   rdma_messenger.cc          this class: device, listener, sessions, Connect, Shutdown
//   rdma_connection*.cc        sessions: API and faults / setup
//   rdma_datapath.cc           completions and messages
//   rdma_record_writer.cc      client: ring records; rdma_ring_owner.cc: OSD: the ring
//   record_buffer_pool.*       AllocRecordBuffer's registered buffers
//   transport.*                verbs resources of one QP incarnation
//   event_loop.*               the completion thread
//   side_channel.*             TCP side channel (handshake, setup, liveness)
//   rdma_wire.*, rdma_recv_ring.*
//
// Thread-safety: every public method may be called from any thread (see messenger.h).
#ifndef MSGR_MSG_RDMA_RDMA_MESSENGER_H_
#define MSGR_MSG_RDMA_RDMA_MESSENGER_H_

#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "msg/messenger.h"
#include "msg/rdma/event_loop.h"
#include "msg/rdma/rdma_connection.h"
#include "msg/rdma/rdma_shared.h"
#include "msg/rdma/side_channel.h"
#include "msg/session/handshake_steps.h"
#include "msg/session/session_table.h"

namespace msgr::rdma {

class RdmaMessenger : public Messenger {
 public:
  static absl::StatusOr<std::unique_ptr<Messenger>> Create(const MessengerOptions& options,
                                                           Dispatcher* dispatcher);
  ~RdmaMessenger() override;

  absl::StatusOr<std::string> Bind(const std::string& addr) override;
  absl::StatusOr<ConnectionRef> Connect(const std::string& addr,
                                        const ConnectOptions& options) override;
  void SetPolicy(EntityType type, Policy policy) override;
  bool Poll() override;
  RecordBufferRef AllocRecordBuffer(size_t size) override { return shared_->buffers->Alloc(size); }
  size_t zero_copy_min_bytes() const override { return shared_->zero_copy_min_bytes; }
  MessengerCounters counters() const override {
    return shared_->counters.LiveMessengerCounters::Snapshot();
  }
  std::vector<CounterGroup> perf_counters() const override {
    return {counters().Group("messenger"), stats().Group("rdma")};
  }
  const MessengerOptions& options() const override { return shared_->options; }
  std::vector<SessionInfo> DumpSessions() const override;
  void SetFenced(std::vector<FencedPeer> fenced) override;
  void Shutdown() override;

  RdmaStats stats() const { return shared_->Stats(); }
  const std::string& device_name() const;

  // A session that ended for good leaves the table (from RdmaConnection::Reset).
  void ForgetSession(const RdmaConnection* conn);

 private:
  explicit RdmaMessenger(std::shared_ptr<RdmaShared> shared) : shared_(std::move(shared)) {}
  void AcceptLoop();

  // One accepted side channel until its session is set up: the server half of the
  // handshake (HELLO -> CHALLENGE; AUTH -> admission, READY; the client's setup -> the
  // server's; the client's "ready" -> the link) as a state machine on the completion
  // thread, fed the channel's frames as they arrive. No thread waits for a slow or silent
  // peer; the loop's tick ends an attempt past handshake_timeout. Loop thread only.
  class Accepting : public LoopClient {
   public:
    Accepting(RdmaMessenger* m, std::unique_ptr<SideChannel> ch);
    verbs::CompletionQueue* loop_cq() override { return nullptr; }
    int loop_side_fd() override { return fd_; }
    bool OnCompletions(const verbs::Completion*, int) override { return false; }
    void OnCqError() override {}
    void OnSideReadable() override;
    // Ends the attempt if it is past its deadline; true when it is over.
    bool Expire(absl::Time now);
    const std::string& peer() const { return peer_; }

   private:
    enum class Step { kHello, kAuth, kSetup, kReady, kDone };
    // AUTH arrived: checks, admission (msg/session/session_table.h), READY. False: over.
    bool OnAuth(const DecodedFrame& f);
    // The handshake failed as hs_.last_error() says: counted, CLOSE if due, logged.
    void FailHandshake();
    // Leaves the loop and the messenger's list (the channel closes with this object,
    // unless the link took it).
    void Done();

    RdmaMessenger* const m_;
    std::unique_ptr<SideChannel> ch_;
    const int fd_;
    const std::string peer_;
    const absl::Time deadline_;
    session::ServerHandshake hs_;
    Step step_ = Step::kHello;
    std::shared_ptr<RdmaConnection> conn_;  // from AUTH on
    RdmaConnection::AcceptState st_;
  };
  // Handshakes in progress (the loop holds them too).
  std::map<const Accepting*, std::shared_ptr<Accepting>> accepting_ ABSL_GUARDED_BY(mu_);
  // Loop-thread tick: ends lossless sessions whose peer did not come back in time.
  void ExpireSessions();
  // Loop thread: the device's asynchronous events (a QP event goes to its connection).
  void OnAsyncEvents();
  void HandleAsyncEvent(const verbs::AsyncEvent& ev);
  // Hands a QP event to the connection that owns the QP; false if none does (yet).
  bool DeliverQpEvent(const verbs::AsyncEvent& ev);
  // QP events no connection claimed yet, retried on every event drain and tick for
  // kUnmatchedQpEventTtl (the session may still be in setup).
  void RetryUnmatchedQpEvents();
  static constexpr absl::Duration kUnmatchedQpEventTtl = absl::Seconds(3);
  absl::Mutex unmatched_mu_;
  std::vector<std::pair<absl::Time, verbs::AsyncEvent>> unmatched_
      ABSL_GUARDED_BY(unmatched_mu_);
  bool device_failed_ = false;  // loop thread only

  std::shared_ptr<RdmaShared> shared_;
  std::unique_ptr<Listener> listener_;
  std::thread accept_thread_;

  mutable absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
  std::map<EntityType, Policy> policies_ ABSL_GUARDED_BY(mu_);
  // Our sessions by peer address and the accepted ones (msg/session/session_table.h).
  session::SessionTable<RdmaConnection> sessions_ ABSL_GUARDED_BY(mu_);
  // The outgoing sessions as an immutable snapshot, replaced under mu_ when they
  // change: Poll() reads it with std::atomic_load, without mu_ and without allocating
  // (callers spin on Poll()).
  using ConnList = std::vector<std::shared_ptr<RdmaConnection>>;
  std::shared_ptr<const ConnList> poll_list_ = std::make_shared<ConnList>();
  void RepublishPollListLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_MESSENGER_H_

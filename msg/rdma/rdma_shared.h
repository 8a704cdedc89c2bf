// State shared by an RdmaMessenger and its connections (connections hold it by shared_ptr,
// so a ConnectionRef kept after the messenger is gone never dangles), the counters, and the
// per-connection ordered dispatch workers.
//
// Thread-safety: counters are atomics; Workers is thread-safe; the rest is immutable after
// the messenger's Create except `stopping`.
#ifndef MSGR_MSG_RDMA_RDMA_SHARED_H_
#define MSGR_MSG_RDMA_RDMA_SHARED_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/optimization.h"
#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "msg/messenger.h"
#include "msg/messenger_counters.h"
#include "msg/rdma/rdma_stats.h"
#include "msg/rdma/record_buffer_pool.h"
#include "msg/rdma/registered_budget.h"
#include "msg/session/fence.h"
#include "msg/rdma/ring_notifier.h"
#include "msg/rdma/transport.h"

namespace msgr::rdma {

class EventLoop;
class RdmaConnection;

// How long a retired link's transport (its QP, in ERROR) is kept before it is destroyed:
// destroying a QP discards its unread asynchronous events (QP_ACCESS_ERR may be queued
// just after the flushed completions that retired the link).
inline constexpr absl::Duration kRetiredTransportLinger = absl::Seconds(1);

// The RDMA counters, live (the registered-memory ones stay 0 here: RdmaShared::budget
// counts them, RdmaShared::Stats() fills them in).
MSGR_COUNTER_LIVE(LiveRdmaCounters, RdmaStats, MSGR_RDMA_COUNTERS);

// The common counters plus what only the RDMA backend counts.
struct RdmaCounters : LiveMessengerCounters, LiveRdmaCounters {};

// Runs closures in order per key (connection) on a few threads.
class Workers {
 public:
  // `name`: the threads' name (a string literal; at most 15 characters).
  explicit Workers(int threads, const char* name = "ms-rdma-disp");
  ~Workers();  // Stop()
  void Post(uint64_t key, std::function<void()> fn);
  // Drops queued work and joins the threads. Idempotent.
  void Stop();

 private:
  struct Queue {
    absl::Mutex mu;
    absl::CondVar cv;
    std::deque<std::function<void()>> q ABSL_GUARDED_BY(mu);
    bool stop ABSL_GUARDED_BY(mu) = false;
  };
  void Run(Queue* q);
  std::vector<std::unique_ptr<Queue>> queues_;
  std::vector<std::thread> threads_;
};

struct RdmaShared {
  MessengerOptions options;
  session::FenceSet fence;  // peers whose handshakes are refused (SetFenced)
  Dispatcher* dispatcher = nullptr;
  RdmaCounters counters;
  std::shared_ptr<DeviceContext> ctx;
  TransportConfig transport;
  // Every registration is charged here first ("rdma_max_registered_mb").
  std::shared_ptr<RegisteredBudget> budget = RegisteredBudget::Create(kDefaultMaxRegisteredBytes);
  RdmaStats Stats() const;
  absl::Duration cq_spin = absl::Microseconds(20);
  // The device is the soft provider: its RDMA WRITEs are memcpys by the posting CPU.
  bool soft_device = false;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> bytes_in_flight{0};
  std::unique_ptr<Workers> workers;
  // One thread for the last step of connecting (RdmaConnection::FinishDial), which may wait
  // for send-queue room: neither the completion thread nor the dispatcher's workers.
  std::unique_ptr<Workers> setup;
  std::unique_ptr<EventLoop> loop;
  std::atomic<uint64_t> next_conn_id{1};
  // OSD: one notifier per poller (msg/rdma/ring_notifier.h), set once in Create; ring
  // sessions are spread over them. Client: whether it announces records WITH_IMM.
  std::vector<std::shared_ptr<RdmaRingNotifier>> notifiers;
  std::atomic<size_t> next_notifier{0};
  bool record_imm = true;
  // When the application last called Messenger::Poll (absl::GetCurrentTimeNanos): while it
  // polls, the completion thread leaves acknowledgements to it instead of competing for
  // the connection lock and a core (see Link::OnPoll).
  std::atomic<int64_t> app_polled_ns{0};
  // How long after such a call the completion thread still stands back (a caller that
  // stops polling for longer gets its acknowledgements from the completion thread again).
  int64_t app_poll_window_ns = 200'000;
  // Ring sizes (PROTOCOL.md "Ring sizes"). Server: a session's ring starts at
  // `ring_min_bytes` ("rdma_ring_min_kb", default 512) and is resized, when its client asks
  // on a reconnect with nothing in flight, within [ring_min_bytes, options.ring_bytes].
  // Client: asks for 4x its ring when a write waited for ring space or did not fit, and
  // for the server's initial size after `ring_shrink_idle` without a write
  // ("rdma_ring_shrink_idle_s", default 30; 0: never shrinks).
  size_t ring_min_bytes = 512 * 1024;
  absl::Duration ring_shrink_idle = absl::Seconds(30);
  // Server: the ring size for a client that asks for `asked` bytes (0: the initial size):
  // the next power of two, within [ring_min_bytes, options.ring_bytes].
  size_t RingSizeFor(uint64_t asked) const;
  // Messenger::AllocRecordBuffer's registered buffers; WriteRecordShared looks a payload
  // up here first (set once in Create, before any connection exists).
  std::shared_ptr<RecordBufferPool> buffers;
  // WriteRecordShared payloads of at least this size are registered in place, not copied
  // ("rdma_zero_copy_min_bytes"; below it a copy is cheaper than a registration).
  size_t zero_copy_min_bytes = 256 * 1024;
  // Fault injection ("rdma_inject_out_of_ring_write" = N): the N-th ring record this
  // messenger writes is aimed just past the end of the peer's ring, as a buggy or hostile
  // client would (0 = off; one shot). Set once while the messenger is created, before
  // any connection exists; every record write asks TakeInjectedOutOfRingWrite().
  class OutOfRingInjection {
   public:
    OutOfRingInjection& operator=(uint64_t n) {
      armed_ = n != 0;
      left_.store(n, std::memory_order_relaxed);
      return *this;
    }
    // Counts one record write down; true for the one that must go astray. When off (the
    // production case) this is one well-predicted branch on a plain bool that never
    // changes after creation: no atomic, no call.
    bool Take() {
      if (ABSL_PREDICT_TRUE(!armed_)) return false;
      return TakeArmed();
    }

   private:
    bool TakeArmed();  // out of line (rdma_shared.cc): the atomic countdown
    bool armed_ = false;  // written only before any connection exists
    std::atomic<uint64_t> left_{0};
  };
  OutOfRingInjection inject_out_of_ring_write;
  bool TakeInjectedOutOfRingWrite() { return inject_out_of_ring_write.Take(); }

  // A peer cut off for an RDMA access outside its memory is refused for `cutoff_ban`
  // ("rdma_cutoff_ban_s", default 60; 0: it may come back at once). By entity name, checked
  // once the peer has authenticated -- which, with one cluster key shared by all (or with
  // auth none), does not stop a peer that holds the key from claiming another's name.
  absl::Duration cutoff_ban = absl::Seconds(60);
  absl::Mutex ban_mu;
  std::map<std::string, absl::Time> banned ABSL_GUARDED_BY(ban_mu);  // name -> until
  void Ban(const EntityName& peer);
  // When `peer` may be served again (absl::InfinitePast() if it is not banned).
  absl::Time BannedUntil(const EntityName& peer);

  // Retired transports kept alive kRetiredTransportLinger (their QPs' async events).
  absl::Mutex linger_mu;
  struct Lingering {
    absl::Time since;
    std::shared_ptr<Transport> tp;
    std::weak_ptr<RdmaConnection> owner;  // may have ended meanwhile (still told)
  };
  std::deque<Lingering> lingering ABSL_GUARDED_BY(linger_mu);
  void Linger(std::shared_ptr<Transport> tp, std::weak_ptr<RdmaConnection> owner);
  // The connection whose lingering transport has QP `qp_num`, if any.
  std::shared_ptr<RdmaConnection> LingeringOwner(uint32_t qp_num);
  // Destroys the transports that lingered long enough (all of them if `all`).
  void BuryLingering(bool all);
  // Handles the device's queued asynchronous events now (the messenger's handler).
  void DrainAsyncEvents();

  // Set by the messenger while it lives: a session (ours or accepted) ended for good;
  // the device's asynchronous events handled now.
  absl::Mutex hooks_mu;
  std::function<void(const RdmaConnection*)> forget_session ABSL_GUARDED_BY(hooks_mu);
  std::function<void()> drain_async_events ABSL_GUARDED_BY(hooks_mu);
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_SHARED_H_

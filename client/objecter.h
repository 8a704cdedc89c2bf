// Objecter: the client's op engine (named after Ceph's). It owns the messenger, keeps one
// connection per OSD, sends object writes as ring records and reads as messages, matches
// acknowledgements to ops, and re-sends what is unacknowledged when an OSD restarts or
// the map moves a PG. It knows nothing about the monitor: the owner feeds it maps
// (HandleMap), so tests can drive it with hand-made maps and a fake messenger backend.
//
// Op lifecycle (one copy, as Ceph):
//   * target = map.OsdOf(oid). If that OSD is up, the op is sent at once on the caller's
//     thread (WriteRecord may wait for ring credit: that is the back-pressure). An object
//     larger than the connection's max_record_payload() goes as several records, the
//     first flagged kRecordFlagTruncate, the last kRecordFlagLast, each with its own tid;
//     the op completes when every tid of its current attempt is acknowledged. The tids of
//     one attempt are consecutive: the OSD applies the records as one write, with the
//     last (msg/PROTOCOL.md "Writes of several records"); a record it refuses with
//     ABORTED (it lacks the write's first part) makes the op re-send the whole write.
//   * OSD down but in: the op waits. When the OSD comes back (new up_from/address in a
//     map, or the messenger reports OnRemoteReset / OnReset), every unacknowledged op of
//     that OSD is re-sent in full (a new attempt with new tids; acks of older attempts
//     are ignored). Whole-object writes are idempotent, so a duplicate is harmless.
//   * The map moves the PG (out/in): ops in flight are re-sent to the new target.
//   * op_timeout after submission: kDeadlineExceeded
//     "write of OID timed out after Ns (osd.N down)".
//   * Every op's callback runs exactly once: success, OSD error, timeout, or kCancelled
//     at shutdown.
//
// Threads: all public methods are thread-safe. Callbacks run on messenger worker threads,
// on the objecter's retry thread, or inline on the submitting thread for immediate
// errors; they must not block and must not call the synchronous Write/Read. AsyncWrite
// from a callback is fine (a chain of writes, each issued by the previous one's callback:
// ClientE2eTest.WritesChainedFromCallbacksAllComplete); a write whose session is still in
// its handshake is handed to the retry thread. It may still block (max_in_flight, ring
// credit) -- on a thread that the credit or the free slot it waits for must come through:
// it then waits for its deadline.
// Over rdma that thread is shared by every Objecter of the process (one completion thread
// per process), so such a wait, on any Objecter's AsyncWrite, holds up all of them.
// REQUIRES: no Objecter is destroyed from inside a callback, nor while another thread
// is still inside one of its calls (Shutdown cancels the ops in flight and unblocks
// senders, but does not wait for the callers' threads to leave AsyncWrite/Write).
#ifndef MSGR_CLIENT_OBJECTER_H_
#define MSGR_CLIENT_OBJECTER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "msg/base/perf_counters.h"
#include "msg/messenger.h"
#include "proto/placement.h"

namespace msgr::client {

// Placement is a contract shared with the OSDs (proto/placement.h); the client names it
// as its own.
using placement::kNoOsd;
using placement::OsdEntry;
using placement::PlacementMap;

using WriteCallback = std::function<void(absl::Status)>;
using ReadCallback = std::function<void(absl::StatusOr<std::string>)>;

struct ObjecterOptions {
  MessengerOptions messenger;                      // type, name, auth, backend options
  absl::Duration op_timeout = absl::Seconds(30);   // per op, from submission
  size_t max_in_flight = 256;                      // ops submitted and not completed
  // When max_in_flight ops are pending: true = the submitter waits (up to op_timeout),
  // false = the op fails at once with kResourceExhausted.
  bool block_when_full = true;
  // Caps the payload of one record (0 = the connection's max_record_payload()).
  size_t max_record_payload = 0;
  // Synchronous Write/Read busy-poll (Messenger::Poll) this long for the completion before
  // sleeping: a futex wake-up costs tens of microseconds on a small VM, more than a
  // 4 KiB write over rdma. Zero: always sleep.
  absl::Duration sync_spin = absl::Microseconds(50);
  // How many writes the application usually keeps in flight (a bench's -t), 0 if it does
  // not say. Each record tells its OSD how deep this client's queue to it is
  // (RecordDesc::writer_depth): the larger of the ops pending to that OSD now and this
  // share of it (spread over the up OSDs). An application that produces writes as fast as
  // its CPU lets it sees its acks come at once and its ops wait in its own hands, so its
  // pending count alone stays low while its queue is deep.
  size_t queue_depth = 0;
};

// A request answered by one message from an OSD (proto/osd_protocol.h): anything but a
// write. Sent like a read: to the object's OSD (a list: to `osd`), re-sent when that OSD
// restarts or the PG moves, failed after op_timeout.
struct Request {
  enum class Kind { kWrite, kRead, kStat, kDelete, kList };
  Kind kind = Kind::kRead;
  std::string oid;           // a list: the prefix (may be empty)
  uint64_t offset = 0;       // read: a range (length UINT64_MAX: to the end)
  uint64_t length = UINT64_MAX;
  std::string after;         // list: the page starts after this id
  uint32_t max = 1000;       // list: page size (the OSD caps it)
  int osd = -1;              // list: which OSD (kNoOsd for others: placement decides)
  bool digest = false;       // list: each entry's crc32c too (a scrub page, kScrub)

  static const char* KindName(Kind k);
};

// How often the timer thread retries parked ops (and at least how often it wakes).
inline constexpr absl::Duration kSweepInterval = absl::Milliseconds(200);

#define MSGR_OBJECTER_COUNTERS(X)                                                       \
  X(ops_started, kCounter, kNone, "ops submitted (writes, reads, stats, deletes, lists)") \
  X(ops_ok, kCounter, kNone, "ops completed OK")                                          \
  X(ops_failed, kCounter, kNone, "ops completed with an error (timeouts included)")      \
  X(ops_timed_out, kCounter, kNone, "of those, past the op timeout")                     \
  X(records_sent, kCounter, kNone, "ring records handed to the messenger (every attempt)") \
  X(resends, kCounter, kNone, "ops sent again (reconnect, map change, OSD back)")        \
  X(stale_acks, kCounter, kNone, "acks and replies of an older attempt, dropped")

// The objecter's counters (msg/base/perf_counters.h; Group("objecter") for a dump).
MSGR_COUNTER_SNAPSHOT(ObjecterCounters, MSGR_OBJECTER_COUNTERS);

class Objecter : public Dispatcher {
 public:
  // Creates the messenger (its error passes through unchanged, e.g. an unavailable
  // backend) and starts the retry thread. No OSD is contacted before the first map.
  static absl::StatusOr<std::unique_ptr<Objecter>> Create(ObjecterOptions options);
  ~Objecter() override;  // Shutdown()
  Objecter(const Objecter&) = delete;
  Objecter& operator=(const Objecter&) = delete;

  // The cluster blocklisted this client instance: every op in flight and every later one
  // fails with `why` (PERMISSION_DENIED); nothing it sends after this is written (the OSDs
  // refuse it too). Idempotent.
  void Fence(absl::Status why);
  // Installs a new map (ignored unless its epoch is newer) and re-targets ops.
  // The map is the client's pool's (PlacementMap::pool_id): every op goes to that pool.
  void HandleMap(PlacementMap map);
  uint64_t map_epoch() const;
  uint32_t pool_id() const { return pool_id_.load(std::memory_order_relaxed); }

  // Writes the whole object (replacing it). `data` is shared, not copied, and must stay
  // unchanged until the callback. May block (max_in_flight, ring credit).
  void AsyncWrite(std::string oid, std::shared_ptr<const std::string> data, WriteCallback cb);
  // The same from a buffer of AllocBuffer (its size() bytes): the messenger sends it
  // without copying it (rdma: the HCA reads it where it is).
  void AsyncWrite(std::string oid, RecordBufferRef data, WriteCallback cb);
  // Memory for a write's payload that the messenger sends without copying (see
  // Messenger::AllocRecordBuffer): fill it, AsyncWrite it, reuse or drop it after the
  // callback. Never fails (rdma: plain memory once the registered budget is spent).
  RecordBufferRef AllocBuffer(size_t size);
  void AsyncRead(std::string oid, ReadCallback cb);
  // Any request but a write; `cb` gets the reply's body (proto/osd_protocol.h: a read's
  // bytes, an encoded StatBody or ListBody, nothing for a delete) or the OSD's error.
  void AsyncRequest(Request request, ReadCallback cb);
  // Synchronous forms. REQUIRES: not called from a callback.
  absl::Status Write(std::string oid, std::shared_ptr<const std::string> data);
  absl::Status Write(std::string oid, RecordBufferRef data);
  absl::StatusOr<std::string> Read(std::string oid);
  absl::StatusOr<std::string> Call(Request request);

  // OSDs that hold PGs in the current map (in, up or not): whom a full listing asks.
  std::vector<int> OsdsIn() const;
  // A copy of the current map of the client's pool (empty before the first map).
  PlacementMap CurrentMap() const;

  // Stops the messenger and fails every pending op with kCancelled. Idempotent.
  void Shutdown();

  // Polling mode: one round of the messenger's completion work on this thread
  // (Messenger::Poll); callbacks of finished ops may run inside. For callers that would
  // rather spin than sleep while they wait for a write (latency at low concurrency).
  bool Poll() { return messenger_->Poll(); }

  // Opens a session to every OSD the map has up (no op needed), and waits until each is
  // ready for writes (handshake done, ring attached) or `deadline`; the error names the
  // OSDs that were not. For callers that want their sessions before the first op (the
  // bench with --clients, which reports how long N clients take to connect).
  absl::Status ConnectAll(absl::Time deadline);

  ObjecterCounters counters() const;
  size_t in_flight() const;
  Messenger* messenger() { return messenger_.get(); }

  // Dispatcher (messenger worker threads).
  void OnMessage(const ConnectionRef& conn, Message m) override;
  void OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) override;
  void OnReset(const ConnectionRef& conn, const absl::Status& why) override;
  void OnRemoteReset(const ConnectionRef& conn) override;
  void OnConnectRefused(const ConnectionRef& conn, const absl::Status& why) override;

 private:
  struct Op;
  using OpRef = std::shared_ptr<Op>;
  class Completion;
  using Completions = absl::InlinedVector<Completion, 16>;
  static void RunAll(Completions& done);  // and clears it
  struct Session;
  struct PendingOps;  // intrusive indexes of the pending ops (objecter_op.h)

  explicit Objecter(ObjecterOptions options);
  // The write forms above: `bytes` lie in what `owner` keeps alive.
  void AsyncWriteFrom(std::string oid, std::shared_ptr<const void> owner, std::string_view bytes,
                      WriteCallback cb);
  absl::Status WriteFrom(std::string oid, std::shared_ptr<const void> owner,
                         std::string_view bytes);
  // A new op from the objecter's pool (no allocation once the pool holds max_in_flight).
  static OpRef NewOp();
  // Registers a new op (waiting for a slot) or completes it at once with an error.
  void Submit(OpRef op);
  // The tids of one attempt, taken under mu_ (TakeTidsLocked): `count` records (a write)
  // or one request, each of at most `max_payload` bytes (writes).
  struct Tids {
    uint64_t first = 0;
    size_t count = 0;
    size_t max_payload = 0;
    uint16_t depth = 0;  // the first record's writer depth
  };
  struct SendPlan;  // objecter_op.h
  // Sending the current attempt of `op` is two steps. The caller sets op->sending (it alone
  // sends the op) and, in the same critical section, PlanSendLocked drops `op` (done, or
  // shutting down), parks it (its OSD unusable), fails it (its OSD refused us for good) --
  // clearing op->sending in these three -- or says where to send it; then, unlocked,
  // SendPlanned sends it on the calling thread, re-planning while the attempt is
  // superseded, and clears op->sending. A write whose session is still in its handshake
  // goes to the retry thread unless `may_wait_for_session` (the retry thread itself).
  SendPlan PlanSendLocked(const OpRef& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SendPlanned(const OpRef& op, SendPlan plan, bool may_wait_for_session)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Takes the current attempt's tids and registers them in by_tid_; for a write also its
  // wire oid, its first record in records_sent and that record's writer depth.
  // `max_payload`: the session's record size (writes; ignored for requests).
  Tids TakeTidsLocked(const OpRef& op, size_t max_payload) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The largest record payload `conn` takes for this client; 0 until its handshake is done.
  size_t RecordPayloadLimit(const Connection& conn) const;
  // One attempt's records (their tids already taken when tids.count > 0); returns false
  // when the attempt was superseded or failed.
  bool SendWriteRecords(const OpRef& op, uint64_t attempt, const ConnectionRef& conn, Tids tids);
  // Waits for `n`, polling the messenger for up to options_.sync_spin first.
  void SpinWait(const absl::Notification& n);
  // Makes sure `osd` has a connection; Connect runs outside the lock.
  absl::StatusOr<ConnectionRef> ConnectionFor(int osd);

  // All Locked helpers: REQUIRES mu_ held.
  // Starts a new attempt of `op` toward its (re)computed target and queues it for the
  // retry thread unless a thread is sending it right now.
  void ResendLocked(const OpRef& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ResendAllOfOsdLocked(int osd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ForgetTidsLocked(Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks `op` done; returns its completion to run after unlocking (empty if it was done).
  Completion FinishLocked(const OpRef& op, absl::StatusOr<std::string> result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Every pending op, in submission order (a copy: FinishLocked may run on each).
  std::vector<OpRef> PendingOpsLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string DownReasonLocked(int osd) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The error of an op whose OSD at `addr` refused us for good (FAILED_PRECONDITION `why`).
  static absl::Status CannotServe(const Op& op, const std::string& addr, const absl::Status& why);
  Session* SessionByConnLocked(const Connection* conn) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool OsdUsableLocked(int osd) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  void HandleReply(const ConnectionRef& conn, const Message& m);
  // Where `op` goes in the current map. REQUIRES: mu_ held.
  int TargetLocked(const Op& op) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Points `op` at TargetLocked(op), keeping ops_by_osd_ right.
  void RetargetLocked(Op& op) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The writer depth of a record of `op` (ObjecterOptions::queue_depth).
  uint16_t WriterDepthLocked(const Op& op) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RetryLoop();  // sends queued (re)attempts
  void TimerLoop();  // expires ops, retries parked ops whose OSD is usable again

  const ObjecterOptions options_;
  std::unique_ptr<Messenger> messenger_;  // created in Create(); shut down first

  mutable absl::Mutex mu_;
  absl::CondVar retry_cv_;     // retry thread: queue, shutdown
  absl::CondVar timer_cv_;     // timer thread: new deadlines, shutdown
  absl::CondVar slot_cv_;      // submitters waiting for max_in_flight
  PlacementMap map_ ABSL_GUARDED_BY(mu_);
  std::atomic<uint32_t> pool_id_{placement::kDefaultPoolId};  // map_'s pool
  bool have_map_ ABSL_GUARDED_BY(mu_) = false;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status fenced_ ABSL_GUARDED_BY(mu_);  // set by Fence: every op fails with it
  uint64_t next_op_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_tid_ ABSL_GUARDED_BY(mu_) = 1;
  // Pending (submitted, not completed) ops: in submission order, and by deadline.
  std::unique_ptr<PendingOps> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, OpRef> by_tid_ ABSL_GUARDED_BY(mu_);
  // Pending ops by their current target OSD (WriterDepthLocked). An entry stays at 0 when
  // its last op ends: one per OSD this client wrote to, and no allocation per op.
  std::unordered_map<int, uint32_t> ops_by_osd_ ABSL_GUARDED_BY(mu_);
  size_t up_osds_ ABSL_GUARDED_BY(mu_) = 0;  // in map_
  std::map<int, std::unique_ptr<Session>> sessions_ ABSL_GUARDED_BY(mu_);
  // Why connecting to an address last failed (the messenger retries); named in the timeout
  // errors of ops waiting for that OSD. Erased when the address acknowledges something.
  std::map<std::string, absl::Status> connect_refusals_ ABSL_GUARDED_BY(mu_);
  std::deque<OpRef> retry_queue_ ABSL_GUARDED_BY(mu_);
  ObjecterCounters counters_ ABSL_GUARDED_BY(mu_);
  std::thread retry_thread_;
  std::thread timer_thread_;
};

}  // namespace msgr::client

#endif  // MSGR_CLIENT_OBJECTER_H_

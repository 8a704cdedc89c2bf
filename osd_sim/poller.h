// Polling threads: drain receive rings into the store, return ring space, acknowledge.
//
// Each Poller thread owns a set of rings (one per client session). While it owns a ring
// whose producer cannot signal it (RDMA: the client's WRITEs involve no OSD CPU), it
// busy-polls the `seq` word at each ring's read position for `spin` after the last
// record (among many producers it naps between looks instead: PollerOptions::nap); then, or at once when every ring's producer signals its eventfd (TCP), it
// sleeps in epoll on the rings' eventfds, so an idle OSD uses ~0 CPU (a sleeping poller
// asks RDMA clients for a doorbell, and TCP readers signal only then: an awake poller looks
// at every TCP ring each pass, a nap's end included). For every record it
//   1. verifies bounds and crc32c (RingConsumer); a bad record drops that connection with
//      a logged reason, records before it stay valid and are still acknowledged,
//   2. hands the record, still in ring memory, to the RecordSink (the store writes it
//      from there: the OSD never copies the payload),
//   3. when the sink says the record is durable, releases its ring space in order with
//      Connection::ReleaseRing, which is also the acknowledgement (one call per ring per
//      batch; failures are named with their status code).
//
// Thread-safety: AddRing/RemoveRing/counters may be called from any thread; the poller
// thread does all ring access. RecordSink completions may arrive on any thread.
#ifndef MSGR_OSD_SIM_POLLER_H_
#define MSGR_OSD_SIM_POLLER_H_

#include <atomic>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/any_invocable.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/base/perf_counters.h"
#include "msg/base/spin_policy.h"
#include "msg/base/thread_cpu.h"
#include "msg/messenger.h"
#include "msg/ring/ring.h"

namespace msgr::osd {

// What a record is to the object it writes: a whole write, or one part of a write of
// several records (the client's kRecordFlagTruncate on the first part, kRecordFlagLast on
// the last, consecutive tids in between: msg/PROTOCOL.md "Writes of several records").
struct WritePart {
  enum class Kind { kWhole, kFirst, kMiddle, kLast };
  Kind kind = Kind::kWhole;
  uint32_t write_id = 0;  // kMiddle / kLast: what Persist returned for the first part
  // The record came from another OSD (a primary forwarding it to this replica), not from
  // a client: it is stored, never forwarded again.
  bool from_osd = false;
  uint64_t sender = 0;  // from_osd: the sending OSD's id
  // The ring the record is in (valid during Persist): a sink that sends the payload on
  // from ring memory keeps the ring alive with it (the poller's RingState holds it).
  const std::shared_ptr<RecvRing>* ring = nullptr;
};

// Told once whether a record is durable (OK) or why it never will be. The same type as
// the store's completion (store::DurableCallback), so a sink hands it on as it is.
using PersistCallback = absl::AnyInvocable<void(absl::Status)>;

// Where records go. Persist() starts making `rec` durable; the payload stays valid in
// ring memory until `done` has run. If Persist returns OK, `done` runs exactly once, on
// any thread (possibly before Persist returns); if it returns an error, nothing was
// stored and `done` never runs (as ObjectStore::Append). The parts of a write of several
// records become visible together, with the last one.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  // Returns, for a kFirst part, the id its later parts pass (never 0); for other parts
  // any value.
  virtual absl::StatusOr<uint32_t> Persist(const RecordView& rec, const WritePart& part,
                                           PersistCallback done) = 0;
  // The connection of an unfinished write went away: drop what it stored so far.
  virtual void AbortWrite(std::string_view oid, uint32_t write_id) = 0;
};

struct PollerOptions {
  // Hybrid polling on rings whose producer cannot signal (RDMA), see spin_policy.h:
  // adaptive (default), the poller spins up to `wakeup_cost` after the last record while
  // most gaps between records are shorter than that, else it sleeps at once (the client
  // rings a doorbell); never longer than `spin`. Not adaptive: it always spins `spin`.
  absl::Duration spin = absl::Microseconds(1000);
  bool adaptive_spin = true;
  // What a doorbell wake-up costs: its latency and the CPU of the wake-up chain, which
  // keeps the OSD from its next records (on the soft provider more than the latency alone;
  // the measurements behind the default: docs/BENCHMARKS.md, "Measurements quoted from
  // source comments").
  absl::Duration wakeup_cost = absl::Microseconds(1000);
  // The same while every such ring is announced by a notifier (RecvRing::announced()) and
  // the store syncs (`store_syncs`) and held records in the last 10 ms: a sleeping poller
  // is woken by the record itself, through its notifier's channel -- one thread's
  // wake-up, no doorbell (msg/PROTOCOL.md "Record notifications") -- small against an op
  // that waits for a sync. Memory mode keeps `wakeup_cost`: there a wake-up would double
  // a lone op's latency, and cost a replicated one 8% of its IOPS (docs/BENCHMARKS.md
  // "Session 37").
  absl::Duration notified_wakeup_cost = absl::Microseconds(150);
  bool store_syncs = false;  // the sink's records wait for syncs (durable, buffered)
  // Among many producers the spin naps: with at least `nap_rings` rings nobody signals
  // (RDMA) that had records in the last 2 ms, the poller sleeps `nap` between looks instead
  // of spinning (the spin policy still decides how long it looks before it sleeps for a
  // doorbell). One client, or a few, with an op or a few each, are latency-bound: a spin
  // finds their next record at once. Many clients are not: the looks find several
  // records each, and the cores a spin would take run the clients and the other OSDs.
  // Three OSDs on 2 cores, memory mode (docs/BENCHMARKS.md "Session 21", medians of 3):
  // 20 clients with one 16 KiB op each 2.17x the IOPS, 60 clients with one 4 KiB op each
  // 2.11x; 8 clients the same IOPS at twice the p50; one or four clients do not nap.
  // One writer with a deep queue naps too: when an active ring's writer keeps, on average
  // over its recent records, at least `nap_depth` others in flight on it
  // (RecordHeader::writer_depth), the acks a nap delays hold up none of its writes for
  // long, and the cores a spin would take run that writer (it copies and checksums its
  // payloads). One client, memory mode, 3 OSDs on 2 cores (docs/BENCHMARKS.md "Session
  // 34", medians of 3): 4 KiB -t 16 1.23x the IOPS at 0.67x the OSD CPU per op (and twice
  // the p50), 64 KiB -t 16 1.26x; -t 8 and below, which a nap slows, keep their spin.
  // The writer's count includes the writes its application holds (RecordDesc::
  // writer_depth), else it would run low while the poller spins: acks come at once and
  // the writes wait in the writer's own hands.
  // 40 us: the writer's other records are ready sooner than 100 us (the default before
  // session 36): one client, memory mode, 3 OSDs on 2 cores, medians of 3
  // (docs/BENCHMARKS.md "Session 36"): 4 KiB -t 16 1.22x the IOPS of 100 us naps, 20
  // clients with one 4 KiB op each 1.18x; durable mode the same.
  // A deep queue's naps last from nap / 4 (small records) to `nap` (64 KiB and up) by its
  // records' recent payload size: its writer needs longer for its next large records (it
  // copies and checksums each), while small ones are ready at once. With the default
  // 50 us timer slack (which lets the kernel coalesce the pollers' wake-ups), 3 OSDs on 2
  // cores, memory mode (docs/BENCHMARKS.md "Session 41", medians of runs under 5% steal):
  // 4 KiB -t 16 1.12x the IOPS of 40 us naps at 0.79x the p50, 64 KiB -t 16 0.96x.
  // nap_rings 0 or nap 0: never nap among many producers; nap_depth 0 or nap 0: never for
  // a deep queue.
  absl::Duration nap = absl::Microseconds(40);
  size_t nap_rings = 8;
  size_t nap_depth = 3;
  // While records wait for acks the poller can reap itself (Poller::SetAckPoll: a primary's
  // replica writes over rdma), it polls for them, yielding between looks, for up to
  // `ack_spin` -- hybrid polling again: only while most such waits end sooner (memory
  // mode, small records), never where they take a sync or a large copy, which keeps
  // naps. 0: never.
  absl::Duration ack_spin = absl::Microseconds(200);
  int cpu = -1;                                   // pin the thread to this CPU (-1: no)
  size_t max_batch = 256;                         // records taken per ring per pass
  // The longest one sleep lasts. Every event that matters (a record on a signalled ring, a
  // doorbell, a store completion, a ring added) wakes the poller; this bounds the sleeps
  // in which no doorbell can come (announcing the sleep to an RDMA client failed).
  absl::Duration max_sleep = absl::Milliseconds(200);
  // A write of several records that gets no further part for this long is dropped (its
  // client gave up on it but kept the session; default: twice the client's op timeout).
  absl::Duration open_write_timeout = absl::Seconds(60);
  // A record in flight (drained, not yet acknowledged) for longer than this is a slow op
  // (the slow_ops gauge; DumpInFlight flags it). Ceph's osd_op_complaint_time.
  absl::Duration op_complaint_time = absl::Seconds(30);
};

// One client write record the poller drained and has not acknowledged yet (DumpInFlight).
struct InFlightWrite {
  int poller = 0;
  uint64_t tid = 0;
  std::string oid;
  EntityName client;
  std::string client_addr;
  absl::Duration age;        // since the poller drained it from the ring
  std::string waiting_for;   // the store (durability), or an earlier record's ack
  bool slow = false;         // age >= PollerOptions::op_complaint_time
};

#define MSGR_POLLER_COUNTERS(X)                                                              \
  X(records, kCounter, kNone, "ring records drained and stored (client and replica writes)") \
  X(replica_records, kCounter, kNone, "of those, forwarded by a primary OSD (replica writes)")  \
  X(bytes, kCounter, kBytes, "payload bytes of those records")                                \
  X(poll_hits, kCounter, kNone, "polls that found a record")                                  \
  X(poll_misses, kCounter, kNone, "polls that found none")                                    \
  X(spin_ns, kCounter, kNanoseconds, "time spent spinning for records")                       \
  X(busy_ns, kCounter, kNanoseconds, "time in passes that found work (records, completions)") \
  X(cpu_ns, kCounter, kNanoseconds, "CPU time of the poller's thread (its busy, spin and crc)") \
  X(messenger_ns, kCounter, kNanoseconds,                                                    \
    "CPU time running the messenger it drives (Drive: sockets, handshakes; sampled; the "   \
    "transport CPU role)")                                                                   \
  X(sleep_ns, kCounter, kNanoseconds, "time spent asleep or napping, waiting for records")  \
  X(sleeps, kCounter, kNone, "times the poller went to sleep")                                \
  X(sleeps_at_once, kCounter, kNone, "idle periods the spin policy slept through at once")    \
  X(naps, kCounter, kNone,                                                                   \
    "naps between looks instead of spinning (many producers, a deep queue)")               \
  X(deep_queue_periods, kCounter, kNone,                                                     \
    "idle periods that napped for a writer's deep queue (nap_depth), not many producers")  \
  X(deep_queue_nap_us, kGauge, kNone,                                                        \
    "a deep queue's nap now: nap/4 for small records up to nap from 64 KiB ones")          \
  X(writer_depth, kGauge, kNone,                                                             \
    "the deepest active ring writer's records in flight, averaged over its recent records") \
  X(held_naps, kCounter, kNone,                                                              \
    "naps while the store held records (durable): the next ones found with no doorbell")   \
  X(ack_spins, kCounter, kNone,                                                              \
    "waits for held records' acks (replicas) the poller polled for itself (ack_spin)")      \
  X(ack_spin_hits, kCounter, kNone, "of those, ended by acks within the spin, no wake-up")    \
  X(spin_short_pm, kGauge, kNone, "per mille of recent idle periods shorter than a wake-up")  \
  X(acks_sent, kCounter, kNone, "ring releases (acks) sent to peers")                        \
  X(completion_wakes, kCounter, kNone,                                                       \
    "store completions on other threads that woke the poller (one per sleep or nap at most)") \
  X(write_errors, kCounter, kNone, "records the store refused (acked with an error)")         \
  X(crc_errors, kCounter, kNone, "records refused for a bad crc32c")                          \
  X(crc_bytes, kCounter, kBytes, "payload bytes crc32c-checked (once per record, both backends)") \
  X(crc_ns, kCounter, kNanoseconds, "time spent in those checks (the OSD's crc CPU role)")   \
  X(orphan_parts, kCounter, kNone, "parts of writes whose first part is not here (refused)") \
  X(writes_aborted, kCounter, kNone, "writes of several records left unfinished by a session") \
  X(ring_high_water_bytes, kGauge, kBytes, "most bytes ever in use in one ring")             \
  X(rings, kGauge, kNone, "rings this poller drains now")                                     \
  X(ops_in_flight, kGauge, kNone, "records drained and not yet acknowledged")                 \
  X(slow_ops, kGauge, kNone, "of those, in flight longer than the op complaint time")

MSGR_COUNTER_SNAPSHOT(PollerCounters, MSGR_POLLER_COUNTERS);

// An OSD op's latency as the OSD sees it: from the pass that drained a client's record to
// the ack that released it (stored, durable in durable mode, and on every replica).
// Replica records (part of their primary's op) and records refused at once are not timed.
inline constexpr HistogramDesc kOpLatencyDesc{
    "op_latency", "client write records from drained to acknowledged (store, replicas)"};

class Poller {
 public:
  static absl::StatusOr<std::unique_ptr<Poller>> Create(int index, const PollerOptions& options,
                                                        RecordSink* sink);
  ~Poller();  // Stop()s
  // Stops the thread after it waited (up to 10 s) for in-flight records. Store callbacks
  // still pending may come later: the poller must outlive the store's last one (the OSD
  // stops its pollers, closes the store, then destroys them). Idempotent.
  void Stop();

  // Starts draining `ring` for `conn`. A second ring for the same connection replaces
  // the first once the first has no records in flight.
  void AddRing(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring);
  // Stops draining the rings of `conn` (reset or shutdown); in-flight records finish.
  void RemoveRings(const Connection* conn);

  PollerCounters counters() const;
  // The counters and the op latency histogram, for the registry (any thread).
  CounterGroup Group() const;
  size_t ring_count() const;
  // True between AddRing and RemoveRings for `conn` (any thread).
  bool has_rings_of(const Connection* conn) const;
  // The records in flight now, oldest first per ring (any thread). The poller thread
  // copies them out on its next pass (it is woken for it): the data path keeps no lock and
  // no shared list, each record only the pass's clock reading and a pointer to its oid in
  // ring memory. Empty after `timeout` if the thread does not answer, or once it stopped.
  std::vector<InFlightWrite> DumpInFlight(absl::Duration timeout = absl::Seconds(2));
  int index() const { return index_; }
  // Acks this poller may reap itself while records wait for them: `poll` runs one round
  // of a messenger's completion work on the poller's thread (Messenger::Poll, true if it
  // delivered something) -- the primary's replica sessions over rdma, whose acks would
  // otherwise reach the poller through the messenger's completion thread and a wake-up.
  // Any thread; applied on the poller's next pass.
  void SetAckPoll(absl::AnyInvocable<bool()> poll);
  // Runs `messenger` (driven mode, Messenger::driven()) on the poller's thread: its sockets
  // are read, its handshakes and callbacks run, between the poller's passes and while it
  // sleeps, so a record goes from the socket to the store and its ack back to the socket on
  // this one thread (run to completion), with no hand-off to a socket thread and no
  // wake-up for it. `messenger` must outlive the poller's thread (Stop). Any thread;
  // applied on the next pass. One per poller.
  void Drive(Messenger* messenger);

 private:
  struct Pending;
  struct OpenWrite;
  struct RingState;
  Poller(int index, const PollerOptions& options, RecordSink* sink, int wake_fd, int epoll_fd);
  void Run();
  // Whether an idle period starting now naps between looks instead of spinning, and why:
  // rings nobody signals that had records in the last kActiveProducerWindowNs are many
  // (PollerOptions::nap_rings), or one's writer has a deep queue (nap_depth). Also
  // publishes the writer_depth gauge.
  enum class NapReason { kNone, kManyProducers, kDeepQueue };
  NapReason NapsNow(uint64_t now_ns);
  uint64_t deep_queue_nap_ns_ = 0;  // what NapsNow found a deep queue's nap should last
  static constexpr uint64_t kActiveProducerWindowNs = 2'000'000;
  // True if it found work; records drained are stamped `now_ns` (the pass's clock).
  bool PollRing(RingState* r, uint64_t now_ns);
  // Asks every notifier which announced rings have new records (marks them ready).
  // Their sessions' other receives are handled inside, on this thread.
  void PollNotifiers();
  // If `fd` is a notifier's (not an eventfd: never read it directly), clears it and
  // returns true.
  bool ClearNotifierFd(int fd);
  struct DumpRequest;
  void ServeDumps();                     // poller thread: answers DumpInFlight requests
  // Classifies `rec` for the sink; false (and `*why`) for a part of a write that has no
  // first part on this ring.
  bool ClassifyPart(RingState* r, const RecordView& rec, WritePart* part, std::string* why);
  void AbortOpenWrites(RingState* r);    // the ring goes away with writes unfinished
  void AbortWrite(const OpenWrite& w);
  void AbortStaleWrites(uint64_t now_ns);  // open writes idle past open_write_timeout
  void Complete(RingState* r);           // releases space and sends acks
  void ApplyControl();                   // ring adds/removals from other threads
  // Sleeps until woken or options_.max_sleep; returns at once if a last look finds work
  // (true if that look took records from a ring nobody signals).
  bool Sleep();
  void Wake();
  // A store completion on another thread wakes the poller only while it is parked, that is
  // about to block in Sleep or Nap; a spinning or busy poller sees the done flag on its
  // next pass, and an eventfd write per record (a system call on the completer's thread,
  // and a wake-up it may cost the poller) bought nothing. Park() stores the flag, then a
  // seq_cst fence, then the caller looks at the done flags; WakeIfParked() runs after a
  // done flag's store: a fence, then the flag. Of the two stores one is seen by the other
  // side's load (the fences are ordered), so a completion is never missed by both. The
  // first completer to see the flag clears it and wakes: one wake-up per park.
  void Park();
  void Unpark() { parked_.store(false, std::memory_order_relaxed); }
  void WakeIfParked();
  // Poller thread: true if some ring's oldest record in flight is done (Complete has work).
  bool AnyCompletion() const;
  // Waits up to `ns` for the poller's eventfds (a store completion, a control change, a
  // ring signalled before the poller's last sleep) without telling producers that it
  // sleeps: no doorbells, no TCP signals; the next look finds their records. Counts
  // itself in `*count` (naps or held_naps).
  void Nap(uint64_t* count, uint64_t ns);
  // Clears what made the epoll set's fds readable (eventfds read, notifiers' ClearWait),
  // for the readable ones only: a write after it makes its fd readable again.
  void DrainReadyFds();
  // Poller thread: copies counters_ to what counters() returns (which adds the thread's
  // CPU time: read there, not here, where it would be a system call per sleep).
  void PublishLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const int index_;
  const PollerOptions options_;
  RecordSink* const sink_;
  const int wake_fd_;   // eventfd: control changes and store completions
  const int epoll_fd_;

  mutable absl::Mutex mu_;
  // AddRing / RemoveRings requests, applied by the thread in the order they came (a
  // removal queued before an add of the same connection must not retire the new ring).
  struct ControlOp {
    ConnectionRef conn;              // AddRing: the connection (kept alive while queued)
    const Connection* removed;       // RemoveRings: the connection (null for an add)
    std::shared_ptr<RecvRing> ring;  // AddRing: the ring
  };
  std::vector<ControlOp> control_ ABSL_GUARDED_BY(mu_);
  absl::AnyInvocable<bool()> new_ack_poll_ ABSL_GUARDED_BY(mu_);  // SetAckPoll, not applied
  Messenger* new_driven_ ABSL_GUARDED_BY(mu_) = nullptr;          // Drive, not applied
  std::set<const Connection*> conns_ ABSL_GUARDED_BY(mu_);  // has_rings_of
  std::vector<std::shared_ptr<DumpRequest>> dumps_ ABSL_GUARDED_BY(mu_);  // DumpInFlight
  bool exited_ ABSL_GUARDED_BY(mu_) = false;  // the thread answers no more dumps
  ThreadCpuClock cpu_clock_ ABSL_GUARDED_BY(mu_);  // the thread's, until it exits
  uint64_t exit_cpu_ns_ ABSL_GUARDED_BY(mu_) = 0;  // its CPU time when it exited
  PollerCounters snapshot_ ABSL_GUARDED_BY(mu_);

  std::vector<std::unique_ptr<RingState>> rings_;  // poller thread only
  // Poller thread only: the notifiers of its rings' sessions (RecvRing::notifier(); each
  // polled every pass, its fd in the epoll set), the announced rings by their RecvRing,
  // and when every ring was last looked at (a ring announced by its notifier is looked
  // at when the notifier reports it, and by these scans: before a sleep, after a wake-up
  // and every kFullScanNs -- the safety net for a record whose announcement is late).
  std::vector<RingNotifier*> notifiers_;
  absl::flat_hash_map<const RecvRing*, RingState*> announced_;
  size_t unannounced_ = 0;  // rings nobody signals that no notifier announces
  uint64_t last_full_scan_ns_ = 0;
  bool full_scan_due_ = true;
  static constexpr uint64_t kFullScanNs = 1'000'000;
  std::vector<RecordAck> failed_;                  // poller thread only: Complete's scratch
  absl::AnyInvocable<bool()> ack_poll_;            // poller thread only: SetAckPoll's
  Messenger* driven_ = nullptr;                    // poller thread only: Drive's
  // The driven messenger's CPU (messenger_ns), sampled: a call in kDrivenSampleEvery, drawn
  // at random (the calls come in repeating patterns that a fixed stride would lock onto),
  // is timed by the thread's CPU clock (a system call per reading) and counted that many
  // times. Wall-clock time would count the preemptions a socket write invites on a
  // loaded machine (it was 98% of the thread's CPU at size 3, 4 KiB -t 16).
  static constexpr uint64_t kDrivenSampleEvery = 8;
  template <typename F>
  void CountDrivenCpu(F run) {
    driven_rng_ ^= driven_rng_ << 13;  // xorshift64
    driven_rng_ ^= driven_rng_ >> 7;
    driven_rng_ ^= driven_rng_ << 17;
    if (driven_rng_ % kDrivenSampleEvery != 0) return run();
    const uint64_t cpu0 = driven_cpu_.Ns();
    run();
    counters_.messenger_ns += (driven_cpu_.Ns() - cpu0) * kDrivenSampleEvery;
  }
  uint64_t driven_rng_ = 0x9e3779b97f4a7c15ull;
  // A Poll that found nothing is not repeated for kDrivenIdlePollNs (a system call per
  // pass would slow a poller spinning on rdma rings); the next pass after that, a sleep or
  // a Poll that ran something polls again.
  static constexpr uint64_t kDrivenIdlePollNs = 5'000;
  uint64_t driven_idle_until_ = 0;
  ThreadCpuClock driven_cpu_;                      // poller thread only: its own CPU clock
  bool completed_by_ack_poll_ = false;  // poller thread only: this pass's Complete saw one
  PollerCounters counters_;                        // poller thread only
  LatencyHistogram op_latency_{&kOpLatencyDesc};   // recorded by the poller thread
  std::atomic<bool> stop_{false};
  std::atomic<bool> parked_{false};             // Park / WakeIfParked
  std::atomic<uint64_t> completion_wakes_{0};   // counters_.completion_wakes, any thread
  std::atomic<bool> control_pending_{false};  // control_ changed
  std::atomic<bool> dump_pending_{false};     // dumps_ has requests
  std::atomic<size_t> ring_count_{0};
  std::thread thread_;
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_POLLER_H_

// The simulated OSD: a storage daemon that receives object writes through the messenger
// into receive rings, drains them with polling threads into the object store, and
// acknowledges each write once it is durable (per the durability mode).
//
//   client --(tcp | rdma: ring records)--> RecvRing --Poller--> ObjectStore --> disk
//          <------------- ring credit (OnRecordsAcked) --------------'
//
// With a pool size N > 1 it is the primary of some PGs and a replica of others: as
// primary it forwards each client write to the PG's other members (osd_sim/replicator.h)
// and acknowledges it once they have it too.
//
// Pools: the store holds every pool's objects, another pool's under its pool-qualified
// name (placement::PoolObjectName; a write's record oid already is that name), the
// default pool's under their own names as before pools. A request's pool id picks the
// name; a listing covers one pool and returns plain oids.
//
// It also serves reads (whole or ranges), stats, deletes and listings of its objects,
// registers and heartbeats with the monitor, and exposes `perf dump`, `dump_sessions` and
// `dump_ops_in_flight` on an admin socket in its run dir (run/osd.<id>.asok).
//
// Thread-safety: Start/Stop from the owning thread; everything else is internal.
#ifndef MSGR_OSD_SIM_OSD_H_
#define MSGR_OSD_SIM_OSD_H_

#include <atomic>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/base/perf_counters.h"
#include "msg/messenger.h"
#include "osd_sim/admin_socket.h"
#include "osd_sim/mon/control_auth.h"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/peering.h"
#include "osd_sim/pg_log.h"
#include "osd_sim/poller.h"
#include "osd_sim/replicator.h"
#include "osd_sim/store/object_store.h"
#include "proto/osd_protocol.h"

namespace msgr::osd {

struct OsdOptions {
  uint32_t id = 0;
  std::string mon_addr;                       // host:port of the monitor
  std::string data_dir;                       // object store (unused in memory mode)
  std::string run_dir;                        // admin socket
  std::vector<std::string> ms_types = {"tcp"};  // messengers to serve: "tcp", "rdma"
  // Where clients reach it (Ceph's public address): HOST:PORT, HOST numeric (IPv4 or
  // IPv6, bracketed), PORT the tcp listener's (0: a free one). Other backends' listeners
  // (the rdma side channel) take `rdma_port` on the same host (0: a free one).
  std::string public_addr = "127.0.0.1:0";
  uint16_t rdma_port = 0;
  // Where other OSDs reach it (Ceph's cluster address): a messenger of `cluster_ms_type`
  // listens there for OSD-to-OSD sessions and the map advertises it; empty: peers use the
  // public address (the public messenger of that type).
  std::string cluster_addr;
  // The backend of OSD-to-OSD (replication) sessions, Ceph's ms_cluster_type: "tcp" or
  // "rdma" (then the primary writes replicas' rings one-sidedly, as clients do). Without
  // a cluster address the OSD must serve that type publicly (its messenger is used).
  // Empty: tcp, unless the OSD serves only rdma and has no cluster address.
  std::string cluster_ms_type;
  // The host this OSD runs on, carried in the map as its failure domain; empty: the
  // machine's host name.
  std::string host_name;
  store::Durability durability = store::Durability::kDurable;
  uint64_t capacity_bytes = 0;  // 0: until the disk is full (memory mode: 1/8 of RAM)
  uint64_t segment_bytes = 0;   // store log segment size; 0: the store's default (tests)
  bool background_compaction = true;  // StoreOptions::background_compaction (tests: off)
  // StoreOptions::group_commit_window; unset: the store's default.
  std::optional<absl::Duration> store_commit_window;
  std::optional<uint64_t> store_zero_ahead_bytes;  // unset: StoreOptions' default
  int pollers = 1;
  int read_threads = 2;                       // serve reads off the messenger's threads
  // Socket threads of each tcp messenger (MessengerOptions::worker_threads). One: every
  // connection is served in order on one strand anyway and the records' work is the
  // pollers'; a second thread on the same io_context costs a futex wake-up per hand-off
  // (docs/BENCHMARKS.md "Session 35").
  // 0: none, each tcp messenger is driven by a poller (Poller::Drive; run to completion).
  int ms_tcp_threads = 0;
  std::vector<int> poller_cpus;               // pin poller i to poller_cpus[i % size]
  absl::Duration poller_spin = absl::Microseconds(1000);  // PollerOptions::spin (the cap)
  bool poller_adaptive_spin = true;                       // PollerOptions::adaptive_spin
  absl::Duration poller_wakeup_cost = absl::Microseconds(1000);  // PollerOptions::wakeup_cost
  // PollerOptions::notified_wakeup_cost
  absl::Duration poller_notified_wakeup_cost = absl::Microseconds(150);
  absl::Duration poller_nap = absl::Microseconds(40);   // PollerOptions::nap
  size_t poller_nap_rings = 8;                          // PollerOptions::nap_rings
  size_t poller_nap_depth = 3;                          // PollerOptions::nap_depth
  absl::Duration poller_ack_spin = absl::Microseconds(200);  // PollerOptions::ack_spin
  size_t ring_bytes = kDefaultRingBytes;
  // PG log entries kept for all PGs this OSD leads (osd_sim/pg_log.h); 0: no log, every
  // returning member is backfilled.
  size_t pg_log_entries = PgLog::kDefaultMaxEntries;
  AuthConfig auth;
  std::string ms_mode = "crc";  // tcp messengers' MessengerOptions::ms_mode: crc | secure
  // How the OSD proves itself to the monitor (mutual TLS as osd.<id> with the cluster PKI,
  // or none).
  mon::ControlAuth mon_auth = mon::ControlAuth::Insecure();
  std::map<std::string, std::string> backend_options;  // e.g. rdma_device
  double weight = 1.0;
  absl::Duration mon_timeout = absl::Seconds(10);
  // An op (a client write not yet acknowledged, a read/stat/delete/list not yet answered)
  // older than this is slow: flagged in dump_ops_in_flight, counted in the slow_ops gauge
  // (Ceph's osd_op_complaint_time).
  absl::Duration op_complaint_time = absl::Seconds(30);
  // Tests: when set, every client write's durability callback passes through it on its
  // way to the store (it returns the callback the store calls), so a test can hold writes
  // in flight. Unset: one null check per write.
  std::function<PersistCallback(PersistCallback)> durable_hook;
  // Tests: when set, runs before every delete this OSD serves (a client's, or a primary's
  // for its replica copy); an error refuses the delete with it (nothing is deleted).
  std::function<absl::Status()> delete_hook;
  // Tests: when set, runs on the map-watch thread with each new map's epoch before this
  // OSD applies the map; it may block, holding this OSD on its older map meanwhile.
  std::function<void(uint64_t epoch)> map_hook;
  // Runs once, on a monitor-client thread, when this process learns it is no longer
  // osd.<id>: the monitor refused its heartbeat or boot (another process booted as this
  // id since, or this instance is blocklisted) or the map's blocklist names this instance.
  // Heartbeats have stopped; the owner must Stop() the OSD (osd_main exits with status 3)
  // and must not do so from the callback. Unset: logged only.
  std::function<void(const absl::Status&)> on_fenced;
};

// The OSD's own counters (its pollers', store's and messengers' are their own lists).
#define MSGR_OSD_COUNTERS(X)                                                                 \
  X(ops, kCounter, kNone, "client writes stored, all pollers")                                \
  X(replica_ops, kCounter, kNone, "replica writes stored (forwarded by a PG's primary)")        \
  X(bytes, kCounter, kBytes, "payload bytes of those writes")                                 \
  X(write_errors, kCounter, kNone, "client writes refused by the store, all pollers")        \
  X(crc_errors, kCounter, kNone, "ring records refused for a bad crc32c, all pollers")       \
  X(ring_high_water_bytes, kGauge, kBytes, "most bytes ever in use in one ring")             \
  X(reads, kCounter, kNone, "reads served")                                                   \
  X(read_errors, kCounter, kNone, "reads answered with an error")                             \
  X(stats, kCounter, kNone, "stat requests served")                                           \
  X(deletes, kCounter, kNone, "objects deleted (durably)")                                    \
  X(lists, kCounter, kNone, "listing pages served")                                           \
  X(rings_attached, kCounter, kNone, "receive rings attached to pollers")                    \
  X(connection_resets, kCounter, kNone, "client sessions that ended")                         \
  X(sessions_superseded, kCounter, kNone, "older sessions of a peer closed when it opened a "    \
    "new one (nothing in flight on them is applied after the new one's writes)")               \
  X(ops_in_flight, kGauge, kNone, "ops not yet answered: writes not acked, requests queued "  \
    "or being served")                                                                         \
  X(slow_ops, kGauge, kNone, "of those, older than the op complaint time (30 s by default)")

MSGR_COUNTER_SNAPSHOT(OsdCounters, MSGR_OSD_COUNTERS);

class Osd : public Dispatcher, public RecordSink {
 public:
  // Opens (recovers) the store, starts pollers and messengers, binds, boots with the
  // monitor and starts heartbeats. Errors name what failed and what to do.
  static absl::StatusOr<std::unique_ptr<Osd>> Start(const OsdOptions& options);
  ~Osd() override;  // Stop()

  // Stops messengers first (no new records), then pollers (in-flight records finish),
  // then the store (final flush). Idempotent.
  void Stop();

  // Messenger address per type ("tcp" -> "127.0.0.1:40123"; "cluster" with a cluster address).
  std::map<std::string, std::string> addrs() const { return addrs_; }
  // perf dump: every counter of the registry, plus the OSD's id, mode and uptime.
  std::string PerfDumpJson() const;
  // dump_sessions: every messenger session (Messenger::DumpSessions), as JSON.
  std::string DumpSessionsJson() const;
  // dump_ops_in_flight: the ops not yet answered, oldest first, with their age and what
  // they wait for, slow ones flagged; num_ops and slow_ops. JSON.
  std::string DumpOpsInFlightJson() const;
  // compact: ObjectStore::Compact() now, on the admin thread; JSON with "status" ("ok" or
  // the error), and the segments and bytes it freed.
  std::string CompactJson();
  // Every counter source of this OSD: the OSD, each poller, the store, each messenger.
  const CounterRegistry& counter_registry() const { return registry_; }

  // Dispatcher
  void OnRingAttached(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring) override;
  void OnMessage(const ConnectionRef& conn, Message m) override;
  void OnReset(const ConnectionRef& conn, const absl::Status& why) override;
  void OnRemoteReset(const ConnectionRef& conn) override;
  void OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) override;

  // RecordSink
  absl::StatusOr<uint32_t> Persist(const RecordView& rec, const WritePart& part,
                                   PersistCallback done) override;
  void AbortWrite(std::string_view oid, uint32_t write_id) override;

 private:
  explicit Osd(const OsdOptions& options);
  absl::Status Init();
  // Gives the map's blocklist to every messenger (Messenger::SetFenced) when it changed:
  // a fenced client's or old OSD incarnation's sessions close and their rings' keys are
  // revoked before the map counts as applied (the next heartbeat reports its epoch).
  void ApplyBlocklist(const mon::v1::ClusterMap& map);
  // This process is fenced (OsdOptions::on_fenced): logs it and tells the owner, once.
  void Fenced(const absl::Status& why);
  OsdCounters Counters() const;
  Poller* PickPoller();
  // Reads run on their own threads: a reply may block on the connection's flow control,
  // which must never happen on a messenger worker (it would stop the acks that free it).
  struct ReadSlot;
  struct RequestQueue;
  void ReadLoop(ReadSlot* slot, RequestQueue* queue);
  // Reads, stats, deletes and listings (proto/osd_protocol.h); one reply each. `slot`
  // says what the op waits for (dump_ops_in_flight).
  void ServeRequest(const ConnectionRef& conn, const Message& m, ReadSlot* slot);
  // Requests queued or being served, and how many of them are slow (under read_mu_).
  void CountRequests(uint64_t now_ns, uint64_t* in_flight, uint64_t* slow) const;
  void IgnoreMalformed(const ConnectionRef& conn, const absl::Status& why);
  // The store's name of `oid` in `pool` (placement::PoolObjectName); INVALID_ARGUMENT for
  // a default-pool oid that would alias another pool's object.
  absl::Status StoreKey(uint32_t pool, const std::string& oid, std::string* key) const;
  // One page of `req`'s pool (names without the pool's qualifier).
  absl::Status ListPool(const ListRequest& req, size_t max, ListBody* body) const;
  // A scrub page: each listed object's size and crc32c, read from the store.
  absl::Status DigestEntries(uint32_t pool, ListBody* body) const;

  const OsdOptions options_;
  // The primary's PG log (before store_: writes in flight may hold tickets until the
  // store and the replicator are gone).
  PgLog pg_log_;
  std::unique_ptr<store::ObjectStore> store_;
  std::vector<std::unique_ptr<Poller>> pollers_;
  size_t tcp_driven_ = 0;  // tcp messengers driven by pollers so far (ms_tcp_threads 0)
  std::vector<std::unique_ptr<Messenger>> messengers_;
  // The map's blocklist as last given to the messengers (the map watch thread only).
  std::string applied_blocklist_;
  uint64_t instance_ = 0;  // this process's messenger instance, as booted (set in Init())
  std::atomic<bool> fenced_{false};
  std::map<std::string, std::string> addrs_;
  std::unique_ptr<mon::MonClient> mon_;
  // Forwards client writes to the PG's other members (pool size > 1); set in Init().
  std::unique_ptr<Replicator> replicator_;
  // Makes each PG's copies complete before this OSD serves it as primary; set in Init().
  std::unique_ptr<Peering> peering_;
  std::unique_ptr<AdminSocket> admin_;
  std::atomic<uint64_t> next_poller_{0};
  std::atomic<uint64_t> reads_{0}, read_errors_{0}, rings_attached_{0}, resets_{0};
  std::atomic<uint64_t> stats_served_{0}, deletes_{0}, lists_{0}, superseded_{0};
  // The session each peer (by name) writes through now. When a client opens a new session
  // (after it gave up on the old one: a restart of this OSD it saw in the map, a reconnect
  // with a new cookie), records may still be in flight on the old one (a socket in TCP
  // retransmission): the old session is closed as the new one's ring attaches, so that an
  // old write is never applied after a newer one. Weak: a reset session is simply gone.
  absl::Mutex sessions_mu_;
  std::map<std::string, std::weak_ptr<Connection>> ring_sessions_ ABSL_GUARDED_BY(sessions_mu_);
  std::atomic<bool> stopped_{false};
  CounterRegistry registry_;

  // A request and when it arrived (OnMessage reads the monotonic clock once per request,
  // ~20 ns on the messenger's thread; nothing is added on the ring path).
  struct QueuedRequest {
    ConnectionRef conn;
    Message m;
    uint64_t arrived_ns = 0;
  };
  // What one read thread serves now. The fields are written under read_mu_ by their
  // thread only, which reads them without it while it serves; dump_ops_in_flight reads
  // them under read_mu_. `waiting_for` names the step the op is in (a static string).
  struct ReadSlot {
    bool busy = false;
    QueuedRequest req;
    std::atomic<const char*> waiting_for{""};
  };
  // Requests waiting for a thread (under read_mu_), and the condition their threads wait on.
  struct RequestQueue {
    std::deque<QueuedRequest> requests;
    absl::CondVar cv;
  };
  mutable absl::Mutex read_mu_;
  // Clients' requests, served by the read threads.
  RequestQueue read_queue_ ABSL_GUARDED_BY(read_mu_);
  // Peer OSDs' requests (a primary's forwarded deletes), served by their own thread: a
  // read thread serving a client's delete waits for the replicas, so two primaries whose
  // read threads all waited on each other would stall if they shared one queue.
  RequestQueue peer_queue_ ABSL_GUARDED_BY(read_mu_);
  bool read_stop_ ABSL_GUARDED_BY(read_mu_) = false;
  // One per read thread, then the peer thread's; set before they start.
  std::unique_ptr<ReadSlot[]> read_slots_;
  size_t read_slot_count_ = 0;
  std::vector<std::thread> read_threads_;
  absl::Time started_ = absl::Now();
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_OSD_H_

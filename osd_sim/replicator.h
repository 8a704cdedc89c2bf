// Primary-copy replication: the OSD that a client writes to (the PG's primary) stores the
// record and forwards it to the other members of the PG's acting set over their cluster
// addresses, as receive-ring records of lossless OSD-to-OSD sessions. The client's ack (the
// ring credit the poller returns) waits for the local store and for every replica's ack
// (Ceph's rule: a write is acknowledged once every member of the acting set has it).
//
//   client --record--> primary ring --Poller--> Persist --> local store ----------.
//                                                   `--> Replicator --peer queue--+--> done
//                                                         sender thread per peer  |
//                                      replica ring <--WriteRecord----------'     |
//                                      replica store --ack (ring credit)----------'
//
// The payload is read from the primary's ring memory (it stays valid until `done` runs);
// the tcp backend copies one under kInlineForwardMaxBytes (64 KiB) into its frame, which
// its lossless resend needs, and sends a larger one from the ring (the frame keeps the
// ring until the peer acks it: PayloadHold, below); the rdma backend
// (OsdOptions::cluster_ms_type "rdma") stages a small one in its registered mirror, and
// sends a large one (Messenger::zero_copy_min_bytes, 256 KiB) from the client's ring
// itself: the HCA reads it there and writes the replica's ring one-sidedly, with no copy
// by this OSD's CPU. Then `done`, whose ack lets the client reuse that memory, waits also
// until the session no longer reads it (PayloadHold): the replica's ack, and the HCA's
// completion (a retransmission reads the source again), or the session's end.
// Pollers never block on a peer: each peer has a sender thread, so two OSDs forwarding to
// each other cannot deadlock on each other's ring credit. A small record whose peer has
// nothing queued is written by the poller itself, without waiting for credit (no ring
// room: it goes to the sender thread, first in line); records reach each peer in order.
// Over rdma that write can still wait for the local send queue (up to a second when it is
// full) or for a resume of that peer's session in progress: never for the peer's poller.
//
// Members that are down in the map are skipped; a write needs `min_size` copies (the
// local one included) or it is refused with UNAVAILABLE, which the client retries until
// its op timeout. A peer that goes down while it holds forwarded records is dropped when
// the map says so: its records count as missing copies (it is synced before it serves the
// PG again). A member that stays up in the map but did not take a copy (it refused it, its
// session ended, it could not be reached) fails the write with UNAVAILABLE instead: it
// would still count as complete for the PG (peering trusts members that stayed up), so an
// acknowledgement without its copy could be lost if it became a sync's source. The client
// retries until the copy goes through or the map takes the member down.
//
// Deletes: the primary deletes its copy, then sends the delete (a kDelete request) to the
// PG's up replicas over the same sessions and answers the client once each has replied,
// with the same min_size rule (ReplicateDelete).
//
// PG log (osd_sim/pg_log.h): as primary, every record and delete is logged with the
// replicas it was sent to, each replica's outcome and the local store's; peering then
// syncs a returning member by copying only what it missed, and the PG's watermark (the
// store seq before which every such write was taken everywhere) tells which objects this
// OSD may hold in a version nobody else has, should it return as the PG's primary.
//
// Thread-safety: every method may be called from any thread.
#ifndef MSGR_OSD_SIM_REPLICATOR_H_
#define MSGR_OSD_SIM_REPLICATOR_H_

#include <atomic>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/base/perf_counters.h"
#include "msg/messenger.h"
#include "msg/ring/ring.h"
#include "osd_sim/pg_log.h"
#include "osd_sim/poller.h"
#include "proto/osd_protocol.h"
#include "proto/placement.h"

namespace msgr::osd {

#define MSGR_REPLICATION_COUNTERS(X)                                                          \
  X(pool_size, kGauge, kNone, "copies of each object, the largest pool's")                  \
  X(writes_replicated, kCounter, kNone, "client records this OSD forwarded as primary")      \
  X(records_forwarded, kCounter, kNone, "records sent to replicas (one per replica)")        \
  X(bytes_forwarded, kCounter, kBytes, "payload bytes of those records")                     \
  X(replica_acks, kCounter, kNone, "forwarded records a replica acknowledged")              \
  X(replica_failures, kCounter, kNone, "forwarded records a replica refused or lost (down)") \
  X(writes_degraded, kCounter, kNone, "writes acknowledged with fewer copies than the size") \
  X(writes_replica_missing, kCounter, kNone, "writes not acknowledged: a member up in the map " \
    "did not take its copy (the client retries)")                                               \
  X(writes_below_min_size, kCounter, kNone, "writes refused: fewer than min_size copies up") \
  X(peers, kGauge, kNone, "replica peers this OSD has sessions with")                        \
  X(deletes_replicated, kCounter, kNone, "client deletes this OSD sent to replicas as primary") \
  X(replica_delete_failures, kCounter, kNone, "deletes a replica refused, lost or left unanswered") \
  X(forwards_in_flight, kGauge, kNone, "forwarded records not yet acknowledged")             \
  X(inline_forwards, kCounter, kNone,                                                        \
    "records the poller sent to a replica itself (small, the peer's queue empty, ring room)") \
  X(inline_forwards_deferred, kCounter, kNone,                                               \
    "records the poller tried to send itself but left to the sender thread (no ring room)")

MSGR_COUNTER_SNAPSHOT(ReplicationCounters, MSGR_REPLICATION_COUNTERS);

struct ReplicatorOptions {
  uint32_t self = 0;  // this OSD's id
  // The backend of the peer sessions (the messenger's type): a peer that serves neither it
  // publicly nor on a cluster address of its own is not dialled (its copies count missing).
  std::string ms_type = "tcp";
  // Longest a sender waits for a replica's ring credit before it counts the record as
  // lost on that replica (the map normally drops a dead peer well before).
  absl::Duration forward_timeout = absl::Seconds(30);
};

class Replicator {
 public:
  // Peer sessions are opened with `messenger` (the OSD's cluster messenger, or its
  // public one of the cluster type), whose Dispatcher passes OnRecordsAcked/OnReset here.
  // `log` (may be null: nothing logged) outlives this object.
  Replicator(const ReplicatorOptions& options, Messenger* messenger, PgLog* log = nullptr);
  ~Replicator();  // Stop()
  // Drops every peer session; forwards still queued count as lost. Idempotent.
  void Stop();

  // A new map (any thread, epochs in order): the pool size, acting sets and the peers'
  // cluster addresses. A peer that is no longer up, or came back as a new incarnation,
  // loses its session; what it had not acknowledged counts as lost.
  void HandleMap(placement::PlacementMap map);
  // The same with every pool of the map: one PlacementMap per pool, all of one epoch (the
  // first one's OSDs are used for peers). A record's pool is its oid's
  // (placement::SplitPoolObjectName); each pool has its own size and min_size.
  // REQUIRES: `pools` is not empty.
  void HandleMaps(std::vector<placement::PlacementMap> pools);
  // True when some pool keeps more than one copy (the only case where Persist asks us).
  bool replicating() const { return pool_size_.load(std::memory_order_relaxed) > 1; }

  // One client record to replicate (the local store takes it too). Begin() decides who
  // gets it and returns what the local store's completion must call, or an error at once
  // (below min_size: nothing was stored or sent); `done` then runs exactly once, when the
  // local store and every replica are through. After the local store accepted the record,
  // Forward() sends it to the replicas (`part.write_id`: the store's id of the write the
  // record belongs to); if the store refused it, the caller drops the Write (done never
  // runs). `part.ring`, when set, is the ring the record is in: over rdma a large payload
  // is then sent from there (no copy on this OSD), and `done` -- whose ack releases that
  // ring memory to the client -- waits until no session can read it any more (the
  // replica acknowledged it and the HCA is done with it, or that session ended).
  class Write;
  absl::StatusOr<std::shared_ptr<Write>> Begin(const RecordView& rec, const WritePart& part,
                                               PersistCallback done);
  PersistCallback LocalCallback(const std::shared_ptr<Write>& w);
  void Forward(const std::shared_ptr<Write>& w, const RecordView& rec, const WritePart& part);
  // The store dropped an unfinished write of several records.
  void AbortWrite(uint32_t write_id);

  // A client's delete of `oid` in pool `pool`, whose local copy the caller deletes: the PG's
  // up replicas to send it to (after the local delete), logged, or UNAVAILABLE at once
  // below min_size (then the caller deletes nothing).
  struct DeletePlan {
    std::vector<int> peers;
    PgLog::Ticket logged;  // each peer's outcome goes here (dropped: counted as missed)
  };
  absl::StatusOr<DeletePlan> DeleteTargets(uint32_t pool, std::string_view oid);
  // Sends the delete to `plan.peers` and waits until each replied, its session
  // ended or `timeout` passed. OK when at least min_size copies are gone (the local one,
  // `local_ok`, included) and every replica that did not confirm has left the map (down, or
  // restarted: it is synced before it serves again); UNAVAILABLE naming the replicas that
  // did not confirm otherwise (one still up would keep the object as a complete copy).
  // A replica without the object counts as done. Blocks: not on a messenger thread.
  absl::Status ReplicateDelete(uint32_t pool, const std::string& oid, const DeletePlan& plan,
                               bool local_ok, absl::Duration timeout);
  // Sends the request `make(tid)` returns to each of `peers` (opening sessions as needed)
  // and waits until each replied, its session ended or `timeout` passed: one result per
  // peer, in order (UNAVAILABLE when there was no answer; the reply otherwise, whose own
  // code says how the peer served it). Blocks: not on a messenger thread.
  std::vector<absl::StatusOr<Reply>> CallAll(const std::vector<int>& peers,
                                             const std::function<Message(uint64_t)>& make,
                                             absl::Duration timeout);
  // The same with a request per entry: `make(i, tid)` encodes the one for peers[i] (a peer
  // may appear several times: its requests are in flight together).
  std::vector<absl::StatusOr<Reply>> CallEach(
      const std::vector<int>& peers, const std::function<Message(size_t, uint64_t)>& make,
      absl::Duration timeout);
  // A reply from a peer (OnMessage): true when it answers one of our requests.
  bool OnReply(const ConnectionRef& conn, const Message& m);

  // Dispatcher hooks: true when `conn` is one of our peer sessions.
  bool OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks);
  bool OnReset(const ConnectionRef& conn, const absl::Status& why);

  ReplicationCounters counters() const;

 private:
  struct Peer;
  struct Item;
  struct PayloadHold;
  void SendLoop(Peer* peer);
  // WriteRecord of `item` to `conn`: with the write's PayloadHold as the payload's owner
  // when it has one (WriteRecordShared: a large payload is read from the client's ring by
  // the HCA, or by tcp's sendmsg, not staged or copied), else copied by the backend.
  absl::Status SendItem(const ConnectionRef& conn, const Item& item, absl::Duration timeout);
  // One WriteRecord of `item` to `peer` at a time, in queue order: StartSendLocked before
  // it (outside mu_), FinishSendLocked with its status after, or UnstartSendLocked when it
  // placed nothing (no ring room): the item goes back first in the queue.
  void StartSendLocked(Peer* peer, const std::shared_ptr<Item>& item)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void UnstartSendLocked(Peer* peer, std::shared_ptr<Item> item) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void FinishSendLocked(Peer* peer, const std::shared_ptr<Item>& item, const absl::Status& st)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records up to this size are sent by the poller itself when the peer's queue is empty
  // and its ring has room (a thread wake-up per record costs more than the copy); larger
  // ones always go through the peer's sender thread, which copies them off the poller.
  static constexpr size_t kInlineForwardMaxBytes = 64 << 10;
  // Resolves `item`'s copy on its peer (`s` OK: acknowledged; `gone`: a failure the map
  // excuses, see Write::Finish). Called once per item.
  static void Resolve(const std::shared_ptr<Item>& item, const absl::Status& s, bool gone);
  // Ends `peer`'s session: every item not being copied right now is resolved as lost,
  // excused when `gone` (the map took the peer down or saw it restart).
  void DropPeerLocked(int id, const std::string& why, bool gone) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // True when the map no longer has `id` up (as the incarnation up since `up_from`, unless
  // 0): a copy it missed is excused, it is synced before it serves the PG again.
  bool LeftTheMapLocked(int id, uint64_t up_from = 0) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The session with `id` (opened on first use), or null if the map has no address.
  Peer* PeerLocked(int id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The up members of `oid`'s PG in pool `pool_id` other than this OSD, or UNAVAILABLE
  // (with why) when the pool is unknown or they are fewer than min_size - 1.
  // `*pg`: the object's PG.
  absl::StatusOr<std::vector<int>> UpReplicasLocked(uint32_t pool_id, std::string_view oid,
                                                    placement::PoolSize* pool, uint32_t* pg)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Marks down and joins the peers dropped so far (outside mu_: MarkDown calls back).
  void ReapRetired();

  const ReplicatorOptions options_;
  Messenger* const messenger_;
  PgLog* const log_;
  // A forwarded payload at least this large is sent from the client's ring, held until
  // the session no longer reads it (Write's PayloadHold): over rdma one the backend does
  // not stage anyway (Messenger::zero_copy_min_bytes), over tcp one of 64 KiB or more
  // (copying a 4 MiB record into a frame for each replica was 8 MiB of memcpy per write).
  // A smaller one is copied into tcp's frame, which costs less than the hold.
  const size_t from_ring_min_bytes_;
  std::atomic<uint32_t> pool_size_{1};

  mutable absl::Mutex mu_;
  std::shared_ptr<const placement::PlacementMap> map_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, std::shared_ptr<const placement::PlacementMap>> pools_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::unique_ptr<Peer>> peers_ ABSL_GUARDED_BY(mu_);
  std::vector<std::unique_ptr<Peer>> retired_ ABSL_GUARDED_BY(mu_);
  // Requests sent to peers (deletes), by tid: the peer, and its answer once it came.
  struct PeerRequest {
    int peer = 0;
    bool answered = false;
    absl::StatusOr<Reply> reply = absl::UnavailableError("no answer");
  };
  std::map<uint64_t, PeerRequest> requests_ ABSL_GUARDED_BY(mu_);
  uint64_t next_request_tid_ ABSL_GUARDED_BY(mu_) = 1;
  absl::CondVar requests_cv_;
  std::atomic<uint64_t> degraded_{0};  // writes acknowledged with fewer copies than size
  std::atomic<uint64_t> replica_missing_{0};  // writes failed: an up member lacks its copy
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  ReplicationCounters counters_ ABSL_GUARDED_BY(mu_);
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_REPLICATOR_H_

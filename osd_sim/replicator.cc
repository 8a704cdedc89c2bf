#include "osd_sim/replicator.h"

#include <algorithm>
#include <utility>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "msg/ring/ring_format.h"
#include "proto/osd_protocol.h"
#include "spdlog/spdlog.h"

namespace msgr::osd {
namespace {

// A write of several records takes a block of this many forward tids, so that its parts
// keep consecutive tids on a peer session that carries other records in between (the
// replica's poller matches a part to its write by oid and next tid).
constexpr uint64_t kPartTidBlock = uint64_t{1} << 20;

}  // namespace

// What a write's `done` waits for besides its copies: the memory its payload is sent from.
// A session that sends the payload from the client's ring (WriteRecordShared) holds a
// reference until no HCA can read it any more; the write's outcome is settled before
// (Write::Finish), and `done` runs, with it, as the last reference goes. Its ack is the
// ring credit that lets the client overwrite that memory.
struct Replicator::PayloadHold {
  std::shared_ptr<RecvRing> ring;  // keeps the payload's memory mapped
  PersistCallback done;
  absl::Status result;
  bool finished = false;  // set by Write::Finish before it drops its reference
  ~PayloadHold() {
    if (finished && done) done(std::move(result));  // not finished: dropped unstored
  }
};

// One client record's replication: the local copy plus one copy per replica peer.
class Replicator::Write {
 public:
  // `ring`: the ring the payload is in, when sessions may send it from there (else null).
  Write(PersistCallback done, std::shared_ptr<RecvRing> ring, int outstanding, uint32_t size,
        uint32_t min_size, std::vector<int> peers, std::atomic<uint64_t>* degraded,
        std::atomic<uint64_t>* refused, PgLog::Ticket logged)
      : held_(ring != nullptr),
        outstanding_(outstanding),
        size_(size),
        min_size_(min_size),
        peers_(std::move(peers)),
        degraded_(degraded),
        refused_(refused),
        logged_(std::move(logged)) {
    if (held_) {
      hold_ = std::make_shared<PayloadHold>();
      hold_->ring = std::move(ring);
      hold_->done = std::move(done);
    } else {
      done_ = std::move(done);
    }
  }

  const std::vector<int>& peers() const { return peers_; }

  // What a session sending the payload from the client's ring keeps until it no longer
  // reads it; null when the record is not in a ring (or the write is through).
  std::shared_ptr<const void> payload_owner() {
    if (!held_) return nullptr;
    absl::MutexLock l(&mu_);
    return hold_;
  }

  // Replica `peer`'s copy is through (Finish), and its outcome goes to the PG log.
  void ReplicaDone(int peer, const absl::Status& s, bool excused) {
    logged_.Resolved(peer, s.ok());
    Finish(/*local=*/false, s, excused);
  }

  // One copy is through: the local one (`local`) or a replica's; the last one runs `done`.
  // A replica's copy that failed is excused (`excused`) only when the map took that member
  // down or saw it restart: it is then synced before it serves this PG again. A member that
  // stays up without the copy fails the write (not acknowledged, the client retries): the
  // member still counts as complete for the PG, and if it became the source of a sync the
  // acknowledged write would be lost (Ceph's rule: the whole acting set has every
  // acknowledged write).
  void Finish(bool local, const absl::Status& s, bool excused = false) {
    PersistCallback done;
    std::shared_ptr<PayloadHold> hold;
    absl::Status result;
    {
      absl::MutexLock l(&mu_);
      if (s.ok()) {
        ++copies_;
        if (local) logged_.LocalDone();  // the PG's watermark (pg_log.h) may pass it
      } else if (local) {
        local_ = s;
        logged_.Diverged();  // the replicas may hold what this copy lacks
      } else if (!excused && replica_error_.ok()) {
        replica_error_ = s;
      }
      if (--outstanding_ > 0) return;
      if (!local_.ok()) {
        result = local_;
      } else if (!replica_error_.ok()) {
        refused_->fetch_add(1, std::memory_order_relaxed);
        result = absl::UnavailableError(absl::StrCat(
            "not acknowledged: ", replica_error_.message(),
            " while it is up in the map (the write waits for it, or for the map to take it down)"));
      } else if (copies_ < min_size_) {
        result = absl::UnavailableError(absl::StrCat(
            "only ", copies_, " of ", size_, " copies written (min_size ", min_size_, ")"));
      } else if (copies_ < size_) {
        degraded_->fetch_add(1, std::memory_order_relaxed);
      }
      done = std::move(done_);
      hold = std::move(hold_);
    }
    if (done) done(std::move(result));
    if (hold == nullptr) return;
    // `done` runs as the last reference goes: here, unless a session still reads the payload.
    hold->result = std::move(result);
    hold->finished = true;
  }

 private:
  absl::Mutex mu_;
  const bool held_;  // the payload may be sent from its ring: hold_ has `done`, not done_
  PersistCallback done_ ABSL_GUARDED_BY(mu_);
  std::shared_ptr<PayloadHold> hold_ ABSL_GUARDED_BY(mu_);
  int outstanding_ ABSL_GUARDED_BY(mu_);
  uint32_t copies_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status local_ ABSL_GUARDED_BY(mu_);
  absl::Status replica_error_ ABSL_GUARDED_BY(mu_);  // the first unexcused replica failure
  const uint32_t size_;
  const uint32_t min_size_;
  const std::vector<int> peers_;
  std::atomic<uint64_t>* const degraded_;
  std::atomic<uint64_t>* const refused_;
  const PgLog::Ticket logged_;
};

// One record on its way to one peer.
struct Replicator::Item {
  std::shared_ptr<Write> write;
  int peer = 0;
  RecordDesc desc;           // its oid is ring memory too, like the payload
  std::string_view payload;  // ring memory of the client's ring, valid until write's done
  bool copying = false;      // the sender is inside WriteRecord with it (under mu_)
  bool resolved = false;     // under mu_
};

struct Replicator::Peer {
  int id = 0;
  std::string addr;
  uint64_t up_from = 0;
  ConnectionRef conn;
  std::deque<std::shared_ptr<Item>> queue;                        // not yet sent
  std::unordered_map<uint64_t, std::shared_ptr<Item>> in_flight;  // sent, by forward tid
  uint64_t next_tid = 1;
  // write_id -> (forward tid of its first part, client tid of its first part)
  std::unordered_map<uint32_t, std::pair<uint64_t, uint64_t>> parts;
  absl::CondVar cv;
  // A WriteRecord to this peer is running (the sender thread's, or a poller's inline
  // one): the next record waits for it, so records reach the peer in the order queued.
  bool sending = false;
  bool closing = false;
  // Set with closing: the map took the peer down or saw it restart (its lost copies are
  // excused, Write::Finish), rather than a session that ended while it is up.
  bool gone = false;
  std::string closed_why;
  std::thread thread;
};

Replicator::Replicator(const ReplicatorOptions& options, Messenger* messenger, PgLog* log)
    : options_(options),
      messenger_(messenger),
      log_(log),
      from_ring_min_bytes_(options.ms_type == "rdma" ? messenger->zero_copy_min_bytes()
                                                     : kInlineForwardMaxBytes) {}

Replicator::~Replicator() { Stop(); }

void Replicator::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopped_ = true;
    while (!peers_.empty()) {
      DropPeerLocked(peers_.begin()->first, "the OSD is stopping", /*gone=*/false);
    }
  }
  ReapRetired();
}

void Replicator::HandleMap(placement::PlacementMap map) {
  std::vector<placement::PlacementMap> pools;
  pools.push_back(std::move(map));
  HandleMaps(std::move(pools));
}

void Replicator::HandleMaps(std::vector<placement::PlacementMap> pools) {
  {
    absl::MutexLock l(&mu_);
    uint32_t largest = 1;
    std::map<uint32_t, std::shared_ptr<const placement::PlacementMap>> by_id;
    for (placement::PlacementMap& p : pools) {
      largest = std::max(largest, p.pool().size);
      const uint32_t id = p.pool_id();
      by_id[id] = std::make_shared<const placement::PlacementMap>(std::move(p));
    }
    pool_size_.store(largest, std::memory_order_relaxed);
    auto next = by_id.begin()->second;
    std::vector<std::pair<int, std::string>> drop;
    for (const auto& [id, peer] : peers_) {
      const placement::OsdEntry* e = next->Find(id);
      if (e == nullptr || !e->up) {
        drop.emplace_back(id, absl::StrCat("osd.", id, " is down in map epoch ", next->epoch()));
      } else if (e->up_from != peer->up_from) {
        drop.emplace_back(id, absl::StrCat("osd.", id, " restarted (up from epoch ", e->up_from,
                                           ")"));
      }
    }
    for (const auto& [id, why] : drop) DropPeerLocked(id, why, /*gone=*/true);
    map_ = std::move(next);
    pools_ = std::move(by_id);
  }
  ReapRetired();
}

absl::StatusOr<std::shared_ptr<Replicator::Write>> Replicator::Begin(const RecordView& rec,
                                                                     const WritePart& part,
                                                                     PersistCallback done) {
  const std::string_view name(rec.oid, rec.header->oid_len);
  uint32_t pool_id;
  std::string_view oid;
  if (!placement::SplitPoolObjectName(name, &pool_id, &oid)) {
    return absl::InvalidArgumentError("malformed pool-qualified object id");
  }
  // The store's seq before mu_: its source takes the store's lock, which must not nest
  // inside ours (a store callback may reach this replicator).
  const uint64_t low = log_ != nullptr ? log_->SeqNow() : 0;
  absl::MutexLock l(&mu_);
  placement::PoolSize pool;
  uint32_t pg;
  auto peers = UpReplicasLocked(pool_id, oid, &pool, &pg);
  if (!peers.ok()) return peers.status();
  ++counters_.writes_replicated;
  const int outstanding = 1 + static_cast<int>(peers->size());
  PgLog::Ticket logged = log_ != nullptr ? log_->Append(PgId{pool_id, pg}, oid, *peers, low)
                                         : PgLog::Ticket();
  // A large payload is sent from where it lies (from_ring_min_bytes_).
  std::shared_ptr<RecvRing> ring;
  if (part.ring != nullptr && rec.header->payload_len >= from_ring_min_bytes_) ring = *part.ring;
  return std::make_shared<Write>(std::move(done), std::move(ring), outstanding, pool.size,
                                 pool.min_size,
                                 std::move(*peers), &degraded_, &replica_missing_,
                                 std::move(logged));
}

absl::StatusOr<std::vector<int>> Replicator::UpReplicasLocked(uint32_t pool_id,
                                                              std::string_view oid,
                                                              placement::PoolSize* pool,
                                                              uint32_t* pg_out) {
  if (stopped_ || map_ == nullptr) return absl::UnavailableError("the OSD has no map yet");
  auto it = pools_.find(pool_id);
  if (it == pools_.end()) {
    // A pool newer than this OSD's map: the client retries until the map arrives.
    return absl::UnavailableError(
        absl::StrCat("no pool ", pool_id, " in this OSD's map epoch ", map_->epoch()));
  }
  const placement::PlacementMap& pmap = *it->second;
  const uint32_t pg = pmap.PgOf(oid);
  *pg_out = pg;
  *pool = pmap.pool();
  std::vector<int> peers;
  std::string down;
  for (int id : pmap.ActingOfPg(pg)) {
    if (id == static_cast<int>(options_.self)) continue;
    const placement::OsdEntry* e = pmap.Find(id);
    if (e != nullptr && e->up) {
      peers.push_back(id);
    } else {
      absl::StrAppend(&down, down.empty() ? "" : ", ", "osd.", id);
    }
  }
  const uint32_t possible = 1 + static_cast<uint32_t>(peers.size());
  if (possible < pool->min_size) {
    ++counters_.writes_below_min_size;
    return absl::UnavailableError(absl::StrCat(
        "pg ", pool_id, ".", pg, " of '", std::string(oid), "': ", possible, " of ", pool->size,
        " copies can be written, min_size is ", pool->min_size, " (down: ", down,
        "); the write waits for them"));
  }
  return peers;
}

absl::StatusOr<Replicator::DeletePlan> Replicator::DeleteTargets(uint32_t pool,
                                                                 std::string_view oid) {
  const uint64_t low = log_ != nullptr ? log_->SeqNow() : 0;  // before mu_, as in Begin
  absl::MutexLock l(&mu_);
  placement::PoolSize size;
  uint32_t pg;
  auto peers = UpReplicasLocked(pool, oid, &size, &pg);
  if (!peers.ok()) return peers.status();
  DeletePlan plan;
  if (log_ != nullptr) plan.logged = log_->Append(PgId{pool, pg}, oid, *peers, low);
  plan.peers = std::move(*peers);
  return plan;
}

std::vector<absl::StatusOr<Reply>> Replicator::CallAll(
    const std::vector<int>& peers, const std::function<Message(uint64_t)>& make,
    absl::Duration timeout) {
  return CallEach(peers, [&](size_t, uint64_t tid) { return make(tid); }, timeout);
}

std::vector<absl::StatusOr<Reply>> Replicator::CallEach(
    const std::vector<int>& peers, const std::function<Message(size_t, uint64_t)>& make,
    absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  std::vector<uint64_t> tids(peers.size(), 0);  // 0: not sent
  std::vector<ConnectionRef> conns(peers.size());
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < peers.size(); ++i) {
      Peer* peer = stopped_ ? nullptr : PeerLocked(peers[i]);
      if (peer == nullptr) continue;
      tids[i] = next_request_tid_++;
      requests_[tids[i]].peer = peers[i];
      conns[i] = peer->conn;
    }
  }
  // Outside mu_: a send may wait for the session's flow control.
  for (size_t i = 0; i < peers.size(); ++i) {
    if (tids[i] == 0) continue;
    if (absl::Status s = conns[i]->Send(make(i, tids[i])); !s.ok()) {
      absl::MutexLock l(&mu_);
      auto it = requests_.find(tids[i]);
      if (it != requests_.end() && !it->second.answered) {
        it->second.answered = true;
        it->second.reply = s;
      }
    }
  }
  std::vector<absl::StatusOr<Reply>> out;
  absl::MutexLock l(&mu_);
  auto all_answered = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    for (uint64_t tid : tids) {
      auto it = requests_.find(tid);
      if (tid != 0 && it != requests_.end() && !it->second.answered) return false;
    }
    return true;
  };
  while (!all_answered() && !requests_cv_.WaitWithDeadline(&mu_, deadline)) {
  }
  for (size_t i = 0; i < peers.size(); ++i) {
    auto it = requests_.find(tids[i]);
    if (tids[i] == 0 || it == requests_.end()) {
      out.push_back(absl::UnavailableError(absl::StrCat("no session with osd.", peers[i])));
      continue;
    }
    out.push_back(it->second.answered
                      ? std::move(it->second.reply)
                      : absl::UnavailableError(absl::StrCat("osd.", peers[i], " did not answer within ",
                                                            absl::FormatDuration(timeout))));
    requests_.erase(it);
  }
  return out;
}

absl::Status Replicator::ReplicateDelete(uint32_t pool, const std::string& oid,
                                         const DeletePlan& plan, bool local_ok,
                                         absl::Duration timeout) {
  const std::vector<int>& peers = plan.peers;
  uint32_t min_size = 1;
  // Each replica's incarnation now: one that fails and is still that incarnation, up, at
  // the end keeps the object while it counts as complete (as for writes, Write::Finish).
  std::vector<uint64_t> up_from(peers.size(), 0);
  {
    absl::MutexLock l(&mu_);
    if (auto it = pools_.find(pool); it != pools_.end()) min_size = it->second->pool().min_size;
    ++counters_.deletes_replicated;
    for (size_t i = 0; i < peers.size(); ++i) {
      const placement::OsdEntry* e = map_ == nullptr ? nullptr : map_->Find(peers[i]);
      if (e != nullptr) up_from[i] = e->up_from;
    }
  }
  auto replies = CallAll(
      peers,
      [&](uint64_t tid) {
        ObjectRequest req;
        req.type = kDelete;
        req.tid = tid;
        req.oid = oid;
        req.pool = pool;
        return Encode(req);
      },
      timeout);
  if (local_ok) plan.logged.LocalDone();
  uint32_t copies_gone = local_ok ? 1 : 0;
  std::string missing, kept_by_up;
  uint64_t failures = 0;
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < peers.size(); ++i) {
      absl::Status s = replies[i].ok() ? absl::Status(replies[i]->code, replies[i]->error)
                                       : replies[i].status();
      const bool gone = s.ok() || absl::IsNotFound(s);  // a replica without it is done too
      plan.logged.Resolved(peers[i], gone);
      if (gone) {
        ++copies_gone;
        continue;
      }
      ++failures;
      const std::string what = absl::StrCat("osd.", peers[i], " (", s.message(), ")");
      absl::StrAppend(&missing, missing.empty() ? "" : ", ", what);
      if (!LeftTheMapLocked(peers[i], up_from[i])) absl::StrAppend(&kept_by_up, kept_by_up.empty() ? "" : ", ", what);
    }
    counters_.replica_delete_failures += failures;
  }
  if (!kept_by_up.empty()) {
    return absl::UnavailableError(absl::StrCat("the delete is not confirmed by ", kept_by_up,
                                               ", up in the map (the client retries)"));
  }
  if (copies_gone >= min_size) {
    if (!missing.empty()) {
      spdlog::warn("osd.{}: delete of '{}' left copies on: {}", options_.self, oid, missing);
    }
    return absl::OkStatus();
  }
  return absl::UnavailableError(absl::StrCat("the delete reached ", copies_gone,
                                             " copies, min_size is ", min_size, "; not confirmed: ",
                                             missing));
}

bool Replicator::OnReply(const ConnectionRef& conn, const Message& m) {
  if (!IsReply(m.type)) return false;
  auto reply = DecodeReply(m);
  if (!reply.ok()) return false;
  absl::MutexLock l(&mu_);
  auto it = requests_.find(reply->tid);
  if (it == requests_.end() || it->second.answered) return false;
  // Only the peer the request went to may answer it.
  auto peer = peers_.find(it->second.peer);
  if (peer == peers_.end() || peer->second->conn.get() != conn.get()) return false;
  it->second.answered = true;
  it->second.reply = std::move(*reply);
  requests_cv_.SignalAll();
  return true;
}

PersistCallback Replicator::LocalCallback(const std::shared_ptr<Write>& w) {
  return [w](absl::Status s) { w->Finish(/*local=*/true, s); };
}

void Replicator::Forward(const std::shared_ptr<Write>& w, const RecordView& rec,
                         const WritePart& part) {
  const RecordHeader& h = *rec.header;
  struct Lost {
    std::shared_ptr<Item> item;
    absl::Status why;
    bool gone;
  };
  std::vector<Lost> lost;
  struct InlineSend {
    Peer* peer;
    std::shared_ptr<Item> item;
    ConnectionRef conn;
  };
  absl::InlinedVector<InlineSend, 4> inline_sends;  // no allocation per record
  {
    absl::MutexLock l(&mu_);
    for (int id : w->peers()) {
      auto item = std::make_shared<Item>();
      item->write = w;
      item->peer = id;
      item->payload = std::string_view(reinterpret_cast<const char*>(rec.payload), h.payload_len);
      Peer* peer = stopped_ ? nullptr : PeerLocked(id);
      if (peer == nullptr) {
        // Down in the map since Begin: excused. Up but unreachable: the write fails.
        const bool gone = !stopped_ && LeftTheMapLocked(id);
        lost.push_back({std::move(item),
                        absl::UnavailableError(absl::StrCat(
                            "osd.", id, stopped_ ? " was not sent the copy (this OSD is stopping)"
                                                 : " has no replication session")),
                        gone});
        continue;
      }
      item->desc.oid = std::string_view(rec.oid, h.oid_len);  // ring memory, as the payload
      item->desc.object_offset = h.object_offset;
      // Same oid, same payload: the crc the poller checked (no second crc32c pass here).
      item->desc.payload_crc = h.payload_crc;
      item->desc.flags = h.flags & (kRecordFlagTruncate | kRecordFlagLast);
      switch (part.kind) {
        case WritePart::Kind::kWhole:
          item->desc.tid = peer->next_tid++;
          break;
        case WritePart::Kind::kFirst: {
          const uint64_t base = (peer->next_tid + kPartTidBlock - 1) / kPartTidBlock * kPartTidBlock;
          peer->next_tid = base + kPartTidBlock;
          peer->parts[part.write_id] = {base, h.tid};
          item->desc.tid = base;
          break;
        }
        case WritePart::Kind::kMiddle:
        case WritePart::Kind::kLast: {
          auto it = peer->parts.find(part.write_id);
          if (it == peer->parts.end() || h.tid - it->second.second >= kPartTidBlock) {
            // Its first part went to an earlier session with this peer (since dropped):
            // the replica cannot complete the write.
            lost.push_back({std::move(item),
                            absl::UnavailableError(absl::StrCat(
                                "osd.", id, " lost the first part of this write (its session "
                                "ended)")),
                            false});
            continue;
          }
          item->desc.tid = it->second.first + (h.tid - it->second.second);
          if (part.kind == WritePart::Kind::kLast) peer->parts.erase(it);
          break;
        }
      }
      // (Peer sessions are lossless: a zero-timeout WriteRecord that fails has placed
      // nothing, so the record can go to the sender thread as it is.)
      if (h.payload_len <= kInlineForwardMaxBytes && peer->queue.empty() && !peer->sending) {
        StartSendLocked(peer, item);
        inline_sends.push_back({peer, std::move(item), peer->conn});
        continue;
      }
      peer->queue.push_back(std::move(item));
      if (!peer->sending) peer->cv.Signal();  // else FinishSendLocked signals
    }
    counters_.replica_failures += lost.size();
  }
  for (Lost& l : lost) l.item->write->ReplicaDone(l.item->peer, l.why, l.gone);
  // On this (the poller's) thread, without waiting for ring credit: a peer with no room
  // now gets the record from its sender thread, first in its queue.
  for (InlineSend& send : inline_sends) {
    const absl::Status st = SendItem(send.conn, *send.item, absl::ZeroDuration());
    absl::MutexLock l(&mu_);
    if (absl::IsDeadlineExceeded(st) && !send.item->resolved) {
      if (send.peer->closing) {  // not sent, and never will be: lost with the session
        FinishSendLocked(send.peer, send.item, absl::UnavailableError(send.peer->closed_why));
        continue;
      }
      UnstartSendLocked(send.peer, std::move(send.item));
      ++counters_.inline_forwards_deferred;
      continue;
    }
    if (st.ok()) ++counters_.inline_forwards;
    FinishSendLocked(send.peer, send.item, st);
  }
}

void Replicator::StartSendLocked(Peer* peer, const std::shared_ptr<Item>& item) {
  peer->sending = true;
  item->copying = true;
  peer->in_flight[item->desc.tid] = item;
}

void Replicator::UnstartSendLocked(Peer* peer, std::shared_ptr<Item> item) {
  item->copying = false;
  peer->sending = false;
  peer->in_flight.erase(item->desc.tid);
  peer->queue.push_front(std::move(item));
  peer->cv.Signal();
}

void Replicator::FinishSendLocked(Peer* peer, const std::shared_ptr<Item>& item,
                                  const absl::Status& st) {
  item->copying = false;
  peer->sending = false;
  if (!peer->queue.empty()) peer->cv.Signal();  // the sender thread's turn
  if (st.ok()) {
    ++counters_.records_forwarded;
    counters_.bytes_forwarded += item->payload.size();
  }
  // The bytes are copied (or never will be): from here on a drop may resolve it.
  if (item->resolved) return;
  if (!st.ok() || peer->closing) {
    if (!st.ok()) {
      spdlog::warn("osd.{}: forwarding '{}' to osd.{} failed: {}", options_.self,
                   item->desc.oid, peer->id, st.ToString());
    }
    peer->in_flight.erase(item->desc.tid);
    ++counters_.replica_failures;
    item->resolved = true;
    if (peer->closing) {
      Resolve(item, absl::UnavailableError(peer->closed_why), peer->gone);
    } else {
      Resolve(item, absl::UnavailableError(absl::StrCat("forwarding to osd.", peer->id,
                                                        " failed: ", st.message())),
              false);
    }
  }
}

bool Replicator::LeftTheMapLocked(int id, uint64_t up_from) const {
  const placement::OsdEntry* e = map_ == nullptr ? nullptr : map_->Find(id);
  return e == nullptr || !e->up || (up_from != 0 && e->up_from != up_from);
}

void Replicator::AbortWrite(uint32_t write_id) {
  absl::MutexLock l(&mu_);
  for (auto& [id, peer] : peers_) peer->parts.erase(write_id);
}

Replicator::Peer* Replicator::PeerLocked(int id) {
  auto it = peers_.find(id);
  if (it != peers_.end()) return it->second.get();
  const placement::OsdEntry* e = map_ == nullptr ? nullptr : map_->Find(id);
  // Down in the map: no session (a write that chose its replicas before the map said so
  // counts this copy as missing at once, instead of waiting on a peer that is gone).
  if (e == nullptr || !e->up) return nullptr;
  const auto& types = e->ms_types;  // empty: a monitor that does not say (assume it serves it)
  if (e->cluster_addr.empty() && !types.empty() &&
      std::find(types.begin(), types.end(), options_.ms_type) == types.end()) {
    spdlog::warn("osd.{}: osd.{} does not serve {} for OSD peers (it serves {}): run every OSD "
                 "with the same --ms-cluster-type; its copies count as missing",
                 options_.self, id, options_.ms_type, absl::StrJoin(types, ","));
    return nullptr;
  }
  const std::string& addr = e->cluster_addr.empty() ? e->addr : e->cluster_addr;
  ConnectOptions co;
  co.policy = Policy::Lossless();
  co.want_ring = true;
  co.peer = EntityName{EntityType::kOsd, static_cast<uint64_t>(id)};  // not whoever is there now
  auto conn = messenger_->Connect(addr, co);
  if (!conn.ok()) {
    spdlog::warn("osd.{}: cannot open a replication session with osd.{} at {}: {}",
                 options_.self, id, addr, conn.status().ToString());
    return nullptr;
  }
  auto peer = std::make_unique<Peer>();
  peer->id = id;
  peer->addr = addr;
  peer->up_from = e->up_from;
  peer->conn = std::move(*conn);
  Peer* p = peer.get();
  peers_[id] = std::move(peer);
  p->thread = std::thread([this, p] { SendLoop(p); });
  pthread_setname_np(p->thread.native_handle(), "osd-repl");
  spdlog::info("osd.{}: replication session with osd.{} at {}", options_.self, id, addr);
  return p;
}

void Replicator::SendLoop(Peer* peer) {
  mu_.Lock();  // released around each WriteRecord (it may wait for the peer's credit)
  for (;;) {
    while (!peer->closing && (peer->queue.empty() || peer->sending)) peer->cv.Wait(&mu_);
    if (peer->closing) break;
    std::shared_ptr<Item> item = std::move(peer->queue.front());
    peer->queue.pop_front();
    StartSendLocked(peer, item);
    ConnectionRef conn = peer->conn;
    mu_.Unlock();
    const absl::Status st = SendItem(conn, *item, options_.forward_timeout);
    mu_.Lock();
    FinishSendLocked(peer, item, st);
  }
  mu_.Unlock();
}

absl::Status Replicator::SendItem(const ConnectionRef& conn, const Item& item,
                                  absl::Duration timeout) {
  if (std::shared_ptr<const void> owner = item.write->payload_owner()) {
    return conn->WriteRecordShared(item.desc, item.payload, std::move(owner), timeout);
  }
  return conn->WriteRecord(item.desc, item.payload, timeout);
}

void Replicator::Resolve(const std::shared_ptr<Item>& item, const absl::Status& s, bool gone) {
  item->write->ReplicaDone(item->peer, s, gone);
}

void Replicator::DropPeerLocked(int id, const std::string& why, bool gone) {
  auto it = peers_.find(id);
  if (it == peers_.end()) return;
  Peer* peer = it->second.get();
  peer->closing = true;
  peer->gone = gone;
  peer->closed_why = absl::StrCat("the session with osd.", id, " ended (", why, ")");
  peer->cv.SignalAll();
  const absl::Status lost_status = absl::UnavailableError(peer->closed_why);
  uint64_t lost = 0;
  for (auto& item : peer->queue) {
    item->resolved = true;
    Resolve(item, lost_status, gone);
    ++lost;
  }
  peer->queue.clear();
  for (auto f = peer->in_flight.begin(); f != peer->in_flight.end();) {
    if (f->second->copying) {  // its sender resolves it once WriteRecord returns
      ++f;
      continue;
    }
    f->second->resolved = true;
    Resolve(f->second, lost_status, gone);
    ++lost;
    f = peer->in_flight.erase(f);
  }
  counters_.replica_failures += lost;
  for (auto& [tid, req] : requests_) {
    if (req.peer != id || req.answered) continue;
    req.answered = true;
    req.reply = absl::UnavailableError(absl::StrCat("the session with osd.", id, " ended: ", why));
  }
  requests_cv_.SignalAll();
  if (lost == 0) {
    spdlog::info("osd.{}: replication session with osd.{} ended ({})", options_.self, id, why);
  } else {
    spdlog::info("osd.{}: replication session with osd.{} ended ({}): {} records not "
                 "acknowledged {}",
                 options_.self, id, why, lost,
                 gone ? "count as missing copies (it is synced when back)"
                      : "fail their writes (it is still up in the map; clients retry)");
  }
  retired_.push_back(std::move(it->second));
  peers_.erase(it);
}

void Replicator::ReapRetired() {
  std::vector<std::unique_ptr<Peer>> retired;
  {
    absl::MutexLock l(&mu_);
    retired.swap(retired_);
  }
  for (auto& peer : retired) {
    peer->conn->MarkDown();  // a sender blocked on ring credit returns
    if (peer->thread.joinable()) peer->thread.join();
    // A poller's inline send (which never waits for credit) may still be finishing.
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(+[](Peer* p) { return !p->sending; }, peer.get()));
  }
}

bool Replicator::OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) {
  absl::MutexLock l(&mu_);
  Peer* peer = nullptr;
  for (auto& [id, p] : peers_) {
    if (p->conn.get() == conn.get()) peer = p.get();
  }
  if (peer == nullptr) {
    for (auto& p : retired_) {
      if (p->conn.get() == conn.get()) return true;  // already resolved as lost
    }
    return false;
  }
  for (const RecordAck& a : acks) {
    auto it = peer->in_flight.find(a.tid);
    if (it == peer->in_flight.end() || it->second->resolved) continue;
    const bool ok = a.code == absl::StatusCode::kOk;
    ++(ok ? counters_.replica_acks : counters_.replica_failures);
    if (!ok) {
      spdlog::warn("osd.{}: osd.{} refused '{}': {}", options_.self, peer->id,
                   it->second->desc.oid, absl::StatusCodeToString(a.code));
    }
    // An ack can only follow the send, so the bytes were copied even if the sender has
    // not seen WriteRecord return yet.
    it->second->resolved = true;
    Resolve(it->second,
            ok ? absl::OkStatus()
               : absl::UnavailableError(absl::StrCat("osd.", peer->id, " refused the copy (",
                                                     absl::StatusCodeToString(a.code), ")")),
            false);
    peer->in_flight.erase(it);
  }
  return true;
}

bool Replicator::OnReset(const ConnectionRef& conn, const absl::Status& why) {
  bool ours = false;
  {
    absl::MutexLock l(&mu_);
    for (auto& [id, p] : peers_) {
      if (p->conn.get() != conn.get()) continue;
      ours = true;
      DropPeerLocked(id, std::string(why.message()), /*gone=*/false);
      break;
    }
    for (auto& p : retired_) ours = ours || p->conn.get() == conn.get();
  }
  return ours;
}

ReplicationCounters Replicator::counters() const {
  absl::MutexLock l(&mu_);
  ReplicationCounters c = counters_;
  c.pool_size = pool_size_.load(std::memory_order_relaxed);
  c.writes_degraded = degraded_.load(std::memory_order_relaxed);
  c.writes_replica_missing = replica_missing_.load(std::memory_order_relaxed);
  c.peers = peers_.size();
  for (const auto& [id, p] : peers_) c.forwards_in_flight += p->queue.size() + p->in_flight.size();
  return c;
}

}  // namespace msgr::osd

#include "osd_sim/osd.h"

#include <pthread.h>
#include <unistd.h>
#include <sys/uio.h>

#include <algorithm>
#include <type_traits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "msg/base/crc32c.h"
#include "msg/base/net_addr.h"
#include "nlohmann/json.hpp"
#include "proto/cluster_map.h"
#include "proto/osd_protocol.h"
#include "spdlog/spdlog.h"

namespace msgr::osd {

// Longest a primary waits for its replicas to confirm a delete (the client's op timeout
// is longer, so an unconfirmed delete is answered UNAVAILABLE and the client retries).
constexpr absl::Duration kReplicaDeleteTimeout = absl::Seconds(10);

namespace {

const char* DurabilityName(store::Durability d) {
  switch (d) {
    case store::Durability::kDurable: return "durable";
    case store::Durability::kBuffered: return "buffered";
    case store::Durability::kMemory: return "memory";
  }
  return "?";
}

uint64_t MonoNowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

const char* RequestName(uint16_t type) {
  switch (type) {
    case kRead: return "read";
    case kStat: return "stat";
    case kDelete: return "delete";
    case kList: return "list";
    case kScrub: return "scrub";
  }
  return "unknown";
}

// The object a request names (a listing: its prefix) and its tid; empty if malformed.
std::pair<uint64_t, std::string> RequestTarget(const Message& m) {
  switch (m.type) {
    case kRead:
      if (auto r = DecodeReadRequest(m); r.ok()) return {r->tid, r->oid};
      break;
    case kStat:
    case kDelete:
      if (auto r = DecodeObjectRequest(m); r.ok()) return {r->tid, r->oid};
      break;
    case kList:
    case kScrub:
      if (auto r = DecodeListRequest(m); r.ok()) return {r->tid, r->prefix};
      break;
  }
  return {0, ""};
}

// The bound address is what the map advertises: it must be one peers can dial.
absl::Status CheckAdvertisable(const char* what, const std::string& addr) {
  absl::StatusOr<HostPort> hp = ParseHostPort(addr);
  if (!hp.ok()) return hp.status();
  if (!IsNumericHost(hp->host) || hp->host == "0.0.0.0" || hp->host == "::") {
    return absl::InvalidArgumentError(absl::StrCat(
        what, " address '", addr,
        "' must be a numeric address of this host that peers can reach (not a name or a "
        "wildcard); --", what, "-network CIDR picks one"));
  }
  return absl::OkStatus();
}

std::string LocalHostName() {
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

Osd::Osd(const OsdOptions& options) : options_(options), pg_log_(options.pg_log_entries) {}

Osd::~Osd() { Stop(); }

absl::StatusOr<std::unique_ptr<Osd>> Osd::Start(const OsdOptions& given) {
  if (given.ms_types.empty()) return absl::InvalidArgumentError("no messenger type to serve");
  OsdOptions options = given;
  const auto& types = options.ms_types;
  if (options.cluster_ms_type.empty()) {
    // tcp, unless the OSD serves only rdma and has no cluster address of its own.
    const bool tcp = !options.cluster_addr.empty() ||
                     std::find(types.begin(), types.end(), "tcp") != types.end();
    options.cluster_ms_type = tcp ? "tcp" : types.front();
  }
  if (absl::Status st = CheckAdvertisable("public", options.public_addr); !st.ok()) return st;
  if (!options.cluster_addr.empty()) {
    if (absl::Status st = CheckAdvertisable("cluster", options.cluster_addr); !st.ok()) return st;
  }
  if (options.cluster_ms_type != "tcp" && options.cluster_ms_type != "rdma") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ms-cluster-type '", options.cluster_ms_type, "': want tcp or rdma"));
  }
  if (options.cluster_addr.empty() &&
      std::find(types.begin(), types.end(), options.cluster_ms_type) == types.end()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--ms-cluster-type ", options.cluster_ms_type, " needs the OSD to serve ",
        options.cluster_ms_type, " to clients too (--ms-type ", options.cluster_ms_type,
        " or both), or a cluster address of its own (--cluster-addr): without one the "
        "OSD-to-OSD sessions use the public messenger of that type"));
  }
  std::unique_ptr<Osd> osd(new Osd(options));
  absl::Status s = osd->Init();
  if (!s.ok()) {
    osd->Stop();
    return s;
  }
  return osd;
}

absl::Status Osd::Init() {
  const std::string me = absl::StrCat("osd.", options_.id);
  store::StoreOptions so;
  so.dir = options_.data_dir;
  so.mode = options_.durability;
  so.capacity_bytes = options_.capacity_bytes;
  if (options_.segment_bytes != 0) so.segment_bytes = options_.segment_bytes;
  so.background_compaction = options_.background_compaction;
  if (options_.store_commit_window) so.group_commit_window = *options_.store_commit_window;
  if (options_.store_zero_ahead_bytes) so.zero_ahead_bytes = *options_.store_zero_ahead_bytes;
  if (so.mode == store::Durability::kMemory && so.capacity_bytes == 0) {
    // Memory mode keeps every object in RAM: without a cap a long benchmark run takes the
    // machine down (the kernel's OOM killer picks an OSD). An eighth of RAM per OSD; past
    // it writes fail with "store full" and the OSD keeps serving.
    so.capacity_bytes = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                        static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 8;
    spdlog::info("{}: memory mode without --capacity: capping the store at {} MiB (1/8 of RAM)",
                 me, so.capacity_bytes >> 20);
  }
  auto st = store::ObjectStore::Open(so);
  if (!st.ok()) {
    return absl::Status(st.status().code(),
                        absl::StrCat(me, ": cannot open store in ", so.dir, ": ",
                                     st.status().message()));
  }
  store_ = std::move(*st);
  const auto stats = store_->GetStats();
  spdlog::info("{}: store {} ({}): {} objects, {} records recovered, {} torn, {} corrupt", me,
               options_.data_dir, DurabilityName(options_.durability), stats.objects,
               stats.recovered_records, stats.torn_records, stats.corrupt_records);

  for (int i = 0; i < std::max(1, options_.pollers); ++i) {
    PollerOptions po;
    po.spin = options_.poller_spin;
    po.adaptive_spin = options_.poller_adaptive_spin;
    po.wakeup_cost = options_.poller_wakeup_cost;
    po.notified_wakeup_cost = options_.poller_notified_wakeup_cost;
    po.store_syncs = options_.durability != store::Durability::kMemory;
    po.nap = options_.poller_nap;
    po.nap_rings = options_.poller_nap_rings;
    po.nap_depth = options_.poller_nap_depth;
    po.ack_spin = options_.poller_ack_spin;
    po.op_complaint_time = options_.op_complaint_time;
    if (!options_.poller_cpus.empty()) {
      po.cpu = options_.poller_cpus[static_cast<size_t>(i) % options_.poller_cpus.size()];
    }
    auto p = Poller::Create(i, po, this);
    if (!p.ok()) return p.status();
    Poller* poller = p->get();
    registry_.Add({"pollers", i, [poller] { return std::vector{poller->Group()}; }});
    pollers_.push_back(std::move(*p));
  }
  registry_.Add({"osd", -1, [this] { return std::vector{Counters().Group("osd")}; }});
  registry_.Add({"store", -1, [this] {
                   std::vector<CounterGroup> g;
                   if (store_) g.push_back(store_->GetStats().Group("store"));
                   return g;
                 }});

  const int read_threads = std::max(1, options_.read_threads);
  read_slot_count_ = static_cast<size_t>(read_threads) + 1;  // + the peer thread's
  read_slots_ = std::make_unique<ReadSlot[]>(read_slot_count_);
  for (size_t i = 0; i < read_slot_count_; ++i) {
    ReadSlot* slot = &read_slots_[i];
    const bool peer = i + 1 == read_slot_count_;
    RequestQueue* queue = peer ? &peer_queue_ : &read_queue_;
    read_threads_.emplace_back([this, slot, queue] { ReadLoop(slot, queue); });
    pthread_setname_np(read_threads_.back().native_handle(), peer ? "osd-peer-req" : "osd-read");
  }

  mon::v1::BootOsdRequest boot;
  boot.set_id(options_.id);
  boot.set_weight(options_.weight);
  // One messenger per backend on the public address, plus (with a cluster address) a tcp
  // one there for OSD-to-OSD sessions, as Ceph's ms_public / ms_cluster.
  auto serve = [&](const std::string& type, const std::string& bind_addr,
                   const std::string& counters_name) -> absl::StatusOr<std::string> {
    MessengerOptions mo;
    mo.type = type;
    mo.ms_mode = options_.ms_mode;
    mo.name = EntityName{EntityType::kOsd, options_.id};
    mo.auth = options_.auth;
    mo.ring_bytes = options_.ring_bytes;
    mo.backend_options = options_.backend_options;
    // One completion source per poller (rdma: its sessions' receives and record
    // announcements, msg/PROTOCOL.md "Record notifications"); a ring of notifier i goes to
    // poller i. An explicit backend option wins (0: none, every ring scanned).
    mo.backend_options.emplace("rdma_ring_notifiers", std::to_string(pollers_.size()));
    mo.worker_threads = options_.ms_tcp_threads;
    // Run to completion (ms_tcp_threads 0): a poller drives each tcp messenger, one per
    // poller; a tcp messenger beyond the pollers (a cluster one with one poller) gets a
    // socket thread.
    Poller* driver = nullptr;
    if (type != "tcp") {
      mo.worker_threads = std::max(1, mo.worker_threads);
    } else if (mo.worker_threads == 0) {
      if (tcp_driven_ < pollers_.size()) {
        driver = pollers_[tcp_driven_++].get();
      } else {
        mo.worker_threads = 1;
      }
    }
    // One incarnation for the process: the first messenger draws it, the others share it
    // (the monitor fences an old incarnation of this OSD by it).
    mo.instance = boot.instance();
    auto m = Messenger::Create(mo, this);
    if (!m.ok()) {
      return absl::Status(m.status().code(), absl::StrCat(me, ": messenger '", type,
                                                          "' unavailable: ", m.status().message()));
    }
    boot.set_instance((*m)->options().instance);
    (*m)->SetPolicy(EntityType::kClient, Policy::Lossless());
    (*m)->SetPolicy(EntityType::kOsd, Policy::Lossless());
    auto addr = (*m)->Bind(bind_addr);
    if (!addr.ok()) return addr.status();
    Messenger* messenger = m->get();
    if (driver != nullptr) driver->Drive(messenger);
    registry_.Add({counters_name, -1, [messenger] { return messenger->perf_counters(); }});
    messengers_.push_back(std::move(*m));
    return addr;
  };
  const HostPort pub = *ParseHostPort(options_.public_addr);  // checked in Start()
  for (const std::string& type : options_.ms_types) {
    auto addr = serve(type, JoinHostPort(pub.host, type == "tcp" ? pub.port : options_.rdma_port),
                      absl::StrCat("messenger.", type));
    if (!addr.ok()) return addr.status();
    spdlog::info("{}: {} messenger listening on {}", me, type, *addr);
    addrs_[type] = *addr;
    boot.add_ms_types(type);
  }
  // The map carries one primary address: tcp's when served, and the rdma side channel.
  boot.set_addr(addrs_.count("tcp") ? addrs_["tcp"] : addrs_.begin()->second);
  if (addrs_.count("rdma")) boot.set_rdma_addr(addrs_["rdma"]);
  // OSD-to-OSD sessions (Ceph's ms_cluster_type) go out on, and come in to, a messenger of
  // cluster_ms_type: on the cluster address when there is one, else the public one of that
  // type (the map's cluster address is then the public address).
  const std::string& cluster_type = options_.cluster_ms_type;  // resolved in Start()
  // tcp peers reach it on its public tcp messenger (replaced below by a tcp cluster one).
  if (addrs_.count("tcp")) boot.set_cluster_addr(addrs_["tcp"]);
  Messenger* peer_messenger = nullptr;
  if (options_.cluster_addr.empty()) {
    for (size_t i = 0; i < options_.ms_types.size(); ++i) {
      if (options_.ms_types[i] == cluster_type) peer_messenger = messengers_[i].get();
    }
  } else {
    const HostPort cl = *ParseHostPort(options_.cluster_addr);  // checked in Start()
    auto addr = serve(cluster_type, JoinHostPort(cl.host, cl.port), "messenger.cluster");
    if (!addr.ok()) return addr.status();
    spdlog::info("{}: cluster messenger ({}) listening on {}", me, cluster_type, *addr);
    addrs_["cluster"] = *addr;
    if (cluster_type == "rdma") {
      boot.set_cluster_rdma_addr(*addr);
    } else {
      boot.set_cluster_addr(*addr);
    }
    peer_messenger = messengers_.back().get();
  }
  boot.set_host(options_.host_name.empty() ? LocalHostName() : options_.host_name);
  ReplicatorOptions ro;
  ro.self = options_.id;
  ro.ms_type = cluster_type;
  replicator_ = std::make_unique<Replicator>(ro, peer_messenger, &pg_log_);
  // A primary's pollers hold client records until the replicas ack their copies: over rdma
  // they reap those acks themselves while they would otherwise nap (PollerOptions::ack_spin).
  if (cluster_type == "rdma") {
    for (auto& p : pollers_) p->SetAckPoll([peer_messenger] { return peer_messenger->Poll(); });
  }
  registry_.Add({"replication", -1, [this] {
                   return std::vector{replicator_->counters().Group("replication")};
                 }});
  PeeringOptions peering;
  peering.self = options_.id;
  if (options_.durability != store::Durability::kMemory) {
    peering.state_path = absl::StrCat(options_.data_dir, "/pg_states");
  }
  peering_ = std::make_unique<Peering>(peering, store_.get(), replicator_.get(), &pg_log_);
  registry_.Add({"peering", -1, [this] {
                   return std::vector{peering_->counters().Group("peering")};
                 }});

  if (!options_.run_dir.empty()) {
    auto admin = AdminSocket::Create(absl::StrCat(options_.run_dir, "/", me, ".asok"));
    if (!admin.ok()) return admin.status();
    admin_ = std::move(*admin);
    admin_->Register("perf dump", [this] { return PerfDumpJson(); });
    admin_->Register("dump_sessions", [this] { return DumpSessionsJson(); });
    admin_->Register("dump_ops_in_flight", [this] { return DumpOpsInFlightJson(); });
    admin_->Register("compact", [this] { return CompactJson(); });
    admin_->Register("help", [] {
      nlohmann::json j;
      j["commands"] = {"perf dump", "dump_sessions", "dump_ops_in_flight", "compact", "help"};
      j["descriptions"]["perf dump"] = "every counter: OSD, pollers, store, messengers";
      j["descriptions"]["dump_sessions"] =
          "messenger sessions: peer, instance, backend, state, ring size and fill";
      j["descriptions"]["dump_ops_in_flight"] =
          "ops not yet answered, oldest first, with age and what they wait for; slow flagged";
      j["descriptions"]["compact"] =
          "compact the store now (every sealed segment under half live); what it freed";
      j["descriptions"]["help"] = "this list";
      return j.dump(2);
    });
    admin_->Start();
  }

  auto mon = mon::MonClient::Create(options_.mon_addr, options_.mon_timeout, options_.mon_auth);
  if (!mon.ok()) return mon.status();
  mon_ = std::move(*mon);
  instance_ = boot.instance();
  auto reply = mon_->BootOsd(boot);
  if (!reply.ok()) return reply.status();
  spdlog::info("{}: booted at map epoch {}", me, reply->epoch());
  absl::Status watch = mon_->Watch([this](const mon::v1::ClusterMap& map) {
    if (options_.map_hook) options_.map_hook(map.epoch());
    std::vector<placement::PlacementMap> pools;
    for (const placement::PoolInfo& p : placement::PoolsOf(map)) {
      pools.push_back(placement::ToPlacementMap(map, options_.cluster_ms_type, p));
    }
    replicator_->HandleMaps(pools);
    peering_->HandleMaps(pools);
    ApplyBlocklist(map);
  });
  if (!watch.ok()) return watch;
  mon_->SetHeartbeatStats([this](mon::v1::PgStats* s) {
    const PeeringCounters c = peering_->counters();
    s->set_pgs_active(static_cast<uint32_t>(c.pgs_active));
    s->set_pgs_peering(static_cast<uint32_t>(c.pgs_peering));
    s->set_objects_recovered(c.objects_recovered);
    // Syncs from a PG log: members pushed by this primary, and PGs this OSD pulled from
    // the interim primary's log when it came back to lead them.
    s->set_recoveries_from_log(c.recoveries_from_log + c.pulls_from_log);
    s->set_backfills(c.backfills);
  });
  return mon_->StartHeartbeats(
      boot,
      [me](const mon::v1::BootOsdReply& r) {
        spdlog::info("{}: re-booted with the monitor at epoch {}", me, r.epoch());
      },
      [this](const absl::Status& why) { Fenced(why); });
}

void Osd::Fenced(const absl::Status& why) {
  if (fenced_.exchange(true)) return;
  spdlog::error("osd.{} (instance {:x}) is fenced and must stop serving: {}", options_.id,
                instance_, std::string(why.message()));
  if (options_.on_fenced) options_.on_fenced(why);
}

void Osd::ApplyBlocklist(const mon::v1::ClusterMap& map) {
  std::vector<std::string> ignored;
  std::vector<FencedPeer> fenced = placement::FencedPeersOf(map, &ignored);
  for (const std::string& why : ignored) {
    spdlog::warn("osd.{}: blocklist entry ignored: {}", options_.id, why);
  }
  // Unchanged lists (most maps) cost nothing more than this comparison.
  std::string key;
  for (const FencedPeer& f : fenced) absl::StrAppend(&key, f.name.ToString(), "/", f.instance, " ");
  if (key == applied_blocklist_) return;
  applied_blocklist_ = key;
  // This very process fenced (a newer one booted as this id while it was stopped or cut
  // off): its heartbeats are refused too, but the map usually says so first.
  if (absl::Status self = CheckFenced(fenced, EntityName{EntityType::kOsd, options_.id},
                                               instance_);
      !self.ok()) {
    Fenced(self);
  }
  spdlog::info("osd.{}: blocklist at epoch {}: {} entr{}", options_.id, map.epoch(),
               fenced.size(), fenced.size() == 1 ? "y" : "ies");
  for (auto& m : messengers_) m->SetFenced(fenced);
}

void Osd::Stop() {
  if (stopped_.exchange(true)) return;
  mon_.reset();  // stop heartbeats first: the monitor marks us down after its grace
  if (peering_) peering_->Stop();
  if (replicator_) replicator_->Stop();  // forwards not yet acknowledged fail their writes
  for (auto& m : messengers_) m->Shutdown();
  // The pollers stop (after in-flight records, bounded); the store then flushes and fires
  // what is still pending into them, so they are destroyed only after the store.
  for (auto& p : pollers_) p->Stop();
  {
    absl::MutexLock l(&read_mu_);
    read_stop_ = true;
    read_queue_.requests.clear();
    peer_queue_.requests.clear();
    read_queue_.cv.SignalAll();
    peer_queue_.cv.SignalAll();
  }
  for (auto& t : read_threads_) t.join();
  read_threads_.clear();
  admin_.reset();
  store_.reset();  // final flush
  pollers_.clear();
  messengers_.clear();
}

Poller* Osd::PickPoller() {
  // Fewest rings wins; ties rotate.
  const size_t start = next_poller_.fetch_add(1) % pollers_.size();
  Poller* best = pollers_[start].get();
  for (size_t i = 0; i < pollers_.size(); ++i) {
    Poller* p = pollers_[(start + i) % pollers_.size()].get();
    if (p->ring_count() < best->ring_count()) best = p;
  }
  return best;
}

void Osd::OnRingAttached(const ConnectionRef& conn, std::shared_ptr<RecvRing> ring) {
  ++rings_attached_;
  ConnectionRef superseded;
  {
    absl::MutexLock l(&sessions_mu_);
    std::weak_ptr<Connection>& slot = ring_sessions_[conn->peer_name().ToString()];
    ConnectionRef old = slot.lock();
    if (old != nullptr && old.get() != conn.get()) superseded = std::move(old);
    slot = conn;
  }
  if (superseded != nullptr) {
    ++superseded_;
    spdlog::info("osd.{}: {} opened a new session from {}: closing its older one from {} "
                 "(what is still in flight on it is dropped, never applied after the new "
                 "session's writes)",
                 options_.id, conn->peer_name().ToString(), conn->peer_addr(),
                 superseded->peer_addr());
    for (auto& p : pollers_) p->RemoveRings(superseded.get());
    superseded->MarkDown();
  }
  // A ring that goes on with its session's records (resized) stays on the poller that
  // drains the old one: that poller holds the session's unfinished writes.
  Poller* p = nullptr;
  if (ring->first_seq() > 1) {
    for (auto& candidate : pollers_) {
      if (candidate->has_rings_of(conn.get())) p = candidate.get();
    }
  }
  if (p == nullptr && ring->notifier() != nullptr) {
    // The poller that polls the ring's notifier: it runs the session's receives.
    p = pollers_[static_cast<size_t>(ring->notifier()->index()) % pollers_.size()].get();
  }
  if (p == nullptr) p = PickPoller();
  spdlog::info("osd.{}: ring of {} bytes for {} ({}) on poller {}", options_.id, ring->bytes(),
               conn->peer_name().ToString(), conn->peer_addr(), p->index());
  // A new ring for a connection replaces its old one (a new session): the poller that
  // gets it retires the old one itself; any other poller holding it is told here.
  for (auto& other : pollers_) {
    if (other.get() != p) other->RemoveRings(conn.get());
  }
  p->AddRing(conn, std::move(ring));
}

void Osd::OnMessage(const ConnectionRef& conn, Message m) {
  const bool from_osd = conn->peer_name().type == EntityType::kOsd;
  // A replica's answer to a request this OSD sent as a primary.
  if (from_osd && replicator_ && replicator_->OnReply(conn, m)) return;
  RequestQueue* queue = from_osd ? &peer_queue_ : &read_queue_;
  {
    absl::MutexLock l(&read_mu_);
    if (read_stop_) return;
    queue->requests.push_back(QueuedRequest{conn, std::move(m), MonoNowNs()});
  }
  queue->cv.Signal();
}

void Osd::ReadLoop(ReadSlot* slot, RequestQueue* queue) {
  for (;;) {
    // The last request's references, dropped after read_mu_ (declared before its lock).
    QueuedRequest finished;
    {
      absl::MutexLock l(&read_mu_);
      finished = std::move(slot->req);
      slot->busy = false;
      while (!read_stop_ && queue->requests.empty()) queue->cv.Wait(&read_mu_);
      if (read_stop_) return;
      slot->req = std::move(queue->requests.front());
      queue->requests.pop_front();
      slot->waiting_for.store("started", std::memory_order_relaxed);
      slot->busy = true;
    }
    ServeRequest(slot->req.conn, slot->req.m, slot);
  }
}

void Osd::ServeRequest(const ConnectionRef& conn, const Message& m, ReadSlot* slot) {
  auto step = [slot](const char* what) { slot->waiting_for.store(what, std::memory_order_relaxed); };
  Reply reply;
  MsgType reply_type;
  absl::Status s;
  // A client's op on one object waits while its PG is peering here (or this OSD is not its
  // primary); a peer OSD's requests are part of peering and replication and always served.
  const bool from_osd = conn->peer_name().type == EntityType::kOsd;
  auto check_active = [&](uint32_t pool, const std::string& oid) {
    return from_osd ? absl::OkStatus() : peering_->CheckActive(pool, oid);
  };
  if (IsPgRequest(m.type)) {
    auto req = DecodePgRequest(m);
    if (!req.ok()) return IgnoreMalformed(conn, req.status());
    if (!from_osd) {
      spdlog::warn("osd.{}: peering request from {} ({}), not an OSD; refused", options_.id,
                   conn->peer_name().ToString(), conn->peer_addr());
      reply.tid = req->tid;
      reply.code = absl::StatusCode::kPermissionDenied;
      reply.error = "peering requests are for OSDs";
    } else {
      step("peering");
      reply = peering_->Serve(*req, conn->peer_name().id);
    }
    (void)conn->Send(Encode(reply, static_cast<MsgType>(m.type + 1)));
    return;
  }
  switch (m.type) {
    case kRead: {
      auto req = DecodeReadRequest(m);
      if (!req.ok()) return IgnoreMalformed(conn, req.status());
      ++reads_;
      reply.tid = req->tid;
      reply_type = kReadReply;
      step("store: read");
      std::string key;
      if (s = StoreKey(req->pool, req->oid, &key); !s.ok()) break;
      if (s = check_active(req->pool, req->oid); !s.ok()) break;
      auto data = store_->Read(key, req->offset, req->length);
      if (data.ok()) {
        reply.data = std::move(*data);
      } else {
        ++read_errors_;
        s = data.status();
      }
      break;
    }
    case kStat: {
      auto req = DecodeObjectRequest(m);
      if (!req.ok()) return IgnoreMalformed(conn, req.status());
      ++stats_served_;
      reply.tid = req->tid;
      reply_type = kStatReply;
      step("store: stat");
      std::string key;
      if (s = StoreKey(req->pool, req->oid, &key); !s.ok()) break;
      if (s = check_active(req->pool, req->oid); !s.ok()) break;
      auto size = store_->Stat(key);
      if (size.ok()) {
        reply.data = EncodeBody(StatBody{*size});
      } else {
        s = size.status();
      }
      break;
    }
    case kDelete: {
      auto req = DecodeObjectRequest(m);
      if (!req.ok()) return IgnoreMalformed(conn, req.status());
      reply.tid = req->tid;
      reply_type = kDeleteReply;
      // Replied once durable, as a write is acked; this read thread waits for the flush.
      // A client's delete in a replicated pool reaches the PG's replicas too (after the
      // local copy is gone), with a write's min_size rule.
      std::string key;
      if (s = StoreKey(req->pool, req->oid, &key); !s.ok()) break;
      Replicator::DeletePlan replicas;
      const bool replicate = !from_osd && replicator_ && replicator_->replicating();
      absl::StatusOr<uint64_t> ticket;
      {
        // From the map check to the store's delete, one step against a peering query.
        Peering::Admission admitted(*peering_);
        if (s = check_active(req->pool, req->oid); !s.ok()) break;
        // A replica deletes only at the word of the PG's primary in its map.
        if (from_osd) {
          if (s = peering_->CheckPrimary(req->pool, req->oid, conn->peer_name().id); !s.ok()) {
            break;
          }
        }
        if (replicate) {
          auto targets = replicator_->DeleteTargets(req->pool, req->oid);
          if (!targets.ok()) {
            s = targets.status();
            break;
          }
          replicas = std::move(*targets);
        }
        if (options_.delete_hook) {
          if (s = options_.delete_hook(); !s.ok()) break;
        }
        ticket = store_->Delete(key);
      }
      step("store: durable delete");
      s = ticket.ok() ? store_->WaitDurable(*ticket) : ticket.status();
      if (s.ok()) ++deletes_;
      if (replicate && !replicas.peers.empty() && (s.ok() || absl::IsNotFound(s))) {
        step("replicas: delete");
        // A replica may hold a copy the primary lost (NOT_FOUND here): delete it too.
        absl::Status r = replicator_->ReplicateDelete(req->pool, req->oid, replicas,
                                                      /*local_ok=*/true, kReplicaDeleteTimeout);
        if (!r.ok()) s = r;
      }
      break;
    }
    case kList:
    case kScrub: {
      auto req = DecodeListRequest(m);
      if (!req.ok()) return IgnoreMalformed(conn, req.status());
      ++lists_;
      reply.tid = req->tid;
      reply_type = req->digest ? kScrubReply : kListReply;
      step(req->digest ? "store: scrub (read every object)" : "store: list");
      const size_t max = std::min(req->max, req->digest ? kMaxScrubPage : kMaxListPage);
      ListBody body;
      if (s = ListPool(*req, max, &body); !s.ok()) break;
      if (req->digest) s = DigestEntries(req->pool, &body);
      if (!s.ok()) break;
      reply.data = EncodeBody(body, req->digest);
      break;
    }
    default:
      spdlog::warn("osd.{}: unexpected message type {:#x} from {}; ignored", options_.id, m.type,
                   conn->peer_addr());
      return;
  }
  if (!s.ok()) {
    reply.code = s.code();
    reply.error = std::string(s.message());
    // The store names objects by their pool-qualified name: the client knows its oid.
    if (!reply.error.empty() && reply.error.find(placement::kPoolNameMark) != std::string::npos) {
      reply.error = absl::StrReplaceAll(reply.error, {{std::string(1, placement::kPoolNameMark), "/"}});
    }
  }
  step("reply: sending (flow control)");
  (void)conn->Send(Encode(reply, reply_type));
}

absl::Status Osd::DigestEntries(uint32_t pool, ListBody* body) const {
  for (ListEntry& e : body->entries) {
    std::string key;
    if (absl::Status s = StoreKey(pool, e.oid, &key); !s.ok()) return s;
    auto data = store_->Read(key);  // checks every record's crc on the way
    if (absl::IsNotFound(data.status())) continue;  // deleted since the listing: crc 0
    if (!data.ok()) return data.status();
    e.size = data->size();
    e.crc32c = Crc32c(0, data->data(), data->size());
  }
  return absl::OkStatus();
}

absl::Status Osd::StoreKey(uint32_t pool, const std::string& oid, std::string* key) const {
  if (pool == placement::kDefaultPoolId && !oid.empty() && oid[0] == placement::kPoolNameMark) {
    return absl::InvalidArgumentError("an object id may not start with byte 0x01");
  }
  *key = placement::PoolObjectName(pool, oid);
  return absl::OkStatus();
}

absl::Status Osd::ListPool(const ListRequest& req, size_t max, ListBody* body) const {
  std::string prefix, after;
  if (absl::Status s = StoreKey(req.pool, req.prefix, &prefix); !s.ok()) return s;
  const size_t strip = placement::PoolNameOverhead(req.pool);
  // No `after`: from the start ("" sorts first; the prefix keeps it to the pool).
  if (!req.after.empty()) after = placement::PoolObjectName(req.pool, req.after);
  auto page = store_->List(prefix, after, max + 1);
  if (req.pool == placement::kDefaultPoolId && prefix.empty()) {
    // Other pools' objects ("\x01ID\x01oid", contiguous in byte order, all below
    // "\x01\xff") are not the default pool's: skip them and go on after them.
    auto marked = [](const store::ObjectIndex::Listed& o) {
      return !o.oid.empty() && o.oid[0] == placement::kPoolNameMark;
    };
    if (std::any_of(page.begin(), page.end(), marked)) {
      // The page is [ids below 0x01][the pools' block][ids after it]: keep the first part
      // and list the rest again from after the block (not from the page's last id, which
      // would list the third part twice).
      static const std::string kAfterPools = {placement::kPoolNameMark, '\xff'};
      page.erase(std::remove_if(page.begin(), page.end(),
                                [&](const store::ObjectIndex::Listed& o) {
                                  return marked(o) || o.oid >= kAfterPools;
                                }),
                 page.end());
      auto rest = store_->List("", std::max<std::string>(after, kAfterPools),
                               max + 1 - page.size());
      for (auto& o : rest) page.push_back(std::move(o));
    }
  }
  body->more = page.size() > max;
  if (body->more) page.resize(max);
  for (auto& o : page) body->entries.push_back({o.oid.substr(strip), o.size});
  return absl::OkStatus();
}

void Osd::IgnoreMalformed(const ConnectionRef& conn, const absl::Status& why) {
  spdlog::warn("osd.{}: {} from {}; ignored", options_.id, std::string(why.message()),
               conn->peer_addr());
}

void Osd::OnReset(const ConnectionRef& conn, const absl::Status& why) {
  if (replicator_ && replicator_->OnReset(conn, why)) return;
  ++resets_;
  spdlog::info("osd.{}: connection from {} reset: {}", options_.id, conn->peer_addr(),
               why.ToString());
  for (auto& p : pollers_) p->RemoveRings(conn.get());
}

void Osd::OnRemoteReset(const ConnectionRef& conn) {
  spdlog::info("osd.{}: {} started a new session", options_.id, conn->peer_addr());
  // A replica that restarted lost what it had not acknowledged on the old session.
  if (replicator_) replicator_->OnReset(conn, absl::AbortedError("the replica restarted"));
}

void Osd::OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) {
  if (replicator_) replicator_->OnRecordsAcked(conn, acks);
}

static_assert(std::is_same_v<PersistCallback, store::DurableCallback>,
              "the poller's completion goes to the store as it is");

absl::StatusOr<uint32_t> Osd::Persist(const RecordView& rec, const WritePart& part,
                                      PersistCallback done) {
  const RecordHeader& h = *rec.header;
  const std::string_view oid(rec.oid, h.oid_len);
  // From the map check to the store's append, one step against a peer's peering query.
  Peering::Admission admitted(*peering_);
  {
    // The oid of a write names its pool (placement::PoolObjectName).
    uint32_t pool;
    std::string_view plain;
    if (!placement::SplitPoolObjectName(oid, &pool, &plain) || plain.empty()) {
      return absl::InvalidArgumentError("malformed pool-qualified object id");
    }
    // A client's write waits while its PG is peering here (the client retries UNAVAILABLE).
    // A replica takes a write only from the PG's primary in its map (a paused OSD still
    // acting on an older map must not overwrite what the new primary wrote). Every part is
    // checked: a write of several records becomes visible with its last, which must not
    // land after this OSD answered a query that ended its role (the client then retries
    // the whole write where the map sends it).
    absl::Status s = part.from_osd ? peering_->CheckPrimary(pool, plain, part.sender)
                                   : peering_->CheckActive(pool, plain);
    if (!s.ok()) {
      const bool starts =
          part.kind == WritePart::Kind::kWhole || part.kind == WritePart::Kind::kFirst;
      if (!starts) AbortWrite(oid, part.write_id);  // it can never be whole now
      return s;
    }
  }
  iovec iov{const_cast<uint8_t*>(rec.payload), h.payload_len};
  uint32_t flags = (h.flags & kRecordFlagTruncate) ? store::kTruncate : 0;
  // The store calls `done` only if it took the record; its error is returned instead.
  if (options_.durable_hook) done = options_.durable_hook(std::move(done));
  // As a PG's primary (a client's record, pool size > 1): `done` waits for the replicas.
  std::shared_ptr<Replicator::Write> replicated;
  if (!part.from_osd && replicator_ && replicator_->replicating()) {
    auto w = replicator_->Begin(rec, part, std::move(done));
    if (!w.ok()) return w.status();
    replicated = std::move(*w);
    done = replicator_->LocalCallback(replicated);
  }
  absl::StatusOr<uint64_t> ticket;
  switch (part.kind) {
    case WritePart::Kind::kWhole:
      ticket =
          store_->Append(oid, h.object_offset, &iov, 1, h.payload_crc, flags, std::move(done));
      break;
    case WritePart::Kind::kFirst:
    case WritePart::Kind::kMiddle:
      flags |= store::kContinued;
      [[fallthrough]];
    case WritePart::Kind::kLast:
      ticket = store_->AppendPart(oid, h.object_offset, &iov, 1, h.payload_crc, flags,
                                  part.write_id, std::move(done));
      // A part that could not be stored: the write can never be whole, drop it (its later
      // parts are then refused by the store and fail their ops too).
      if (!ticket.ok() && part.write_id != 0) store_->AbortWrite(oid, part.write_id);
      break;
  }
  // Refused by the store: nothing was forwarded, and dropping `replicated` drops `done`.
  if (!ticket.ok()) return ticket.status();
  const uint32_t write_id =
      part.kind == WritePart::Kind::kFirst ? store::WriteIdOf(*ticket) : part.write_id;
  if (replicated) {
    WritePart forwarded = part;
    forwarded.write_id = write_id;
    replicator_->Forward(replicated, rec, forwarded);
  }
  return write_id;
}

void Osd::AbortWrite(std::string_view oid, uint32_t write_id) {
  spdlog::info("osd.{}: dropping the unfinished write of several records of '{}'",
               options_.id, std::string(oid));
  store_->AbortWrite(oid, write_id);
  if (replicator_) replicator_->AbortWrite(write_id);
}

OsdCounters Osd::Counters() const {
  OsdCounters c;
  for (const auto& p : pollers_) {
    const PollerCounters pc = p->counters();
    c.ops += pc.records - pc.replica_records;
    c.replica_ops += pc.replica_records;
    c.bytes += pc.bytes;
    c.write_errors += pc.write_errors;
    c.crc_errors += pc.crc_errors;
    c.ring_high_water_bytes = std::max(c.ring_high_water_bytes, pc.ring_high_water_bytes);
    c.ops_in_flight += pc.ops_in_flight;
    c.slow_ops += pc.slow_ops;
  }
  uint64_t requests = 0, slow_requests = 0;
  CountRequests(MonoNowNs(), &requests, &slow_requests);
  c.ops_in_flight += requests;
  c.slow_ops += slow_requests;
  c.reads = reads_.load();
  c.read_errors = read_errors_.load();
  c.stats = stats_served_.load();
  c.deletes = deletes_.load();
  c.lists = lists_.load();
  c.rings_attached = rings_attached_.load();
  c.connection_resets = resets_.load();
  c.sessions_superseded = superseded_.load();
  return c;
}

void Osd::CountRequests(uint64_t now_ns, uint64_t* in_flight, uint64_t* slow) const {
  const uint64_t complaint_ns =
      static_cast<uint64_t>(absl::ToInt64Nanoseconds(options_.op_complaint_time));
  absl::MutexLock l(&read_mu_);
  *in_flight = 0;
  *slow = 0;
  for (const RequestQueue* queue : {&read_queue_, &peer_queue_}) {
    *in_flight += queue->requests.size();
    for (const QueuedRequest& q : queue->requests) {  // in arrival order: the slow ones first
      if (q.arrived_ns + complaint_ns > now_ns) break;
      ++*slow;
    }
  }
  for (size_t i = 0; i < read_slot_count_; ++i) {
    const ReadSlot& s = read_slots_[i];
    if (!s.busy) continue;
    ++*in_flight;
    if (s.req.arrived_ns + complaint_ns <= now_ns) ++*slow;
  }
}

std::string Osd::DumpSessionsJson() const {
  nlohmann::json sessions = nlohmann::json::array();
  for (const auto& m : messengers_) {
    for (const SessionInfo& s : m->DumpSessions()) {
      nlohmann::json j;
      j["peer"] = s.peer.ToString();
      j["instance"] = absl::StrCat(absl::Hex(s.instance, absl::kZeroPad16));
      // What `monctl blocklist ENTITY --instance HEX` fences (0: unknown).
      j["peer_instance"] = absl::StrCat(absl::Hex(s.peer_instance));
      j["backend"] = s.backend;
      j["addr"] = s.peer_addr;
      j["direction"] = s.outgoing ? "out" : "in";
      j["policy"] = s.lossless ? "lossless" : "lossy";
      j["state"] = s.state;
      j["ring_bytes"] = s.ring_bytes;
      j["ring_used_bytes"] = s.ring_used_bytes;
      j["ring_fill"] = s.ring_bytes ? static_cast<double>(s.ring_used_bytes) /
                                          static_cast<double>(s.ring_bytes)
                                    : 0.0;
      j["records_received"] = s.records_received;
      j["age_s"] = absl::ToDoubleSeconds(s.age);
      sessions.push_back(std::move(j));
    }
  }
  nlohmann::json out;
  out["num_sessions"] = sessions.size();
  out["sessions"] = std::move(sessions);
  return out.dump(2);
}

std::string Osd::CompactJson() {
  nlohmann::json j;
  if (!store_) {
    j["status"] = "no store";
    return j.dump(2);
  }
  const auto before = store_->GetStats();
  const absl::Status s = store_->Compact();
  const auto after = store_->GetStats();
  j["status"] = s.ok() ? std::string("ok") : s.ToString();
  j["segments_freed"] = after.segments_freed - before.segments_freed;
  j["bytes_reclaimed"] = after.bytes_reclaimed - before.bytes_reclaimed;
  j["bytes_relocated"] = after.bytes_relocated - before.bytes_relocated;
  j["live_bytes"] = after.live_bytes;
  j["dead_bytes"] = after.dead_bytes;
  return j.dump(2);
}

std::string Osd::DumpOpsInFlightJson() const {
  struct Op {
    absl::Duration age;
    nlohmann::json j;
  };
  std::vector<Op> ops;
  auto add = [&](absl::Duration age, nlohmann::json j) {
    j["age_s"] = absl::ToDoubleSeconds(age);
    j["slow"] = age >= options_.op_complaint_time;
    ops.push_back(Op{age, std::move(j)});
  };
  // Client writes: each poller copies its records in flight on its own thread.
  for (const auto& p : pollers_) {
    for (InFlightWrite& w : p->DumpInFlight()) {
      add(w.age, {{"type", "write"}, {"tid", w.tid}, {"oid", std::move(w.oid)},
                  {"client", w.client.ToString()}, {"client_addr", std::move(w.client_addr)},
                  {"waiting_for", std::move(w.waiting_for)}, {"poller", w.poller}});
    }
  }
  // Requests: copied under read_mu_, described (decoded, named) after it.
  struct Req {
    QueuedRequest q;
    const char* waiting_for;
  };
  std::vector<Req> reqs;
  {
    absl::MutexLock l(&read_mu_);
    for (size_t i = 0; i < read_slot_count_; ++i) {
      const ReadSlot& s = read_slots_[i];
      if (s.busy) reqs.push_back({s.req, s.waiting_for.load(std::memory_order_relaxed)});
    }
    for (const QueuedRequest& q : read_queue_.requests) reqs.push_back({q, "queued: a read thread"});
    for (const QueuedRequest& q : peer_queue_.requests) reqs.push_back({q, "queued: the peer thread"});
  }
  const uint64_t now = MonoNowNs();
  for (Req& r : reqs) {
    auto [tid, oid] = RequestTarget(r.q.m);
    add(absl::Nanoseconds(now > r.q.arrived_ns ? now - r.q.arrived_ns : 0),
        {{"type", RequestName(r.q.m.type)}, {"tid", tid}, {"oid", std::move(oid)},
         {"client", r.q.conn->peer_name().ToString()}, {"client_addr", r.q.conn->peer_addr()},
         {"waiting_for", r.waiting_for}});
  }
  std::stable_sort(ops.begin(), ops.end(), [](const Op& a, const Op& b) { return a.age > b.age; });
  nlohmann::json list = nlohmann::json::array();
  size_t slow = 0;
  for (Op& op : ops) {
    slow += op.j["slow"].get<bool>() ? 1 : 0;
    list.push_back(std::move(op.j));
  }
  nlohmann::json out;
  out["num_ops"] = list.size();
  out["slow_ops"] = slow;
  out["complaint_time_s"] = absl::ToDoubleSeconds(options_.op_complaint_time);
  out["ops"] = std::move(list);
  return out.dump(2);
}

std::string Osd::PerfDumpJson() const {
  nlohmann::json j = registry_.ToJson();
  j["osd"]["id"] = options_.id;
  j["osd"]["durability"] = DurabilityName(options_.durability);
  j["osd"]["uptime_s"] = absl::ToDoubleSeconds(absl::Now() - started_);
  // Derived forms earlier perf dumps carried, kept for the scripts that read them.
  for (auto& p : j["pollers"]) {
    p["spin_ms"] = p["spin_ns"].get<uint64_t>() / 1000000;
    p["sleep_ms"] = p["sleep_ns"].get<uint64_t>() / 1000000;
  }
  if (j.contains("store")) {
    nlohmann::json& st = j["store"];
    const uint64_t flushes = st["flushes"].get<uint64_t>();
    st["flush_latency_avg_us"] = flushes ? st["flush_latency_sum_us"].get<uint64_t>() / flushes : 0;
  }
  return j.dump(2);
}

}  // namespace msgr::osd

#include "client/client.h"

#include <unistd.h>

#include <algorithm>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "osd_sim/mon/control_auth.h"
#include "osd_sim/mon/mon_client.h"
#include "proto/cluster_map.h"
#include "proto/osd_protocol.h"
#include "spdlog/spdlog.h"

namespace msgr::client {

Client::Client(ClientOptions options, std::unique_ptr<Objecter> objecter)
    : options_(std::move(options)), objecter_(std::move(objecter)) {}

Client::~Client() { Shutdown(); }

absl::StatusOr<std::unique_ptr<Client>> Client::Create(ClientOptions options) {
  if (options.mon_addr.empty()) {
    return absl::InvalidArgumentError("no monitor address: pass --mon HOST:PORT");
  }
  if (options.client_id == 0) {
    options.client_id = (static_cast<uint64_t>(getpid()) << 32) ^
                        static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()) & 0xffffffff);
  }
  // The messenger first: an unavailable backend fails before any network traffic.
  ObjecterOptions oo;
  oo.messenger.type = options.ms_type;
  oo.messenger.ms_mode = options.ms_mode;
  oo.messenger.name = EntityName{EntityType::kClient, options.client_id};
  oo.messenger.auth = options.auth;
  oo.messenger.worker_threads = options.worker_threads;
  oo.messenger.backend_options = options.backend_options;
  oo.op_timeout = options.op_timeout;
  oo.max_in_flight = options.max_in_flight;
  oo.queue_depth = options.queue_depth;
  oo.block_when_full = options.block_when_full;
  oo.max_record_payload = options.max_record_payload;
  auto objecter = Objecter::Create(std::move(oo));
  if (!objecter.ok()) return objecter.status();

  mon::ControlAuth mon_auth = mon::ControlAuth::Insecure();
  if (!options.mon_pki_dir.empty()) {
    auto a = mon::ControlAuth::FromClusterDir(options.mon_pki_dir, options.mon_entity);
    if (!a.ok()) return a.status();
    mon_auth = *a;
  }
  auto mon = mon::MonClient::Create(options.mon_addr, options.mon_timeout, mon_auth);
  if (!mon.ok()) return mon.status();
  auto map = (*mon)->GetMap();
  if (!map.ok()) return map.status();
  const std::string ms_type = options.ms_type;
  const std::optional<placement::PoolInfo> pool = placement::FindPool(*map, options.pool);
  if (!pool.has_value()) {
    return absl::NotFoundError(absl::StrCat("no pool '", options.pool, "' (pools: ",
                                            placement::PoolNames(*map), ")"));
  }
  const uint32_t pool_id = pool->id;
  (*objecter)->HandleMap(placement::ToPlacementMap(*map, ms_type, *pool));
  spdlog::info("client.{}: map epoch {} from monitor {} ({} osds, pool {} id {}: {} pgs, size "
               "{}), ms_type {}",
               options.client_id, map->epoch(), options.mon_addr, map->osds_size(), pool->name,
               pool->id, pool->pg_num, pool->size.size, ms_type);

  std::unique_ptr<Client> c(new Client(std::move(options), std::move(*objecter)));
  Objecter* o = c->objecter_.get();
  const EntityName me = o->messenger()->options().name;
  const uint64_t instance = o->messenger()->options().instance;
  // The OSDs' rule (CheckFenced, msg/messenger.h), applied to ourselves: fail every op at once
  // rather than have each refused by an OSD.
  auto check_fenced = [o, me, instance](const mon::v1::ClusterMap& m) {
    if (m.blocklist_size() == 0) return;
    absl::Status s = CheckFenced(placement::FencedPeersOf(m), me, instance);
    if (s.ok()) return;
    o->Fence(absl::PermissionDeniedError(
        absl::StrCat(s.message(), ": the OSDs refuse its writes; start a new client")));
  };
  check_fenced(*map);
  absl::Status w = (*mon)->Watch(
      [o, ms_type, pool_id, check_fenced, hook = c->options_.map_hook](
          const mon::v1::ClusterMap& m) {
        if (hook) hook(m.epoch());
        check_fenced(m);
        // Pools are never deleted: a map without ours is not one to follow.
        auto p = placement::FindPoolById(m, pool_id);
        if (p.has_value()) o->HandleMap(placement::ToPlacementMap(m, ms_type, *p));
      });
  if (!w.ok()) return w;
  c->mon_ = std::move(*mon);
  return c;
}

void Client::Shutdown() {
  mon_.reset();  // joins the watch thread: no more maps
  if (objecter_) objecter_->Shutdown();
}

absl::StatusOr<std::string> Client::Read(std::string oid, uint64_t offset, uint64_t length) {
  Request r;
  r.oid = std::move(oid);
  r.offset = offset;
  r.length = length;
  return objecter_->Call(std::move(r));
}

void Client::AsyncRead(std::string oid, uint64_t offset, uint64_t length, ReadCallback cb) {
  Request r;
  r.oid = std::move(oid);
  r.offset = offset;
  r.length = length;
  objecter_->AsyncRequest(std::move(r), std::move(cb));
}

absl::StatusOr<uint64_t> Client::Stat(std::string oid) {
  Request r;
  r.kind = Request::Kind::kStat;
  r.oid = std::move(oid);
  auto body = objecter_->Call(std::move(r));
  if (!body.ok()) return body.status();
  auto stat = osd::DecodeStatBody(*body);
  if (!stat.ok()) return stat.status();
  return stat->size;
}

absl::Status Client::Delete(std::string oid) {
  Request r;
  r.kind = Request::Kind::kDelete;
  r.oid = std::move(oid);
  return objecter_->Call(std::move(r)).status();
}

absl::StatusOr<std::vector<Client::ObjectInfo>> Client::List(std::string prefix) {
  std::vector<ObjectInfo> all;
  for (int osd : objecter_->OsdsIn()) {
    Request r;
    r.kind = Request::Kind::kList;
    r.oid = prefix;
    r.osd = osd;
    r.max = osd::kMaxListPage;
    for (;;) {
      auto body = objecter_->Call(r);
      if (!body.ok()) return body.status();
      auto page = osd::DecodeListBody(*body);
      if (!page.ok()) return page.status();
      for (auto& e : page->entries) all.push_back({std::move(e.oid), e.size});
      if (!page->more || page->entries.empty()) break;
      r.after = all.back().oid;
    }
  }
  // An object lives on one OSD, but one whose PG moved (out, then in) may be listed by
  // both until backfill exists: one entry per id.
  std::sort(all.begin(), all.end(),
            [](const ObjectInfo& a, const ObjectInfo& b) { return a.oid < b.oid; });
  all.erase(std::unique(all.begin(), all.end(),
                        [](const ObjectInfo& a, const ObjectInfo& b) { return a.oid == b.oid; }),
            all.end());
  return all;
}

absl::StatusOr<ScrubReport> Client::Scrub() {
  const placement::PlacementMap map = objecter_->CurrentMap();
  std::map<std::string, std::vector<ObjectCopy>> copies;
  std::vector<int> scanned;
  for (const placement::OsdEntry& e : map.osds()) {
    if (!e.up) continue;  // it cannot answer; its copies are not checked (nor counted missing)
    Request r;
    r.kind = Request::Kind::kList;
    r.digest = true;
    r.osd = static_cast<int>(e.id);
    r.max = osd::kMaxScrubPage;
    for (;;) {
      auto body = objecter_->Call(r);
      if (!body.ok()) {
        return absl::Status(body.status().code(), absl::StrCat("scrub of osd.", e.id, ": ",
                                                               body.status().message()));
      }
      auto page = osd::DecodeListBody(*body, /*digest=*/true);
      if (!page.ok()) return page.status();
      for (auto& entry : page->entries) {
        copies[entry.oid].push_back({static_cast<int>(e.id), entry.size, entry.crc32c});
      }
      if (!page->more || page->entries.empty()) break;
      r.after = page->entries.back().oid;
    }
    scanned.push_back(static_cast<int>(e.id));
  }
  return CompareCopies(map, copies, scanned);
}

MessengerCounters Client::messenger_counters() const {
  return objecter_->messenger() ? objecter_->messenger()->counters() : MessengerCounters{};
}

std::vector<CounterGroup> Client::messenger_perf_counters() const {
  return objecter_->messenger() ? objecter_->messenger()->perf_counters()
                                : std::vector<CounterGroup>{};
}

}  // namespace msgr::client

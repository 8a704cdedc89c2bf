#include "osd_sim/mon/monitor.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "osd_sim/mon/map_store.h"
#include "proto/cluster_map.h"
#include "spdlog/spdlog.h"

namespace msgr::mon {
namespace {

// How often a WatchMap handler re-checks whether its client went away.
constexpr absl::Duration kWatchCancelPoll = absl::Milliseconds(50);
// The heartbeat checker runs this many times per heartbeat interval, so a missed grace
// is noticed well within one interval.
constexpr int kTicksPerInterval = 4;
constexpr absl::Duration kMinTick = absl::Milliseconds(5);
constexpr absl::Duration kMaxTick = absl::Milliseconds(250);
constexpr double kDefaultWeight = 1.0;
// Distinct refusals logged before the rest are only counted.
constexpr size_t kMaxRefusalsLogged = 1024;
constexpr size_t kMaxPoolNameBytes = 64;
// How long a blocklist entry lasts unless the request says (Ceph's
// mon_osd_blocklist_default_expire).
constexpr absl::Duration kBlocklistDefaultExpiry = absl::Hours(1);
constexpr size_t kMaxBlocklistEntries = 4096;
constexpr uint32_t kMaxPoolSize = 16;       // as the monitor's --pool-size
constexpr uint32_t kMaxPoolPgNum = 1 << 16;

std::string NewFsid() {
  std::random_device rd;
  uint32_t w[4] = {rd(), rd(), rd(), rd()};
  return absl::StrFormat("%08x-%04x-%04x-%04x-%04x%08x", w[0], w[1] >> 16, w[1] & 0xffff,
                         w[2] >> 16, w[2] & 0xffff, w[3]);
}

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

v1::OsdInfo* FindOsd(v1::ClusterMap* map, uint32_t id) {
  for (v1::OsdInfo& o : *map->mutable_osds()) {
    if (o.id() == id) return &o;
  }
  return nullptr;
}

grpc::Status UnknownOsd(uint32_t id) {
  return grpc::Status(grpc::StatusCode::NOT_FOUND,
                      absl::StrCat("osd.", id, " does not exist (it never booted)"));
}

// A pool name: 1..64 of [A-Za-z0-9_.-] (it appears in commands, JSON and file names).
bool ValidPoolName(const std::string& name) {
  if (name.empty() || name.size() > kMaxPoolNameBytes) return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '.' || c == '-';
  });
}

// "client.N" or "osd.N", N a decimal u64: what the OSDs can fence (EntityName::Parse).
bool BlocklistableEntity(const std::string& entity) {
  const size_t dot = entity.find('.');
  if (dot == std::string::npos) return false;
  const std::string type = entity.substr(0, dot), id = entity.substr(dot + 1);
  uint64_t n;
  return (type == "client" || type == "osd") && !id.empty() &&
         id.find_first_not_of("0123456789") == std::string::npos && absl::SimpleAtoi(id, &n);
}

grpc::Status Invalid(const std::string& why) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, why);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MonitorService>> MonitorService::Create(
    MonitorOptions options) {
  if (options.data_dir.empty()) return absl::InvalidArgumentError("data dir is required");
  if (options.pg_num == 0) return absl::InvalidArgumentError("pg_num must be > 0");
  if (options.pool_size == 0 || options.pool_min_size > options.pool_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "need 1 <= pool min_size (", options.pool_min_size, ") <= pool size (",
        options.pool_size, ")"));
  }
  if (options.heartbeat_interval <= absl::ZeroDuration() ||
      options.grace <= options.heartbeat_interval) {
    return absl::InvalidArgumentError(
        absl::StrCat("need 0 < heartbeat interval (", absl::FormatDuration(
                         options.heartbeat_interval),
                     ") < grace (", absl::FormatDuration(options.grace), ")"));
  }
  if (options.down_out_interval < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("down-out interval must be >= 0");
  }
  absl::StatusOr<std::optional<v1::ClusterMap>> loaded = LoadMap(options.data_dir);
  if (!loaded.ok()) return loaded.status();
  v1::ClusterMap map;
  if (loaded->has_value()) {
    map = std::move(**loaded);
    if (map.pg_num() != options.pg_num) {
      spdlog::warn("keeping pg_num {} of the existing cluster (asked for {})", map.pg_num(),
                   options.pg_num);
    }
    if (placement::PoolSizeOf(map).size != options.pool_size) {
      spdlog::warn("keeping pool size {} of the existing cluster (asked for {})",
                   placement::PoolSizeOf(map).size, options.pool_size);
    }
    // OSDs up in the saved map stay up: each gets a full grace from now to heartbeat this
    // incarnation (the constructor starts the clocks). Marking them all down would make
    // every OSD boot again and every PG re-peer for nothing; an OSD that died while the
    // monitor was away is marked down when its grace runs out. The map is unchanged, so the
    // epoch is too.
    spdlog::info("loaded cluster {} with {} osds ({} up, each given {} to heartbeat) at epoch {}",
                 map.fsid(), map.osds_size(),
                 std::count_if(map.osds().begin(), map.osds().end(),
                               [](const v1::OsdInfo& o) { return o.up(); }),
                 absl::FormatDuration(options.grace), map.epoch());
  } else {
    map.set_epoch(1);
    map.set_pg_num(options.pg_num);
    map.set_pool_size(options.pool_size);
    map.set_pool_min_size(options.pool_min_size > 0
                              ? options.pool_min_size
                              : placement::DefaultMinSize(options.pool_size));
    map.set_fsid(NewFsid());
    spdlog::info("created cluster {} pg_num {} pool size {} min_size {} epoch 1", map.fsid(),
                 map.pg_num(), map.pool_size(), map.pool_min_size());
  }
  absl::Status s = SaveMap(options.data_dir, map);
  if (!s.ok()) return s;

  std::unique_ptr<MonitorService> mon(new MonitorService(std::move(options), std::move(map)));
  mon->ticker_ = std::thread([m = mon.get()] { m->TickLoop(); });
  return mon;
}

MonitorService::MonitorService(MonitorOptions options, v1::ClusterMap map)
    : options_(std::move(options)), map_(std::move(map)) {
  // A loaded map's clocks start now: an up OSD has a grace to heartbeat, a down one is not
  // marked out before down_out_interval has passed here.
  const absl::Time now = absl::Now();
  for (const v1::OsdInfo& o : map_.osds()) {
    OsdRuntime& rt = runtime_[o.id()];
    rt.down_since = now;
    rt.last_heartbeat = now;
  }
}

MonitorService::~MonitorService() { Stop(); }

void MonitorService::Stop() {
  std::call_once(stop_once_, [this] {
    {
      absl::MutexLock l(&mu_);
      stopping_ = true;
      changed_.SignalAll();
    }
    if (ticker_.joinable()) ticker_.join();
  });
}

MonCounters MonitorService::Counters() const {
  MonCounters c = counters_.Snapshot();
  absl::MutexLock l(&mu_);
  c.map_epoch = map_.epoch();
  c.osds = static_cast<uint64_t>(map_.osds_size());
  c.osds_up = 0;
  c.osds_in = 0;
  for (const v1::OsdInfo& o : map_.osds()) {
    c.osds_up += o.up() ? 1 : 0;
    c.osds_in += o.in() ? 1 : 0;
  }
  return c;
}

v1::ClusterMap MonitorService::CurrentMap() const {
  absl::MutexLock l(&mu_);
  return map_;
}

absl::Status MonitorService::CommitLocked(v1::ClusterMap next) {
  next.set_epoch(map_.epoch() + 1);
  absl::Status s = SaveMap(options_.data_dir, next);
  if (!s.ok()) {
    spdlog::error("cannot persist epoch {}: {}", next.epoch(), s.ToString());
    return s;
  }
  map_ = std::move(next);
  changed_.SignalAll();
  return absl::OkStatus();
}

grpc::Status MonitorService::Authorize(const grpc::ServerContext* ctx, ControlOp op,
                                       uint32_t osd_id) {
  if (!options_.enforce_roles) return grpc::Status::OK;
  const std::string entity = ctx == nullptr ? "" : PeerEntity(*ctx);
  absl::Status s = AuthorizeControl(entity, op, osd_id);
  if (s.ok()) return grpc::Status::OK;
  ++counters_.auth_refused;
  ++counters_.rpc_errors;
  bool first = false;
  {
    absl::MutexLock l(&refused_mu_);
    if (refused_logged_.size() < kMaxRefusalsLogged) {
      first = refused_logged_.insert(std::string(s.message())).second;
    }
  }
  if (first) {
    spdlog::warn("refused a call from {}: {} (the same refusal again is only counted, in "
                 "auth_refused)", ctx == nullptr ? "?" : ctx->peer(), std::string(s.message()));
  }
  return ToGrpc(s);
}

grpc::Status MonitorService::BootOsd(grpc::ServerContext* ctx, const v1::BootOsdRequest* req,
                                     v1::BootOsdReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kBootOsd, req->id()); !a.ok()) return a;
  ++counters_.boot_rpcs;
  if (req->addr().empty()) {
    ++counters_.rpc_errors;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "boot without a messenger addr");
  }
  if (!std::isfinite(req->weight()) || req->weight() < 0) {
    ++counters_.rpc_errors;
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                        absl::StrCat("bad weight ", req->weight()));
  }
  absl::MutexLock l(&mu_);
  if (req->instance() != 0) {
    // An old process of this id (blocklisted when its successor booted, or by the
    // operator) must not take the id back with what it held before.
    const absl::Status fenced =
        CheckFenced(placement::FencedPeersOf(map_),
                             EntityName{EntityType::kOsd, req->id()}, req->instance());
    if (!fenced.ok()) {
      ++counters_.rpc_errors;
      ++counters_.stale_instances_refused;
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          absl::StrCat(fenced.message(), "; this process may not boot again: stop "
                                       "it (a new process has a new instance)"));
    }
  }
  v1::ClusterMap next = map_;
  v1::OsdInfo* osd = FindOsd(&next, req->id());
  const bool is_new = osd == nullptr;
  if (is_new) {
    osd = next.add_osds();
    osd->set_id(req->id());
    osd->set_in(true);
    osd->set_weight(kDefaultWeight);
  } else if (osd->auto_out()) {
    osd->set_in(true);  // out only because it was down too long: back in on boot
    osd->set_auto_out(false);
  }
  osd->set_addr(req->addr());
  osd->mutable_ms_types()->CopyFrom(req->ms_types());
  osd->set_rdma_addr(req->rdma_addr());
  osd->set_cluster_addr(req->cluster_addr());
  osd->set_cluster_rdma_addr(req->cluster_rdma_addr());
  osd->set_host(req->host());
  if (req->weight() > 0) osd->set_weight(req->weight());
  if (osd->instance() != 0 && req->instance() != osd->instance()) {
    // The OSD came back as another process: the old one, if it still runs (stopped, cut
    // off), must not reach the new one's peers or take writes for its PGs.
    v1::BlocklistEntry* b = next.add_blocklist();
    b->set_entity(absl::StrCat("osd.", req->id()));
    b->set_instance(osd->instance());
    b->set_epoch(map_.epoch() + 1);
    b->set_expires_unix_ms(absl::ToUnixMillis(absl::Now() + kBlocklistDefaultExpiry));
    b->set_reason(absl::StrCat("osd.", req->id(), " restarted"));
  }
  osd->set_instance(req->instance());
  osd->set_up(true);
  osd->set_up_from(map_.epoch() + 1);
  std::sort(next.mutable_osds()->begin(), next.mutable_osds()->end(),
            [](const v1::OsdInfo& a, const v1::OsdInfo& b) { return a.id() < b.id(); });
  absl::Status s = CommitLocked(std::move(next));
  if (!s.ok()) {
    ++counters_.rpc_errors;
    return ToGrpc(s);
  }
  runtime_[req->id()].last_heartbeat = absl::Now();
  spdlog::info("osd.{} boot{} host {} addr {} ms_types [{}] epoch {}", req->id(),
               is_new ? " (new)" : "", req->host(), req->addr(),
               absl::StrJoin(req->ms_types(), ","), map_.epoch());
  reply->set_epoch(map_.epoch());
  reply->set_heartbeat_interval_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.heartbeat_interval)));
  return grpc::Status::OK;
}

grpc::Status MonitorService::Heartbeat(grpc::ServerContext* ctx,
                                       const v1::HeartbeatRequest* req,
                                       v1::HeartbeatReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kHeartbeat, req->id()); !a.ok()) return a;
  ++counters_.heartbeat_rpcs;
  absl::MutexLock l(&mu_);
  reply->set_epoch(map_.epoch());
  v1::OsdInfo* osd = FindOsd(&map_, req->id());
  if (osd != nullptr && req->instance() != 0 && osd->instance() != 0 &&
      req->instance() != osd->instance()) {
    // Another process booted as this id since: this one's heartbeats must not keep the id
    // up (nor make it boot again and take the id back).
    ++counters_.rpc_errors;
    ++counters_.stale_instances_refused;
    return grpc::Status(
        grpc::StatusCode::FAILED_PRECONDITION,
        absl::StrCat("osd.", req->id(), " instance ", absl::Hex(req->instance()),
                     " was replaced: instance ", absl::Hex(osd->instance()),
                     " booted as osd.", req->id(), " at map epoch ", osd->up_from(),
                     "; this process is fenced and must stop"));
  }
  if (osd == nullptr || !osd->up()) {
    reply->set_known(false);  // never booted, or marked down: it must boot again
    return grpc::Status::OK;
  }
  runtime_[req->id()].last_heartbeat = absl::Now();
  runtime_[req->id()].pg_stats = req->pg_stats();
  runtime_[req->id()].applied_epoch = req->applied_epoch();
  reply->set_known(true);
  return grpc::Status::OK;
}

grpc::Status MonitorService::GetMap(grpc::ServerContext* ctx, const v1::GetMapRequest*,
                                    v1::ClusterMap* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kGetMap, 0); !a.ok()) return a;
  ++counters_.get_map_rpcs;
  absl::MutexLock l(&mu_);
  *reply = map_;
  for (const v1::OsdInfo& o : map_.osds()) {
    auto it = runtime_.find(o.id());
    if (!o.up() || it == runtime_.end()) continue;
    (*reply->mutable_osd_pg_stats())[o.id()] = it->second.pg_stats;
    (*reply->mutable_osd_applied_epochs())[o.id()] = it->second.applied_epoch;
  }
  return grpc::Status::OK;
}

grpc::Status MonitorService::WatchMap(grpc::ServerContext* ctx,
                                      const v1::WatchMapRequest* req,
                                      grpc::ServerWriter<v1::ClusterMap>* writer) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kWatchMap, 0); !a.ok()) return a;
  ++counters_.watch_map_rpcs;
  ++counters_.watch_streams;
  struct StreamGauge {
    RelaxedCounter* open;
    ~StreamGauge() { --*open; }
  } gauge{&counters_.watch_streams};
  uint64_t sent = req->after_epoch();
  for (;;) {
    v1::ClusterMap snapshot;
    {
      absl::MutexLock l(&mu_);
      while (!stopping_ && map_.epoch() <= sent && !ctx->IsCancelled()) {
        changed_.WaitWithTimeout(&mu_, kWatchCancelPoll);
      }
      if (stopping_) {
        return grpc::Status(grpc::StatusCode::UNAVAILABLE, "monitor is shutting down");
      }
      if (ctx->IsCancelled()) return grpc::Status::CANCELLED;
      snapshot = map_;
    }
    if (!writer->Write(snapshot)) return grpc::Status::CANCELLED;  // client went away
    sent = snapshot.epoch();
  }
}

grpc::Status MonitorService::SetIn(uint32_t id, bool in) {
  absl::MutexLock l(&mu_);
  v1::ClusterMap next = map_;
  v1::OsdInfo* osd = FindOsd(&next, id);
  if (osd == nullptr) return UnknownOsd(id);
  if (osd->in() == in) return grpc::Status::OK;  // no change, no new epoch
  osd->set_in(in);
  osd->set_auto_out(false);  // an operator decision sticks across boots
  absl::Status s = CommitLocked(std::move(next));
  if (!s.ok()) return ToGrpc(s);
  spdlog::info("osd.{} marked {} by operator, epoch {}", id, in ? "in" : "out", map_.epoch());
  return grpc::Status::OK;
}

grpc::Status MonitorService::MarkOut(grpc::ServerContext* ctx, const v1::MarkRequest* req,
                                     v1::MarkReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kMarkOut, req->id()); !a.ok()) return a;
  ++counters_.mark_rpcs;
  grpc::Status s = SetIn(req->id(), false);
  if (!s.ok()) ++counters_.rpc_errors;
  reply->set_epoch(CurrentMap().epoch());
  return s;
}

grpc::Status MonitorService::MarkIn(grpc::ServerContext* ctx, const v1::MarkRequest* req,
                                    v1::MarkReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kMarkIn, req->id()); !a.ok()) return a;
  ++counters_.mark_rpcs;
  grpc::Status s = SetIn(req->id(), true);
  if (!s.ok()) ++counters_.rpc_errors;
  reply->set_epoch(CurrentMap().epoch());
  return s;
}

grpc::Status MonitorService::CreatePool(grpc::ServerContext* ctx,
                                        const v1::CreatePoolRequest* req,
                                        v1::CreatePoolReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kCreatePool, 0); !a.ok()) return a;
  grpc::Status s = DoCreatePool(*req, reply);
  if (!s.ok()) ++counters_.rpc_errors;
  return s;
}

grpc::Status MonitorService::DoCreatePool(const v1::CreatePoolRequest& req,
                                          v1::CreatePoolReply* reply) {
  const std::string& name = req.name();
  if (!ValidPoolName(name)) {
    return Invalid(absl::StrCat("bad pool name '", name, "': 1..", kMaxPoolNameBytes,
                                " of letters, digits, '_', '.', '-'"));
  }
  const uint32_t size = req.size() == 0 ? 1 : req.size();
  if (size > kMaxPoolSize) {
    return Invalid(absl::StrCat("pool size ", size, " is above the limit of ", kMaxPoolSize));
  }
  const uint32_t min_size =
      req.min_size() == 0 ? placement::DefaultMinSize(size) : req.min_size();
  if (min_size > size) {
    return Invalid(absl::StrCat("min_size ", min_size, " is more than the pool's size ", size,
                                " (need 1 <= min_size <= size)"));
  }
  if (req.pg_num() > kMaxPoolPgNum) {
    return Invalid(absl::StrCat("pg_num ", req.pg_num(), " is above the limit of ",
                                kMaxPoolPgNum));
  }
  absl::MutexLock l(&mu_);
  if (placement::FindPool(map_, name).has_value()) {
    return grpc::Status(grpc::StatusCode::ALREADY_EXISTS,
                        absl::StrCat("pool '", name, "' already exists"));
  }
  v1::ClusterMap next = map_;
  uint32_t id = 1;
  for (const v1::Pool& p : next.pools()) id = std::max(id, p.id() + 1);
  v1::Pool* pool = next.add_pools();
  pool->set_id(id);
  pool->set_name(name);
  pool->set_size(size);
  pool->set_min_size(min_size);
  pool->set_pg_num(req.pg_num() == 0 ? std::max<uint32_t>(map_.pg_num(), 1) : req.pg_num());
  *reply->mutable_pool() = *pool;
  absl::Status c = CommitLocked(std::move(next));
  if (!c.ok()) return ToGrpc(c);
  reply->set_epoch(map_.epoch());
  spdlog::info("pool '{}' created: id {} size {} min_size {} pg_num {}, epoch {}", name, id, size,
               min_size, reply->pool().pg_num(), map_.epoch());
  return grpc::Status::OK;
}

grpc::Status MonitorService::Blocklist(grpc::ServerContext* ctx, const v1::BlocklistRequest* req,
                                       v1::BlocklistReply* reply) {
  if (grpc::Status a = Authorize(ctx, ControlOp::kBlocklist, 0); !a.ok()) return a;
  if (!BlocklistableEntity(req->entity())) {
    ++counters_.rpc_errors;
    return Invalid(absl::StrCat("'", req->entity(),
                                "' cannot be blocklisted: name a client.N or an osd.N"));
  }
  absl::MutexLock l(&mu_);
  v1::ClusterMap next = map_;
  auto* list = next.mutable_blocklist();
  auto same = std::find_if(list->begin(), list->end(), [&](const v1::BlocklistEntry& e) {
    return e.entity() == req->entity() && e.instance() == req->instance();
  });
  const std::string what = absl::StrCat(
      req->entity(), req->instance() != 0 ? absl::StrCat(" instance ", absl::Hex(req->instance()))
                                           : std::string(" (every instance)"));
  if (req->remove()) {
    if (same == list->end()) {
      ++counters_.rpc_errors;
      return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat(what, " is not blocklisted"));
    }
    *reply->mutable_entry() = *same;
    list->erase(same);
  } else {
    if (same == list->end()) {
      if (static_cast<size_t>(list->size()) >= kMaxBlocklistEntries) {
        ++counters_.rpc_errors;
        return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                            absl::StrCat("the blocklist holds ", list->size(),
                                         " entries: remove some (monctl blocklist rm)"));
      }
      list->Add();
      same = list->end() - 1;
    }
    const absl::Duration expiry =
        req->expire_s() == 0 ? kBlocklistDefaultExpiry : absl::Seconds(req->expire_s());
    same->set_entity(req->entity());
    same->set_instance(req->instance());
    same->set_epoch(map_.epoch() + 1);
    same->set_expires_unix_ms(absl::ToUnixMillis(absl::Now() + expiry));
    same->set_reason("monctl blocklist");
    *reply->mutable_entry() = *same;
  }
  absl::Status s = CommitLocked(std::move(next));
  if (!s.ok()) {
    ++counters_.rpc_errors;
    return ToGrpc(s);
  }
  reply->set_epoch(map_.epoch());
  spdlog::warn("{} {} the blocklist, epoch {}", what, req->remove() ? "removed from" : "added to",
               map_.epoch());
  return grpc::Status::OK;
}

bool MonitorService::ExpireBlocklist(v1::ClusterMap* next, absl::Time now) {
  auto* list = next->mutable_blocklist();
  const int64_t now_ms = absl::ToUnixMillis(now);
  auto gone = std::remove_if(list->begin(), list->end(), [&](const v1::BlocklistEntry& e) {
    return e.expires_unix_ms() != 0 && e.expires_unix_ms() <= now_ms;
  });
  if (gone == list->end()) return false;
  for (auto it = gone; it != list->end(); ++it) {
    spdlog::info("{} instance {:x}: blocklist entry expired", it->entity(), it->instance());
  }
  list->erase(gone, list->end());
  return true;
}

void MonitorService::CheckHeartbeatsLocked(absl::Time now) {
  v1::ClusterMap next = map_;
  bool changed = ExpireBlocklist(&next, now);
  for (v1::OsdInfo& o : *next.mutable_osds()) {
    OsdRuntime& rt = runtime_[o.id()];
    if (o.up() && now - rt.last_heartbeat > options_.grace) {
      o.set_up(false);
      rt.down_since = now;
      changed = true;
      ++counters_.osds_marked_down;
      spdlog::warn("osd.{} down: no heartbeat for {}", o.id(),
                   absl::FormatDuration(now - rt.last_heartbeat));
    } else if (!o.up() && o.in() && options_.down_out_interval > absl::ZeroDuration() &&
               now - rt.down_since >= options_.down_out_interval) {
      o.set_in(false);
      o.set_auto_out(true);
      changed = true;
      ++counters_.osds_marked_out;
      spdlog::warn("osd.{} out: down for {}", o.id(), absl::FormatDuration(now - rt.down_since));
    }
  }
  if (changed && CommitLocked(std::move(next)).ok()) {
    spdlog::info("epoch {} after heartbeat check", map_.epoch());
  }
}

void MonitorService::TickLoop() {
  const absl::Duration tick = std::clamp(options_.heartbeat_interval / kTicksPerInterval,
                                         kMinTick, kMaxTick);
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    changed_.WaitWithTimeout(&mu_, tick);
    if (stopping_) break;
    CheckHeartbeatsLocked(absl::Now());
  }
}

}  // namespace msgr::mon

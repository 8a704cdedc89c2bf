#include "osd_sim/mon/map_format.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "nlohmann/json.hpp"
#include "proto/cluster_map.h"

namespace msgr::mon {

std::string MapToJson(const v1::ClusterMap& map) {
  nlohmann::json osds = nlohmann::json::array();
  for (const v1::OsdInfo& o : map.osds()) {
    // The map epoch the OSD last reported applied (in a heartbeat to this monitor
    // incarnation; 0: none yet, or a map not from GetMap).
    auto applied = map.osd_applied_epochs().find(o.id());
    osds.push_back({
        {"id", o.id()},
        {"addr", o.addr()},
        {"up", o.up()},
        {"in", o.in()},
        {"weight", o.weight()},
        {"ms_types", std::vector<std::string>(o.ms_types().begin(), o.ms_types().end())},
        {"up_from", o.up_from()},
        {"rdma_addr", o.rdma_addr()},
        {"cluster_addr", o.cluster_addr()},
        {"cluster_rdma_addr", o.cluster_rdma_addr()},
        {"host", o.host()},
        {"applied_epoch", applied == map.osd_applied_epochs().end() ? 0 : applied->second},
    });
    // PGs it leads, active and peering, as of its last heartbeat (live maps only).
    if (auto s = map.osd_pg_stats().find(o.id()); s != map.osd_pg_stats().end()) {
      osds.back()["pgs_active"] = s->second.pgs_active();
      osds.back()["pgs_peering"] = s->second.pgs_peering();
    }
  }
  nlohmann::json pools = nlohmann::json::array();
  for (const placement::PoolInfo& p : placement::PoolsOf(map)) {
    pools.push_back({{"id", p.id},
                     {"name", p.name},
                     {"size", p.size.size},
                     {"min_size", p.size.min_size},
                     {"pg_num", p.pg_num}});
  }
  nlohmann::json j = {
      {"fsid", map.fsid()},
      {"epoch", map.epoch()},
      {"pg_num", map.pg_num()},
      {"pool_size", placement::PoolSizeOf(map).size},
      {"pool_min_size", placement::PoolSizeOf(map).min_size},
      {"pools", pools},
      {"osds", osds},
  };
  return j.dump(2) + "\n";
}

std::string MapToTable(const v1::ClusterMap& map) {
  int up = 0, in = 0;
  for (const v1::OsdInfo& o : map.osds()) {
    up += o.up() ? 1 : 0;
    in += o.in() ? 1 : 0;
  }
  std::string out = absl::StrFormat(
      "cluster %s epoch %d pg_num %d pool size %d min_size %d\n", map.fsid(), map.epoch(),
      map.pg_num(), placement::PoolSizeOf(map).size, placement::PoolSizeOf(map).min_size);
  if (map.pools_size() > 0) {
    std::vector<std::string> pools;
    for (const placement::PoolInfo& p : placement::PoolsOf(map)) {
      pools.push_back(absl::StrFormat("%s (id %d, size %d/%d, pg_num %d)", p.name, p.id,
                                      p.size.size, p.size.min_size, p.pg_num));
    }
    absl::StrAppendFormat(&out, "pools: %s\n", absl::StrJoin(pools, ", "));
  }
  absl::StrAppendFormat(&out, "osds: %d total, %d up, %d in\n", map.osds_size(), up, in);
  if (map.blocklist_size() > 0) {
    absl::StrAppendFormat(&out, "blocklist: %d entr%s (monctl blocklist ls)\n",
                          map.blocklist_size(), map.blocklist_size() == 1 ? "y" : "ies");
  }
  if (!map.osd_pg_stats().empty()) {  // live, from GetMap
    uint64_t active = 0, peering = 0, recovered = 0, from_log = 0, backfills = 0;
    std::vector<std::string> waiting;
    for (const auto& [id, s] : map.osd_pg_stats()) {
      active += s.pgs_active();
      peering += s.pgs_peering();
      recovered += s.objects_recovered();
      from_log += s.recoveries_from_log();
      backfills += s.backfills();
      if (s.pgs_peering() > 0) waiting.push_back(absl::StrCat("osd.", id, " ", s.pgs_peering()));
    }
    std::sort(waiting.begin(), waiting.end());
    absl::StrAppendFormat(&out, "pgs: %d active, %d peering%s; %d objects recovered%s\n", active,
                          peering,
                          waiting.empty() ? ""
                                          : absl::StrCat(" (ops wait; ", absl::StrJoin(waiting, ", "), ")"),
                          recovered,
                          from_log + backfills == 0
                              ? ""
                              : absl::StrCat(" (", from_log, " syncs from PG logs, ",
                                             backfills, " backfills)"));
  }
  if (map.osds_size() == 0) return out;
  absl::StrAppendFormat(&out, "%5s  %-12s %-21s %-4s %-3s %7s %8s  %s\n", "ID", "HOST", "ADDR",
                        "UP", "IN", "WEIGHT", "UP_FROM", "MS_TYPES");
  for (const v1::OsdInfo& o : map.osds()) {
    absl::StrAppendFormat(&out, "%5d  %-12s %-21s %-4s %-3s %7.2f %8d  %s\n", o.id(),
                          o.host().empty() ? "-" : o.host(), o.addr(), o.up() ? "up" : "down",
                          o.in() ? "in" : "out", o.weight(), o.up_from(),
                          absl::StrJoin(o.ms_types(), ","));
  }
  return out;
}

std::string BlocklistToTable(const v1::ClusterMap& map) {
  std::string out = absl::StrFormat("%-22s %-16s %6s  %-20s %s\n", "ENTITY", "INSTANCE", "EPOCH",
                                    "EXPIRES (UTC)", "REASON");
  for (const v1::BlocklistEntry& e : map.blocklist()) {
    absl::StrAppendFormat(
        &out, "%-22s %-16s %6d  %-20s %s\n", e.entity(),
        e.instance() == 0 ? std::string("*") : absl::StrCat(absl::Hex(e.instance())), e.epoch(),
        e.expires_unix_ms() == 0
            ? std::string("never")
            : absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::FromUnixMillis(e.expires_unix_ms()),
                               absl::UTCTimeZone()),
        e.reason());
  }
  return out;
}

std::string PoolsToTable(const v1::ClusterMap& map) {
  std::string out = absl::StrFormat("%4s  %-20s %4s %8s %6s\n", "ID", "NAME", "SIZE", "MIN_SIZE",
                                    "PG_NUM");
  for (const placement::PoolInfo& p : placement::PoolsOf(map)) {
    absl::StrAppendFormat(&out, "%4d  %-20s %4d %8d %6d\n", p.id, p.name, p.size.size,
                          p.size.min_size, p.pg_num);
  }
  return out;
}

}  // namespace msgr::mon

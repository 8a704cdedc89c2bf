#include "proto/cluster_map.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace msgr::placement {

PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type) {
  return ToPlacementMap(map, ms_type, PoolsOf(map).front());
}

PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type,
                            const PoolInfo& pool) {
  std::vector<OsdEntry> osds;
  osds.reserve(map.osds_size());
  for (const auto& o : map.osds()) {
    OsdEntry e;
    e.id = o.id();
    e.addr = (ms_type == "rdma" && !o.rdma_addr().empty()) ? o.rdma_addr() : o.addr();
    e.up = o.up();
    e.in = o.in();
    e.weight = o.weight();
    e.up_from = o.up_from();
    e.ms_types.assign(o.ms_types().begin(), o.ms_types().end());
    e.host = o.host();
    // Where OSD peers reach it over this backend: rdma's cluster side channel, else its
    // public one (e.addr); tcp's cluster address, else e.addr.
    e.cluster_addr = ms_type == "rdma" ? o.cluster_rdma_addr() : o.cluster_addr();
    osds.push_back(std::move(e));
  }
  return PlacementMap::Build(map.epoch(), std::max<uint32_t>(pool.pg_num, 1), std::move(osds),
                             pool.size, pool.id);
}

PoolSize PoolSizeOf(const mon::v1::ClusterMap& map) {
  PoolSize p;
  p.size = std::max<uint32_t>(map.pool_size(), 1);
  p.min_size = map.pool_min_size() > 0 ? std::min(map.pool_min_size(), p.size)
                                       : DefaultMinSize(p.size);
  return p;
}

}  // namespace msgr::placement

namespace msgr::placement {

std::vector<PoolInfo> PoolsOf(const mon::v1::ClusterMap& map) {
  const uint32_t map_pg_num = std::max<uint32_t>(map.pg_num(), 1);
  std::vector<PoolInfo> pools(1);
  pools[0].size = PoolSizeOf(map);
  pools[0].pg_num = map_pg_num;
  for (const mon::v1::Pool& p : map.pools()) {
    if (p.id() == kDefaultPoolId) continue;  // the default pool is the fields above
    PoolInfo i;
    i.id = p.id();
    i.name = p.name();
    i.size.size = std::max<uint32_t>(p.size(), 1);
    i.size.min_size = p.min_size() > 0 ? std::min(p.min_size(), i.size.size)
                                       : DefaultMinSize(i.size.size);
    i.pg_num = p.pg_num() > 0 ? p.pg_num() : map_pg_num;
    pools.push_back(std::move(i));
  }
  std::sort(pools.begin() + 1, pools.end(),
            [](const PoolInfo& a, const PoolInfo& b) { return a.id < b.id; });
  return pools;
}

std::optional<PoolInfo> FindPool(const mon::v1::ClusterMap& map, const std::string& name) {
  const std::string want = name.empty() ? kDefaultPoolName : name;
  for (PoolInfo& p : PoolsOf(map)) {
    if (p.name == want) return std::move(p);
  }
  return std::nullopt;
}

std::optional<PoolInfo> FindPoolById(const mon::v1::ClusterMap& map, uint32_t id) {
  for (PoolInfo& p : PoolsOf(map)) {
    if (p.id == id) return std::move(p);
  }
  return std::nullopt;
}

std::string PoolNames(const mon::v1::ClusterMap& map) {
  std::string out;
  for (const PoolInfo& p : PoolsOf(map)) {
    if (!out.empty()) out += ", ";
    out += p.name;
  }
  return out;
}

std::vector<FencedPeer> FencedPeersOf(const mon::v1::ClusterMap& map,
                                      std::vector<std::string>* ignored) {
  std::vector<FencedPeer> fenced;
  for (const mon::v1::BlocklistEntry& e : map.blocklist()) {
    absl::StatusOr<EntityName> name = EntityName::Parse(e.entity());
    if (!name.ok()) {
      if (ignored != nullptr) ignored->push_back(name.status().ToString());
      continue;
    }
    fenced.push_back(FencedPeer{*name, e.instance(),
                                absl::StrCat("blocklisted at map epoch ", e.epoch(), " (",
                                             e.reason(), ")")});
  }
  return fenced;
}

}  // namespace msgr::placement

#include "proto/cluster_map.h"

#include <algorithm>
#include <utility>
#include <vector>

namespace msgr::placement {

PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type) {
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
    e.cluster_addr = o.cluster_addr();
    osds.push_back(std::move(e));
  }
  return PlacementMap::Build(map.epoch(), map.pg_num() > 0 ? map.pg_num() : 1, std::move(osds),
                             PoolSizeOf(map));
}

PoolSize PoolSizeOf(const mon::v1::ClusterMap& map) {
  PoolSize p;
  p.size = std::max<uint32_t>(map.pool_size(), 1);
  p.min_size = map.pool_min_size() > 0 ? std::min(map.pool_min_size(), p.size)
                                       : DefaultMinSize(p.size);
  return p;
}

}  // namespace msgr::placement

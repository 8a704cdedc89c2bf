#include "osd_sim/mon/map_format.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "proto/cluster_map.h"

namespace msgr::mon {

std::string MapToJson(const v1::ClusterMap& map) {
  nlohmann::json osds = nlohmann::json::array();
  for (const v1::OsdInfo& o : map.osds()) {
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
        {"host", o.host()},
    });
  }
  nlohmann::json j = {
      {"fsid", map.fsid()},
      {"epoch", map.epoch()},
      {"pg_num", map.pg_num()},
      {"pool_size", placement::PoolSizeOf(map).size},
      {"pool_min_size", placement::PoolSizeOf(map).min_size},
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
  absl::StrAppendFormat(&out, "osds: %d total, %d up, %d in\n", map.osds_size(), up, in);
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

}  // namespace msgr::mon

// Renders a cluster map for people (a table) and for scripts (JSON), as printed by monctl.
//
// JSON: {"fsid": str, "epoch": n, "pg_num": n, "osds": [{"id", "addr", "up", "in",
// "weight", "ms_types": [str], "up_from", "rdma_addr", "cluster_addr", "host"}]}.
//
// Thread-safety: pure functions.
#ifndef MSGR_OSD_SIM_MON_MAP_FORMAT_H_
#define MSGR_OSD_SIM_MON_MAP_FORMAT_H_

#include <string>

#include "proto/mon.pb.h"

namespace msgr::mon {

std::string MapToJson(const v1::ClusterMap& map);
std::string MapToTable(const v1::ClusterMap& map);
// The pools as a table (`monctl pool ls`): ID NAME SIZE MIN_SIZE PG_NUM, default first.
std::string PoolsToTable(const v1::ClusterMap& map);
// The blocklist as a table (`monctl blocklist ls`): ENTITY INSTANCE EPOCH EXPIRES REASON.
std::string BlocklistToTable(const v1::ClusterMap& map);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MAP_FORMAT_H_

// The monitor's cluster map (proto/mon.proto) as the client's placement sees it. Kept
// apart from client.h so the library's public API carries no generated proto types.
// Thread-safety: pure function.
#ifndef MSGR_PROTO_CLUSTER_MAP_H_
#define MSGR_PROTO_CLUSTER_MAP_H_

#include <string>

#include "proto/placement.h"
#include "proto/mon.pb.h"

namespace msgr::placement {

// OSD addresses for `ms_type` (rdma_addr for "rdma" when the OSD advertises one),
// up/in, weight, incarnation, backends served, host, cluster address; the pool's size.
PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type);

// The default pool's size and min_size as the map states them, defaults filled in.
PoolSize PoolSizeOf(const mon::v1::ClusterMap& map);

}  // namespace msgr::placement

#endif  // MSGR_PROTO_CLUSTER_MAP_H_

// The monitor's cluster map (proto/mon.proto) as the client's placement sees it. Kept
// apart from client.h so the library's public API carries no generated proto types.
// Thread-safety: pure function.
#ifndef MSGR_CLIENT_CLUSTER_MAP_H_
#define MSGR_CLIENT_CLUSTER_MAP_H_

#include <string>

#include "client/placement.h"
#include "proto/mon.pb.h"

namespace msgr::client {

// OSD addresses for `ms_type` (rdma_addr for "rdma" when the OSD advertises one),
// up/in, weight, incarnation, backends served.
PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type);

}  // namespace msgr::client

#endif  // MSGR_CLIENT_CLUSTER_MAP_H_

// The monitor's cluster map (proto/mon.proto) as the client's placement sees it. Kept
// apart from client.h so the library's public API carries no generated proto types.
// Thread-safety: pure function.
#ifndef MSGR_PROTO_CLUSTER_MAP_H_
#define MSGR_PROTO_CLUSTER_MAP_H_

#include <optional>
#include <string>
#include <vector>

#include "msg/messenger.h"
#include "proto/placement.h"
#include "proto/mon.pb.h"

namespace msgr::placement {

// OSD addresses for `ms_type` (rdma_addr for "rdma" when the OSD advertises one),
// up/in, weight, incarnation, backends served, host, cluster address; the default pool's
// placement.
PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type);
// The same for `pool` (one of PoolsOf(map)).
PlacementMap ToPlacementMap(const mon::v1::ClusterMap& map, const std::string& ms_type,
                            const PoolInfo& pool);

// The default pool's size and min_size as the map states them, defaults filled in.
PoolSize PoolSizeOf(const mon::v1::ClusterMap& map);

// Every pool of the map, the default pool (id 0) first, then by id; defaults filled in
// (size >= 1, 1 <= min_size <= size, pg_num >= 1: a pool without one has the map's).
std::vector<PoolInfo> PoolsOf(const mon::v1::ClusterMap& map);
// The pool named `name` ("" means "default"), or nullopt.
std::optional<PoolInfo> FindPool(const mon::v1::ClusterMap& map, const std::string& name);
std::optional<PoolInfo> FindPoolById(const mon::v1::ClusterMap& map, uint32_t id);
// "default, images, rbd": the pools' names, for errors.
std::string PoolNames(const mon::v1::ClusterMap& map);

// The map's blocklist as a fence list (Messenger::SetFenced, session::FenceSet), one peer per
// entry, its `why` "blocklisted at map epoch E (REASON)". An entry whose entity does not
// parse (EntityName::Parse) is left out and, when `ignored` is given, described there.
std::vector<FencedPeer> FencedPeersOf(const mon::v1::ClusterMap& map,
                                      std::vector<std::string>* ignored = nullptr);

}  // namespace msgr::placement

#endif  // MSGR_PROTO_CLUSTER_MAP_H_

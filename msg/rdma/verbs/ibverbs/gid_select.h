// RoCE GID selection of the ibverbs provider, as a pure function of a port's GID table so
// that every rule is tested on a host without an RDMA device (gid_select_test).
// Thread-safety: pure functions.
#ifndef MSGR_MSG_RDMA_VERBS_IBVERBS_GID_SELECT_H_
#define MSGR_MSG_RDMA_VERBS_IBVERBS_GID_SELECT_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

// One populated entry of a port's GID table (ibv_query_gid_ex); empty slots are absent.
struct GidEntry {
  int index = 0;
  bool roce_v2 = false;  // else RoCE v1 (or IB)
  Gid gid{};
};

// "::ffff:198.18.1.1 (index 1, RoCE v2)"-style text for messages.
std::string GidEntryString(const GidEntry& e);

// The GID index to use on an Ethernet (RoCE) port whose table has `table_len` slots, of
// which `entries` (ascending index) are populated:
//  * `option` >= 0 (DeviceOptions::gid_index), else `env` (MSGR_RDMA_GID_INDEX, null or ""
//    when unset): that index, which must name a populated entry — an empty slot would give
//    the QPs the all-zero GID, and the peer's writes would time out instead of failing here;
//  * else the first RoCE v2 IPv4-mapped GID (an address of the port's netdev), then the
//    first RoCE v2 GID that is not link-local (fe80::/10: routable IPv6), then the first
//    link-local RoCE v2 GID, then the first entry of any type.
// Errors say which device (`device`) and list what the table holds.
absl::StatusOr<int> SelectGidIndex(absl::Span<const GidEntry> entries, int table_len,
                                   int option, const char* env, absl::string_view device);

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_IBVERBS_GID_SELECT_H_

// The ibverbs provider: the device layer over rdma-core's libibverbs (any RDMA device:
// ConnectX, EFA-less RoCE NICs, Soft-RoCE rxe). RAII wrappers own every verbs object; QP
// transitions handle InfiniBand (LID) and RoCE (GID, default a RoCEv2 IPv4-mapped GID).
// Thread-safety: as msg/rdma/verbs/device.h (libibverbs posts and polls are thread-safe).
#ifndef MSGR_MSG_RDMA_VERBS_IBVERBS_PROVIDER_H_
#define MSGR_MSG_RDMA_VERBS_IBVERBS_PROVIDER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

// Names of the devices ibv_get_device_list() reports (empty without RDMA support).
std::vector<std::string> ListDevices();

// Opens `name` ("" = the first device). NotFound if there is no such device.
absl::StatusOr<std::unique_ptr<Device>> OpenIbverbsDevice(absl::string_view name,
                                                          const DeviceOptions& options);

// The address this provider's code calls for ibv_open_device. It must be libibverbs'
// default version (IBVERBS_1.1), not the IBVERBS_1.0 compat wrapper, whose context the
// rest of the library cannot use; a host test checks it (see ibverbs/BUILD, linkstatic).
const void* BoundIbvOpenDevice();

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_IBVERBS_PROVIDER_H_

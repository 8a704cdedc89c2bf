// The soft verbs provider: a software HCA in user space (see soft_device.h, soft_qp.h).
//
// For processes on one host. Regions a peer may access live in shared memory (memfd) handed
// to the peer over an abstract Unix socket (SCM_RIGHTS); an RDMA WRITE is a memcpy by the
// initiator straight into the target's region, checked against the target's shared region
// table (key, bounds, access, PD, still registered) like an HCA would.
// Thread-safety: as msg/rdma/verbs/device.h.
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_PROVIDER_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_PROVIDER_H_

#include <memory>

#include "absl/status/statusor.h"
#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace soft {

// Opens a new soft device (its own listening socket and service thread).
absl::StatusOr<std::unique_ptr<Device>> OpenSoftDevice(const DeviceOptions& options = {});

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_PROVIDER_H_

// OpenDevice(): picks the provider for a device name (see device.h).
#include "absl/strings/str_cat.h"
#include "msg/rdma/verbs/device.h"
#include "msg/rdma/verbs/ibverbs/provider.h"
#include "msg/rdma/verbs/soft/provider.h"

namespace msgr {
namespace verbs {

std::vector<std::string> ListIbverbsDevices() { return ibverbs::ListDevices(); }

absl::StatusOr<std::unique_ptr<Device>> OpenDevice(absl::string_view name,
                                                   const DeviceOptions& options) {
  if (name == "soft") return soft::OpenSoftDevice(options);
  if (name == "ibverbs") return ibverbs::OpenIbverbsDevice("", options);
  if (name.empty()) {
    if (!ibverbs::ListDevices().empty()) return ibverbs::OpenIbverbsDevice("", options);
    return soft::OpenSoftDevice(options);
  }
  return ibverbs::OpenIbverbsDevice(name, options);
}

}  // namespace verbs
}  // namespace msgr

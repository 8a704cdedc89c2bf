#include "msg/rdma/verbs/soft/soft_cq.h"

namespace msgr {
namespace verbs {
namespace soft {

absl::StatusOr<std::shared_ptr<CqCore>> CqCore::Create(int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("soft: CQ depth must be positive");
  absl::StatusOr<SharedCq> q = SharedCq::Create(static_cast<size_t>(depth));
  if (!q.ok()) return q.status();
  return std::shared_ptr<CqCore>(new CqCore(std::move(*q)));
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#include "msg/rdma/registered_budget.h"

#include "absl/strings/str_cat.h"

namespace msgr::rdma {

RegisteredBudget::Charge& RegisteredBudget::Charge::operator=(Charge&& o) noexcept {
  if (this != &o) {
    Release();
    budget_ = std::move(o.budget_);
    bytes_ = o.bytes_;
    o.bytes_ = 0;
  }
  return *this;
}

void RegisteredBudget::Charge::Release() {
  if (budget_ && bytes_ != 0) budget_->used_.fetch_sub(bytes_, std::memory_order_relaxed);
  budget_.reset();
  bytes_ = 0;
}

absl::StatusOr<RegisteredBudget::Charge> RegisteredBudget::Take(uint64_t bytes,
                                                                const std::string& what) {
  uint64_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > max_ || used > max_ - bytes) {
      refusals_.fetch_add(1, std::memory_order_relaxed);
      return absl::ResourceExhaustedError(absl::StrCat(
          "RDMA registered-memory budget exhausted: ", what, " needs ", (bytes + 1023) >> 10,
          " KiB, ", used >> 10, " KiB of ", max_ >> 10,
          " KiB are registered already (raise the backend option rdma_max_registered_mb, "
          "or use smaller rings)"));
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  return Charge(shared_from_this(), bytes);
}

absl::StatusOr<ChargedRegion> AllocCharged(RegisteredBudget& budget, verbs::ProtectionDomain& pd,
                                           size_t bytes, uint32_t access, const std::string& what) {
  auto charge = budget.Take(bytes, what);
  if (!charge.ok()) return charge.status();
  auto mr = pd.AllocRegion(bytes, access);
  if (!mr.ok()) return mr.status();
  ChargedRegion r;
  r.charge_ = std::move(*charge);
  r.mr_ = std::move(*mr);
  return r;
}

absl::StatusOr<ChargedRegion> RegisterCharged(RegisteredBudget& budget,
                                              verbs::ProtectionDomain& pd, void* addr,
                                              size_t bytes, uint32_t access, const std::string& what) {
  auto charge = budget.Take(bytes, what);
  if (!charge.ok()) return charge.status();
  auto mr = pd.RegisterMemory(addr, bytes, access);
  if (!mr.ok()) return mr.status();
  ChargedRegion r;
  r.charge_ = std::move(*charge);
  r.mr_ = std::move(*mr);
  return r;
}

}  // namespace msgr::rdma

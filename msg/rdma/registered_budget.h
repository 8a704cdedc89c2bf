// RegisteredBudget: how much memory one messenger may register with the HCA (backend
// option `rdma_max_registered_mb`), and who holds it.
//
// Every region and buffer pool the rdma backend registers -- receive rings, staging
// mirrors, control regions, SEND/RECV pools, zero-copy payloads -- is charged here *before*
// it is registered and given back when it is deregistered (the Charge's destructor). They
// are all made by AllocCharged/RegisterCharged below, the only places the backend
// registers memory, so nothing can be registered uncharged. A
// charge that would exceed the budget is refused with a status naming what wanted how much,
// what is in use and how to raise the limit; the caller then refuses that session (or, for
// a zero-copy payload, copies it instead), and everything already registered keeps working.
// Hardware caps registered memory too (the HCA's translation tables, RLIMIT_MEMLOCK); the
// budget makes the limit explicit, per process, and reported (`registered_bytes`,
// `registered_max_bytes`, `registration_refusals` in RdmaStats and the OSD's perf dump).
//
// Thread-safety: Take and the counters may be used from any thread; a Charge is a value
// owned by one holder (move-only) and may outlive the messenger (it keeps the budget alive).
#ifndef MSGR_MSG_RDMA_REGISTERED_BUDGET_H_
#define MSGR_MSG_RDMA_REGISTERED_BUDGET_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "msg/rdma/verbs/device.h"

namespace msgr::rdma {

class RegisteredBudget : public std::enable_shared_from_this<RegisteredBudget> {
 public:
  // A share of the budget; given back when destroyed. A default-constructed one holds 0.
  class Charge {
   public:
    Charge() = default;
    Charge(Charge&& o) noexcept : budget_(std::move(o.budget_)), bytes_(o.bytes_) { o.bytes_ = 0; }
    Charge& operator=(Charge&& o) noexcept;
    Charge(const Charge&) = delete;
    Charge& operator=(const Charge&) = delete;
    ~Charge() { Release(); }
    uint64_t bytes() const { return bytes_; }

   private:
    friend class RegisteredBudget;
    Charge(std::shared_ptr<RegisteredBudget> b, uint64_t bytes)
        : budget_(std::move(b)), bytes_(bytes) {}
    void Release();
    std::shared_ptr<RegisteredBudget> budget_;
    uint64_t bytes_ = 0;
  };

  static std::shared_ptr<RegisteredBudget> Create(uint64_t max_bytes) {
    return std::shared_ptr<RegisteredBudget>(new RegisteredBudget(max_bytes));
  }

  // Reserves `bytes` for `what` (e.g. "a 32 MiB receive ring for client.4"), or
  // RESOURCE_EXHAUSTED if that would take the total over the budget.
  absl::StatusOr<Charge> Take(uint64_t bytes, const std::string& what);

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t max() const { return max_; }
  uint64_t refusals() const { return refusals_.load(std::memory_order_relaxed); }

 private:
  explicit RegisteredBudget(uint64_t max_bytes) : max_(max_bytes) {}
  const uint64_t max_;
  std::atomic<uint64_t> used_{0};
  std::atomic<uint64_t> refusals_{0};
};

// A region registered with the HCA together with its share of the budget, used like the
// region's unique_ptr. The region is deregistered before its share is given back (also
// when it is replaced by assignment), so the budget never shows less than is registered.
class ChargedRegion {
 public:
  ChargedRegion() = default;
  ChargedRegion(ChargedRegion&& o) noexcept = default;
  ChargedRegion& operator=(ChargedRegion&& o) noexcept {
    mr_ = std::move(o.mr_);  // the old region first
    charge_ = std::move(o.charge_);
    return *this;
  }
  verbs::MemoryRegion* get() const { return mr_.get(); }
  verbs::MemoryRegion* operator->() const { return mr_.get(); }
  verbs::MemoryRegion& operator*() const { return *mr_; }
  explicit operator bool() const { return mr_ != nullptr; }
  uint64_t charged_bytes() const { return charge_.bytes(); }
  void reset() { *this = ChargedRegion(); }

 private:
  friend absl::StatusOr<ChargedRegion> AllocCharged(RegisteredBudget&, verbs::ProtectionDomain&,
                                                    size_t, uint32_t, const std::string&);
  friend absl::StatusOr<ChargedRegion> RegisterCharged(RegisteredBudget&,
                                                       verbs::ProtectionDomain&, void*, size_t,
                                                       uint32_t, const std::string&);
  RegisteredBudget::Charge charge_;        // destroyed after mr_
  std::unique_ptr<verbs::MemoryRegion> mr_;
};

// Charges `bytes` for `what`, then allocates and registers a region of that size with
// `access` (verbs::AccessFlags). RESOURCE_EXHAUSTED from the budget, or the provider's error.
absl::StatusOr<ChargedRegion> AllocCharged(RegisteredBudget& budget, verbs::ProtectionDomain& pd,
                                           size_t bytes, uint32_t access, const std::string& what);

// The same for the caller's memory at [addr, addr + bytes) (local access only, as
// ProtectionDomain::RegisterMemory); the memory must outlive the region.
absl::StatusOr<ChargedRegion> RegisterCharged(RegisteredBudget& budget,
                                              verbs::ProtectionDomain& pd, void* addr,
                                              size_t bytes, uint32_t access, const std::string& what);

// Default budget: 4 GiB (an OSD's 32 MiB rings for ~120 clients).
inline constexpr uint64_t kDefaultMaxRegisteredBytes = uint64_t{4} << 30;

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_REGISTERED_BUDGET_H_

#include "msg/rdma/record_buffer_pool.h"

#include <algorithm>

#include "absl/numeric/bits.h"
#include "absl/strings/str_cat.h"
#include "msg/rdma/rdma_shared.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {

struct RecordBufferPool::Slab {
  std::shared_ptr<DeviceContext> ctx;  // the region's device outlives it (declared first)
  ChargedRegion mr;
};

class RecordBufferPool::Buffer final : public RecordBuffer {
 public:
  // Registered: `slab` holds the memory, returned to `pool` (if it is still there) at the end.
  Buffer(std::shared_ptr<Slab> slab, size_t size, std::weak_ptr<RecordBufferPool> pool)
      : RecordBuffer(reinterpret_cast<char*>(slab->mr->data()), size),
        slab_(std::move(slab)),
        pool_(std::move(pool)) {}
  // Not registered (the budget refused): plain memory.
  Buffer(std::unique_ptr<char[]> mem, size_t size)
      : RecordBuffer(mem.get(), size), heap_(std::move(mem)) {}
  ~Buffer() override {
    if (!slab_) return;
    if (auto pool = pool_.lock()) pool->Return(std::move(slab_));
  }

 private:
  std::shared_ptr<Slab> slab_;
  std::weak_ptr<RecordBufferPool> pool_;
  std::unique_ptr<char[]> heap_;
};

std::shared_ptr<RecordBufferPool> RecordBufferPool::Create(std::shared_ptr<DeviceContext> ctx,
                                                           std::shared_ptr<RegisteredBudget> budget,
                                                           LiveRdmaCounters* counters,
                                                           size_t max_cached_bytes) {
  return std::shared_ptr<RecordBufferPool>(
      new RecordBufferPool(std::move(ctx), std::move(budget), counters, max_cached_bytes));
}

RecordBufferRef RecordBufferPool::Alloc(size_t size) {
  const size_t bytes = absl::bit_ceil(std::max<size_t>(size, 4096));
  std::shared_ptr<Slab> slab;
  {
    absl::MutexLock l(&mu_);
    auto it = free_.find(bytes);
    if (it != free_.end() && !it->second.empty()) {
      slab = std::move(it->second.back());
      it->second.pop_back();
      cached_bytes_ -= bytes;
    }
  }
  if (!slab) {
    // Registered outside the lock: pinning pages takes a while. Access 0: the HCA only
    // reads it (the source of the ring WRITEs).
    auto mr = AllocCharged(*budget_, *ctx_->pd, bytes, /*access=*/0,
                           absl::StrCat("a ", bytes >> 10, " KiB record buffer"));
    if (!mr.ok()) {
      if (counters_->record_buffers_unregistered++ == 0) {
        spdlog::warn("msgr rdma: record buffers are plain memory from now on, their writes "
                     "staged (a copy): {}",
                     mr.status().ToString());
      }
      return std::make_shared<Buffer>(std::make_unique<char[]>(bytes), size);
    }
    slab = std::make_shared<Slab>();
    slab->ctx = ctx_;
    slab->mr = std::move(*mr);
    counters_->record_buffers_registered++;
    absl::MutexLock l(&mu_);
    by_addr_[reinterpret_cast<uintptr_t>(slab->mr->addr())] = slab;
  }
  return std::make_shared<Buffer>(std::move(slab), size, weak_from_this());
}

void RecordBufferPool::Return(std::shared_ptr<Slab> slab) {
  const size_t bytes = slab->mr->length();
  absl::MutexLock l(&mu_);
  if (cached_bytes_ + bytes <= max_cached_bytes_) {
    cached_bytes_ += bytes;
    free_[bytes].push_back(std::move(slab));
    return;
  }
  // Deregistered once no record still holds it (Find's references).
  by_addr_.erase(reinterpret_cast<uintptr_t>(slab->mr->addr()));
}

std::optional<RecordBufferPool::Found> RecordBufferPool::Find(const void* p, size_t n) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  absl::MutexLock l(&mu_);
  auto it = by_addr_.upper_bound(at);
  if (it == by_addr_.begin()) return std::nullopt;
  --it;
  const Slab& s = *it->second;
  const size_t offset = at - it->first;
  if (offset > s.mr->length() || n > s.mr->length() - offset) return std::nullopt;
  return Found{std::shared_ptr<verbs::MemoryRegion>(it->second, s.mr.get()), offset};
}

size_t RecordBufferPool::cached_bytes() const {
  absl::MutexLock l(&mu_);
  return cached_bytes_;
}

}  // namespace msgr::rdma

// RecordBufferPool: the rdma messenger's registered memory for Messenger::AllocRecordBuffer.
//
// A buffer is one region registered with the HCA (charged to the messenger's budget), made
// once and reused: the size is rounded up to a power of two (at least 4 KiB), and a buffer
// whose last reference goes back on its size's free list; at most `max_cached_bytes` wait
// there, beyond that a returned buffer is deregistered. So an application that writes from
// buffers it allocates per op (the bench) registers memory only while its working set
// grows, and none per write.
//
// Find() tells the data path which registered region holds a payload, so that a
// WriteRecordShared of (a slice of) a buffer is read by the HCA straight from it: one
// mutex and one ordered-map lookup per record. When the budget refuses a registration the
// buffer is plain memory (counted in `record_buffers_unregistered`) and its writes are
// staged like any other: AllocRecordBuffer never fails.
//
// Thread-safety: all methods, from any thread. Buffers may outlive the pool and the
// messenger (each keeps its region, and the region its device, alive).
#ifndef MSGR_MSG_RDMA_RECORD_BUFFER_POOL_H_
#define MSGR_MSG_RDMA_RECORD_BUFFER_POOL_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "msg/messenger.h"
#include "msg/rdma/registered_budget.h"
#include "msg/rdma/transport.h"

namespace msgr::rdma {

struct LiveRdmaCounters;

class RecordBufferPool : public std::enable_shared_from_this<RecordBufferPool> {
 public:
  // `counters` must outlive the pool (the messenger's shared state owns both).
  static std::shared_ptr<RecordBufferPool> Create(std::shared_ptr<DeviceContext> ctx,
                                                  std::shared_ptr<RegisteredBudget> budget,
                                                  LiveRdmaCounters* counters,
                                                  size_t max_cached_bytes = size_t{64} << 20);

  RecordBufferRef Alloc(size_t size);

  // The registered region holding [p, p + n), and where p is in it; nullopt if no buffer
  // of this pool holds all of it.
  struct Found {
    std::shared_ptr<verbs::MemoryRegion> mr;  // keeps the buffer's region alive
    size_t offset = 0;
  };
  std::optional<Found> Find(const void* p, size_t n) const;

  size_t cached_bytes() const;  // registered, on the free lists

 private:
  struct Slab;      // one registered region
  class Buffer;     // what Alloc returns
  RecordBufferPool(std::shared_ptr<DeviceContext> ctx, std::shared_ptr<RegisteredBudget> budget,
                   LiveRdmaCounters* counters, size_t max_cached_bytes)
      : ctx_(std::move(ctx)), budget_(std::move(budget)), counters_(counters),
        max_cached_bytes_(max_cached_bytes) {}
  void Return(std::shared_ptr<Slab> slab);  // a buffer's last reference went

  const std::shared_ptr<DeviceContext> ctx_;
  const std::shared_ptr<RegisteredBudget> budget_;
  LiveRdmaCounters* const counters_;
  const size_t max_cached_bytes_;

  mutable absl::Mutex mu_;
  // Every live registered region by start address (in use or free), for Find.
  std::map<uintptr_t, std::shared_ptr<Slab>> by_addr_ ABSL_GUARDED_BY(mu_);
  std::map<size_t, std::vector<std::shared_ptr<Slab>>> free_ ABSL_GUARDED_BY(mu_);  // by size
  size_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RECORD_BUFFER_POOL_H_

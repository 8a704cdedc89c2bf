#include "client/bench/completion_queue.h"

#include <algorithm>
#include <utility>

#include "absl/time/time.h"

namespace msgr::bench {
namespace {

inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield" ::: "memory");
#endif
}

// Polls between clock reads while spinning (a clock read is ~20 ns, a pause ~10-100).
constexpr int kPollsPerClockRead = 32;

}  // namespace

void CompletionQueue::Push(Completion c) {
  absl::MutexLock l(&mu_);
  items_.push_back(std::move(c));
  pushed_.fetch_add(1, std::memory_order_release);
  // Signal under the lock: once the lock is released the driver may return and destroy
  // the queue, so nothing here may touch it afterwards (owners also keep it alive with a
  // shared_ptr held by every pending callback).
  if (sleeping_) cv_.Signal();
}

size_t CompletionQueue::Wait(std::vector<Completion>* out, BenchClock::time_point deadline,
                             std::chrono::nanoseconds spin,
                             const std::function<bool()>& poll) {
  if (pushed_.load(std::memory_order_acquire) == taken_) {
    ++counters_.waits;
    if (spin.count() > 0) {
      const auto spin_end = std::min(deadline, BenchClock::now() + spin);
      bool hit = false;
      for (;;) {
        for (int i = 0; i < kPollsPerClockRead && !hit; ++i) {
          hit = pushed_.load(std::memory_order_acquire) != taken_;
          if (hit) break;
          if (poll) {
            poll();
          } else {
            CpuRelax();
          }
        }
        if (hit || BenchClock::now() >= spin_end) break;
      }
      if (hit) ++counters_.spin_hits;
    }
  }
  absl::MutexLock l(&mu_);
  while (items_.empty()) {
    auto left = deadline - BenchClock::now();
    if (left <= BenchClock::duration::zero()) return 0;
    ++counters_.sleeps;
    sleeping_ = true;
    cv_.WaitWithTimeout(&mu_, absl::FromChrono(left));
    sleeping_ = false;
  }
  size_t n = items_.size();
  if (out->empty()) {
    out->swap(items_);  // no copy; items_ takes over out's (empty) capacity
  } else {
    for (auto& c : items_) out->push_back(std::move(c));
    items_.clear();
  }
  taken_ += n;
  return n;
}

CompletionQueueCounters CompletionQueue::counters() const { return counters_; }

}  // namespace msgr::bench

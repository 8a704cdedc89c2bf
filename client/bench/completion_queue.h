// The hand-off from completion callbacks (messenger or client threads) to the bench's one
// driver thread: callbacks Push() a finished op and return at once; the driver Wait()s for
// them, first spinning for a bounded time and only then sleeping on a condition variable.
//
// Why spin: a futex wake-up can cost more than a loopback op's network share
// (docs/BENCHMARKS.md, "Measurements quoted from source comments"), so the driver may poll an atomic counter for up to `spin` before it
// sleeps (it pays only when a core is otherwise idle: see kDefaultSpin). Push() signals
// the condition variable only when the driver really sleeps, so a completion that lands
// while the driver spins costs no system call.
//
// Thread-safety: Push() from any number of threads (also inline from inside the driver's
// own submit call); Wait() from one thread at a time. Push() never blocks beyond a short
// mutex hold, so it is safe in callbacks that must not block.
#ifndef MSGR_CLIENT_BENCH_COMPLETION_QUEUE_H_
#define MSGR_CLIENT_BENCH_COMPLETION_QUEUE_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace msgr::bench {

using BenchClock = std::chrono::steady_clock;  // monotonic: every bench latency uses it

// One finished op as the driver thread sees it.
struct Completion {
  uint64_t n = 0;                  // op index
  absl::Status status;
  std::string data;                // a read's payload (empty for writes)
  BenchClock::time_point submitted;  // just before the async call
  BenchClock::time_point completed;  // inside the completion callback
  uint64_t latency_ns() const {
    return static_cast<uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(completed - submitted).count());
  }
};

struct CompletionQueueCounters {
  uint64_t waits = 0;        // Wait() calls that found nothing queued at entry
  uint64_t spin_hits = 0;    // ... of which a completion arrived while spinning
  uint64_t sleeps = 0;       // condition-variable waits (each is a futex sleep + wake)
};

class CompletionQueue {
 public:
  // Any thread. Moves `c` in; wakes the driver only if it sleeps.
  void Push(Completion c);

  // Driver thread. Appends every queued completion to *out and returns how many; waits
  // until there is at least one or `deadline` passes (then returns 0). Spins up to `spin`
  // (bounded by the deadline) before sleeping; spin 0 = sleep at once.
  // `poll`, when set, runs between looks while spinning (it may push completions).
  size_t Wait(std::vector<Completion>* out, BenchClock::time_point deadline,
              std::chrono::nanoseconds spin, const std::function<bool()>& poll = nullptr);

  CompletionQueueCounters counters() const;  // driver thread

 private:
  std::atomic<uint64_t> pushed_{0};  // total pushed; the driver spins on it without the lock
  uint64_t taken_ = 0;               // driver only: total moved out

  absl::Mutex mu_;
  absl::CondVar cv_;
  std::vector<Completion> items_ ABSL_GUARDED_BY(mu_);
  bool sleeping_ ABSL_GUARDED_BY(mu_) = false;  // the driver waits on cv_
  CompletionQueueCounters counters_;            // driver only
};

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_COMPLETION_QUEUE_H_

// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID), for the counters that split a
// daemon's CPU by what its threads do (perf dump: pollers[].cpu_ns, store.thread_cpu_ns).
//
// Thread-safety: ThisThreadCpuNs() any thread; a ThreadCpuMeter belongs to one thread.
#ifndef MSGR_MSG_BASE_THREAD_CPU_H_
#define MSGR_MSG_BASE_THREAD_CPU_H_

#include <time.h>

#include <atomic>
#include <cstdint>

namespace msgr {

// CPU nanoseconds the calling thread has used (0 if the clock is unavailable). A system
// call (~0.1-0.3 us): per batch of work, not per byte.
inline uint64_t ThisThreadCpuNs() {
  timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

// Adds what its thread used since the last Report to a total shared by several threads.
class ThreadCpuMeter {
 public:
  void Report(std::atomic<uint64_t>* total) {
    const uint64_t now = ThisThreadCpuNs();
    total->fetch_add(now - last_, std::memory_order_relaxed);
    last_ = now;
  }

 private:
  uint64_t last_ = 0;  // a new thread has used (almost) nothing before its first Report
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_THREAD_CPU_H_

// CPU time of threads, for the counters that split a daemon's CPU by what its threads do
// (perf dump: pollers[].cpu_ns, store.thread_cpu_ns).
//
// Reading a thread CPU clock is a system call (the vDSO serves only the wall clocks), so a
// hot loop should not read its own: ~2 reads per 4 KiB write, one per poller sleep, were
// 1.9 of the 16.5 system calls an OSD made per write at -t 1 (docs/BENCHMARKS.md "Session
// 26"). A thread that sleeps and wakes per op publishes a ThreadCpuClock instead, which
// the reader of the counters reads; a thread that does one long task per reading (a
// flush) may use a ThreadCpuMeter.
//
// Thread-safety: ThisThreadCpuNs() any thread; a ThreadCpuMeter belongs to one thread; a
// ThreadCpuClock may be read from any thread while its thread has not exited.
#ifndef MSGR_MSG_BASE_THREAD_CPU_H_
#define MSGR_MSG_BASE_THREAD_CPU_H_

#include <pthread.h>
#include <time.h>

#include <atomic>
#include <cstdint>

namespace msgr {

// CPU nanoseconds the calling thread has used (0 if the clock is unavailable). A system
// call (~0.1-0.3 us): per batch of work, not per byte.
inline uint64_t CpuClockNs(clockid_t clock) {
  timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

inline uint64_t ThisThreadCpuNs() { return CpuClockNs(CLOCK_THREAD_CPUTIME_ID); }

// One thread's CPU clock: taken on that thread, read by others (Ns) until it exits -- the
// caller must know it has not (a clock of an exited thread may name a new one).
class ThreadCpuClock {
 public:
  ThreadCpuClock() = default;  // no thread: Ns() is 0
  static ThreadCpuClock OfThisThread() {
    ThreadCpuClock c;
    c.valid_ = pthread_getcpuclockid(pthread_self(), &c.clock_) == 0;
    return c;
  }
  uint64_t Ns() const { return valid_ ? CpuClockNs(clock_) : 0; }

 private:
  clockid_t clock_{};
  bool valid_ = false;
};

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

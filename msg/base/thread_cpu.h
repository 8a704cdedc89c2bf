// CPU time of threads, for the counters that split a daemon's CPU by what its threads do
// (perf dump: pollers[].cpu_ns, store.thread_cpu_ns).
//
// Reading a thread CPU clock is a system call (the vDSO serves only the wall clocks), so a
// thread that works per op should not read its own: ~2 reads per 4 KiB write, one per
// poller sleep, were 1.9 of the 16.5 system calls an OSD made per write at -t 1
// (docs/BENCHMARKS.md "Session 26"); the store's flusher, reading its own once per round,
// made 0.41 more per write at durable tcp 4 KiB -t 16. Such a thread publishes its
// ThreadCpuClock once when it starts (the poller), or joins a ThreadCpuGroup (the store's
// threads), and whoever reads the counters reads the clocks.
//
// Thread-safety: ThisThreadCpuNs() any thread; a ThreadCpuClock may be read from any
// thread while its thread has not exited; ThreadCpuGroup is thread-safe.
#ifndef MSGR_MSG_BASE_THREAD_CPU_H_
#define MSGR_MSG_BASE_THREAD_CPU_H_

#include <pthread.h>
#include <time.h>

#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

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

// The CPU time of a set of threads, those running and those that exited: each thread
// joins while it runs (a Member on its stack: the constructor publishes the thread's
// clock, the destructor adds the clock's last reading to the exited threads' and
// withdraws it). Ns() reads the clocks of the running ones from the reader's thread, one
// system call each; the members themselves read nothing while they work.
class ThreadCpuGroup {
 public:
  ThreadCpuGroup() = default;
  ThreadCpuGroup(const ThreadCpuGroup&) = delete;
  ThreadCpuGroup& operator=(const ThreadCpuGroup&) = delete;

  // The calling thread, from its construction to its destruction (both on that thread).
  class Member {
   public:
    explicit Member(ThreadCpuGroup* group) : group_(group), clock_(ThreadCpuClock::OfThisThread()) {
      absl::MutexLock l(&group_->mu_);
      group_->running_.push_back(this);
    }
    ~Member() {
      absl::MutexLock l(&group_->mu_);
      group_->exited_ns_ += clock_.Ns();
      auto& r = group_->running_;
      for (size_t i = 0; i < r.size(); ++i) {
        if (r[i] == this) {
          r[i] = r.back();
          r.pop_back();
          break;
        }
      }
    }
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

   private:
    friend class ThreadCpuGroup;
    ThreadCpuGroup* const group_;
    const ThreadCpuClock clock_;
  };

  // CPU nanoseconds the members have used: the running ones' clocks now plus what the
  // exited ones had used when they left (not the little they used after that).
  uint64_t Ns() const {
    absl::MutexLock l(&mu_);
    uint64_t ns = exited_ns_;
    for (const Member* m : running_) ns += m->clock_.Ns();
    return ns;
  }

 private:
  // Held while the clocks are read: no member leaves meanwhile (the clock of a thread that
  // has exited may name a new one).
  mutable absl::Mutex mu_;
  std::vector<const Member*> running_ ABSL_GUARDED_BY(mu_);
  uint64_t exited_ns_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_THREAD_CPU_H_

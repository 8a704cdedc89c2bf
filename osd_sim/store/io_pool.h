// A few threads that run blocking I/O tasks for the object store: a large O_DIRECT
// record is written as several pwritev in parallel (the disk takes two streams faster
// than one), the caller's thread writing one part and the pool the others.
//
// Thread-safety: TryRun may be called from any thread. The destructor runs every queued
// task, then joins the threads; no TryRun after destruction has begun.
#ifndef MSGR_OSD_SIM_STORE_IO_POOL_H_
#define MSGR_OSD_SIM_STORE_IO_POOL_H_

#include <cstdint>
#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "msg/base/thread_cpu.h"

namespace msgr::store {

class IoPool {
 public:
  // REQUIRES: threads >= 1.
  explicit IoPool(int threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Queues `task` if a pool thread is idle to run it at once; otherwise returns false
  // and `task` is left untouched (the caller does the work itself: when many callers
  // write at once, the disk already has parallel writes and the pool must not become a
  // queue they all wait behind).
  bool TryRun(absl::AnyInvocable<void() &&>& task);
  // CPU time the pool's threads have used (reads their clocks: a system call each).
  uint64_t thread_cpu_ns() const { return cpu_.Ns(); }

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  size_t idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for a task
  ThreadCpuGroup cpu_;  // the threads'
  std::vector<std::thread> threads_;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_IO_POOL_H_

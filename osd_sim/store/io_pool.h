// A few threads that run blocking I/O tasks for the object store: a large O_DIRECT
// record is written as several pwritev in parallel (the disk takes two streams faster
// than one), the caller's thread writing one part and the pool the others.
//
// Thread-safety: Run may be called from any thread. The destructor runs every queued
// task, then joins the threads; no Run after destruction has begun.
#ifndef MSGR_OSD_SIM_STORE_IO_POOL_H_
#define MSGR_OSD_SIM_STORE_IO_POOL_H_

#include <deque>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"

namespace msgr::store {

class IoPool {
 public:
  // REQUIRES: threads >= 1.
  explicit IoPool(int threads);
  ~IoPool();
  IoPool(const IoPool&) = delete;
  IoPool& operator=(const IoPool&) = delete;

  // Queues `task`; one of the pool's threads runs it.
  void Run(absl::AnyInvocable<void() &&> task);

 private:
  void Loop();

  absl::Mutex mu_;
  std::deque<absl::AnyInvocable<void() &&>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> threads_;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_IO_POOL_H_

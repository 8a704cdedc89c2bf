#include "osd_sim/store/io_pool.h"

#include <pthread.h>

#include <utility>

namespace msgr::store {

IoPool::IoPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    threads_.emplace_back([this] { Loop(); });
    pthread_setname_np(threads_.back().native_handle(), "store-io");
  }
}

IoPool::~IoPool() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  for (std::thread& t : threads_) t.join();
}

bool IoPool::TryRun(absl::AnyInvocable<void() &&>& task) {
  absl::MutexLock l(&mu_);
  if (idle_ <= tasks_.size()) return false;
  tasks_.push_back(std::move(task));
  return true;
}

void IoPool::Loop() {
  const ThreadCpuGroup::Member cpu(&cpu_);  // until the thread returns
  while (true) {
    absl::AnyInvocable<void() &&> task;
    {
      absl::MutexLock l(&mu_);
      ++idle_;
      mu_.Await(absl::Condition(
          +[](IoPool* p) ABSL_EXCLUSIVE_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->tasks_.empty(); },
          this));
      --idle_;
      if (tasks_.empty()) return;  // stopping, nothing left
      task = std::move(tasks_.front());
      tasks_.pop_front();
    }
    std::move(task)();
  }
}

}  // namespace msgr::store

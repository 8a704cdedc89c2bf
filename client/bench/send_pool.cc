#include "client/bench/send_pool.h"

#include <pthread.h>

namespace msgr::bench {

SendPool::SendPool(int threads) {
  for (int i = 0; i < threads; ++i) {
    auto w = std::make_unique<Worker>();
    w->thread = std::thread(&SendPool::Run, w.get());
    pthread_setname_np(w->thread.native_handle(), "bench-send");
    workers_.push_back(std::move(w));
  }
}

SendPool::~SendPool() {
  for (auto& w : workers_) {
    {
      std::lock_guard<std::mutex> l(w->mu);
      w->stop = true;
    }
    w->cv.notify_one();
  }
  for (auto& w : workers_) w->thread.join();
}

void SendPool::Post(std::function<void()> task) {
  Worker& w = *workers_[next_++ % workers_.size()];
  {
    std::lock_guard<std::mutex> l(w.mu);
    w.q.push_back(std::move(task));
  }
  w.cv.notify_one();
}

void SendPool::Run(Worker* w) {
  std::unique_lock<std::mutex> l(w->mu);
  for (;;) {
    w->cv.wait(l, [w] { return w->stop || !w->q.empty(); });
    if (w->q.empty()) return;  // stop, and everything posted has run
    auto task = std::move(w->q.front());
    w->q.pop_front();
    l.unlock();
    task();
    l.lock();
  }
}

int DefaultSubmitThreads(uint64_t object_size) { return object_size >= (256u << 10) ? 2 : 0; }

}  // namespace msgr::bench

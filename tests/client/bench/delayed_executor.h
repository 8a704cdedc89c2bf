// Test helper: runs callbacks on its own thread after a delay, like a messenger worker
// delivering acknowledgements. Thread-safe; the destructor runs what is still due.
#ifndef MSGR_TESTS_CLIENT_BENCH_DELAYED_EXECUTOR_H_
#define MSGR_TESTS_CLIENT_BENCH_DELAYED_EXECUTOR_H_

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <queue>
#include <thread>
#include <utility>
#include <vector>

namespace msgr::bench::testing {

class DelayedExecutor {
 public:
  using Clock = std::chrono::steady_clock;
  DelayedExecutor() : thread_([this] { Loop(); }) {}
  ~DelayedExecutor() {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  DelayedExecutor(const DelayedExecutor&) = delete;
  DelayedExecutor& operator=(const DelayedExecutor&) = delete;

  void After(std::chrono::nanoseconds delay, std::function<void()> f) {
    {
      std::lock_guard<std::mutex> l(mu_);
      q_.push(Item{Clock::now() + delay, seq_++, std::move(f)});
    }
    cv_.notify_one();
  }

 private:
  struct Item {
    Clock::time_point due;
    uint64_t seq;
    std::function<void()> f;
    bool operator>(const Item& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  void Loop() {
    std::unique_lock<std::mutex> l(mu_);
    for (;;) {
      if (q_.empty()) {
        if (stop_) return;
        cv_.wait(l);
        continue;
      }
      const Clock::time_point due = q_.top().due;  // a copy: After() may reallocate q_
      if (Clock::now() < due) {
        cv_.wait_until(l, due);
        continue;
      }
      auto f = std::move(const_cast<Item&>(q_.top()).f);
      q_.pop();
      l.unlock();
      f();
      l.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> q_;
  uint64_t seq_ = 0;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace msgr::bench::testing

#endif  // MSGR_TESTS_CLIENT_BENCH_DELAYED_EXECUTOR_H_

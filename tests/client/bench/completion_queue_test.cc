// CompletionQueue: completions pushed from other threads reach the driver exactly once;
// a wait ends at its deadline; a completion landing while the driver spins is taken
// without sleeping (no futex), and spin 0 always sleeps.
#include "client/bench/completion_queue.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace msgr::bench {
namespace {

using namespace std::chrono_literals;

Completion Make(uint64_t n) {
  Completion c;
  c.n = n;
  return c;
}

pid_t ThisTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

// True once thread `tid` of this process sleeps in the kernel (state S: the driver's
// condition-variable wait is a futex sleep; nothing else on its way there sleeps), false
// after 10 s.
bool WaitUntilAsleep(pid_t tid) {
  const auto until = std::chrono::steady_clock::now() + 10s;
  while (std::chrono::steady_clock::now() < until) {
    std::ifstream in("/proc/self/task/" + std::to_string(tid) + "/stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const size_t paren = stat.rfind(')');  // the state follows the (name)
    if (paren != std::string::npos && paren + 2 < stat.size() && stat[paren + 2] == 'S') {
      return true;
    }
    std::this_thread::sleep_for(1ms);
  }
  return false;
}

TEST(CompletionQueueTest, QueuedCompletionsAreTakenAtOnce) {
  CompletionQueue q;
  q.Push(Make(1));
  q.Push(Make(2));
  std::vector<Completion> out;
  EXPECT_EQ(q.Wait(&out, BenchClock::now() + 10s, 50us), 2u);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].n, 1u);
  EXPECT_EQ(out[1].n, 2u);
  EXPECT_EQ(q.counters().waits, 0u);  // nothing to wait for
  EXPECT_EQ(q.counters().sleeps, 0u);
}

TEST(CompletionQueueTest, WaitEndsAtTheDeadline) {
  CompletionQueue q;
  std::vector<Completion> out;
  for (auto spin : {0us, 5000us}) {
    auto t0 = BenchClock::now();
    EXPECT_EQ(q.Wait(&out, t0 + 20ms, spin), 0u);
    auto took = BenchClock::now() - t0;
    EXPECT_GE(took, 20ms);
    EXPECT_LT(took, 2s);  // generous: the machine is shared
  }
  EXPECT_TRUE(out.empty());
}

TEST(CompletionQueueTest, SleepingDriverIsWokenByAnotherThread) {
  CompletionQueue q;
  // Pushed once the driver sleeps (a fixed delay could end before a loaded machine ran
  // this thread into Wait: nothing to sleep for then).
  const pid_t driver = ThisTid();
  std::atomic<bool> saw_sleep{false};
  std::thread t([&] {
    saw_sleep = WaitUntilAsleep(driver);
    q.Push(Make(7));
  });
  std::vector<Completion> out;
  EXPECT_EQ(q.Wait(&out, BenchClock::now() + 30s, /*spin=*/0us), 1u);
  t.join();
  EXPECT_TRUE(saw_sleep.load()) << "the driver never slept";
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].n, 7u);
  EXPECT_EQ(q.counters().spin_hits, 0u);
  EXPECT_GE(q.counters().sleeps, 1u);
}

TEST(CompletionQueueTest, CompletionDuringTheSpinIsTakenWithoutSleeping) {
  CompletionQueue q;
  // Pushed once the driver spins: its first look calls `poll` (a fixed delay could end
  // before a loaded machine ran this thread into Wait: nothing to wait for then).
  std::atomic<bool> spinning{false};
  std::thread t([&] {
    const auto until = std::chrono::steady_clock::now() + 10s;
    while (!spinning.load() && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(100us);
    }
    q.Push(Make(3));
  });
  std::vector<Completion> out;
  // The spin bound (10 s) is far above the producer's delay, even on a loaded machine.
  EXPECT_EQ(q.Wait(&out, BenchClock::now() + 30s, 10s, [&] {
              spinning = true;
              return false;
            }),
            1u);
  t.join();
  EXPECT_TRUE(spinning.load());
  EXPECT_EQ(q.counters().waits, 1u);
  EXPECT_EQ(q.counters().spin_hits, 1u);
  EXPECT_EQ(q.counters().sleeps, 0u);
}

TEST(CompletionQueueTest, ManyProducersEveryCompletionOnce) {
  constexpr int kThreads = 4, kPerThread = 20000;
  CompletionQueue q;
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; ++t) {
    producers.emplace_back([&q, t] {
      for (int i = 0; i < kPerThread; ++i) q.Push(Make(uint64_t(t) * kPerThread + i));
    });
  }
  std::set<uint64_t> seen;
  std::vector<Completion> out;
  int spin_us = 0;
  while (seen.size() < size_t{kThreads} * kPerThread) {
    out.clear();
    // Alternate spinning and sleeping waits.
    q.Wait(&out, BenchClock::now() + 30s, std::chrono::microseconds(spin_us));
    spin_us = spin_us ? 0 : 20;
    ASSERT_FALSE(out.empty());
    for (auto& c : out) ASSERT_TRUE(seen.insert(c.n).second) << "twice: " << c.n;
  }
  for (auto& p : producers) p.join();
  EXPECT_EQ(q.Wait(&out, BenchClock::now(), 0us), 0u);
  EXPECT_EQ(*seen.rbegin(), uint64_t{kThreads} * kPerThread - 1);
}

}  // namespace
}  // namespace msgr::bench

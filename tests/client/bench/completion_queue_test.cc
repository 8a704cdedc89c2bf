// CompletionQueue: completions pushed from other threads reach the driver exactly once;
// a wait ends at its deadline; a completion landing while the driver spins is taken
// without sleeping (no futex), and spin 0 always sleeps.
#include "client/bench/completion_queue.h"

#include <chrono>
#include <set>
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
  std::thread t([&] {
    std::this_thread::sleep_for(20ms);
    q.Push(Make(7));
  });
  std::vector<Completion> out;
  EXPECT_EQ(q.Wait(&out, BenchClock::now() + 30s, /*spin=*/0us), 1u);
  t.join();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].n, 7u);
  EXPECT_EQ(q.counters().spin_hits, 0u);
  EXPECT_GE(q.counters().sleeps, 1u);
}

TEST(CompletionQueueTest, CompletionDuringTheSpinIsTakenWithoutSleeping) {
  CompletionQueue q;
  std::thread t([&] {
    std::this_thread::sleep_for(2ms);
    q.Push(Make(3));
  });
  std::vector<Completion> out;
  // The spin bound (10 s) is far above the producer's delay, even on a loaded machine.
  EXPECT_EQ(q.Wait(&out, BenchClock::now() + 30s, 10s), 1u);
  t.join();
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

// IoPool (osd_sim/store/io_pool.cc): a task it accepts runs once on a pool thread; it
// accepts only as many tasks as it has idle threads (a refused task is left to the
// caller, untouched); its threads run in parallel; destruction runs every accepted task
// and waits for those running.
#include "osd_sim/store/io_pool.h"

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/functional/any_invocable.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/base/thread_cpu.h"

namespace msgr::store {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

// Offers `task` until the pool takes it (its threads become idle shortly after start, or
// after their task). False if it never does within kWait.
bool RunSoon(IoPool& pool, absl::AnyInvocable<void() &&> task) {
  const absl::Time end = absl::Now() + kWait;
  while (!pool.TryRun(task)) {
    if (absl::Now() > end) return false;
    absl::SleepFor(absl::Microseconds(200));
  }
  return true;
}

// Burns about `ms` of this thread's CPU.
void Burn(int ms) {
  const uint64_t until = ThisThreadCpuNs() + static_cast<uint64_t>(ms) * 1'000'000;
  volatile uint64_t x = 0;
  while (ThisThreadCpuNs() < until) {
    for (int i = 0; i < 1000; ++i) x = x + i;
  }
}

// A gate tasks wait at until the test opens it (bounded: a task never hangs a test).
class Gate {
 public:
  void Open() { open_.Notify(); }
  bool Wait() { return open_.WaitForNotificationWithTimeout(kWait); }

 private:
  absl::Notification open_;
};

TEST(IoPoolTest, AcceptedTaskRunsOnceOnAPoolThread) {
  IoPool pool(2);
  std::atomic<int> runs{0};
  std::thread::id ran_on;
  absl::Notification done;
  ASSERT_TRUE(RunSoon(pool, [&] {
    ran_on = std::this_thread::get_id();
    runs.fetch_add(1);
    done.Notify();
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  EXPECT_NE(ran_on, std::this_thread::get_id());
  EXPECT_EQ(runs.load(), 1);
}

TEST(IoPoolTest, ManyTasksAllComplete) {
  IoPool pool(2);
  constexpr int kTasks = 500;
  std::atomic<int> done{0};
  std::atomic<int64_t> sum{0};
  for (int i = 1; i <= kTasks; ++i) {
    ASSERT_TRUE(RunSoon(pool, [&done, &sum, i] {
      sum.fetch_add(i);
      done.fetch_add(1);
    })) << "task " << i;
  }
  const absl::Time end = absl::Now() + kWait;
  while (done.load() < kTasks && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(done.load(), kTasks);
  EXPECT_EQ(sum.load(), int64_t{kTasks} * (kTasks + 1) / 2) << "each task ran exactly once";
}

// With every thread busy the pool refuses; the refused task still holds what it owned and
// the caller can run it itself.
TEST(IoPoolTest, RefusedTaskIsLeftToTheCallerUntouched) {
  IoPool pool(1);
  Gate gate;
  absl::Notification started;
  ASSERT_TRUE(RunSoon(pool, [&] {
    started.Notify();
    gate.Wait();
  }));
  ASSERT_TRUE(started.WaitForNotificationWithTimeout(kWait));
  auto owned = std::make_unique<int>(41);
  int result = 0;
  absl::AnyInvocable<void() &&> task = [p = std::move(owned), &result] { result = *p + 1; };
  EXPECT_FALSE(pool.TryRun(task));
  ASSERT_TRUE(static_cast<bool>(task)) << "a refused task must not be moved from";
  std::move(task)();
  EXPECT_EQ(result, 42);
  gate.Open();
  // The thread is idle again once its task returns.
  absl::Notification second;
  ASSERT_TRUE(RunSoon(pool, [&] { second.Notify(); }));
  EXPECT_TRUE(second.WaitForNotificationWithTimeout(kWait));
}

// N threads take N tasks at once, run them in parallel (each waits for all N to have
// started), and take nothing more meanwhile.
TEST(IoPoolTest, AcceptsOneTaskPerIdleThreadAndRunsThemInParallel) {
  constexpr int kThreads = 3;
  IoPool pool(kThreads);
  Gate gate;
  std::atomic<int> started{0};
  std::atomic<int> saw_all{0};
  std::atomic<int> finished{0};
  for (int i = 0; i < kThreads; ++i) {
    ASSERT_TRUE(RunSoon(pool, [&] {
      started.fetch_add(1);
      const absl::Time end = absl::Now() + kWait;
      while (started.load() < kThreads && absl::Now() < end) absl::SleepFor(absl::Microseconds(100));
      if (started.load() == kThreads) saw_all.fetch_add(1);
      gate.Wait();
      finished.fetch_add(1);
    })) << "task " << i;
  }
  int refused = 0;
  for (int i = 0; i < 100; ++i) {
    absl::AnyInvocable<void() &&> extra = [] { ADD_FAILURE() << "a fourth task ran"; };
    if (!pool.TryRun(extra)) ++refused;
  }
  EXPECT_EQ(refused, 100) << "more tasks accepted than the pool has threads";
  const absl::Time end = absl::Now() + kWait;
  while (saw_all.load() < kThreads && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(saw_all.load(), kThreads) << "the tasks did not all run at the same time";
  gate.Open();
  while (finished.load() < kThreads && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
  EXPECT_EQ(finished.load(), kThreads);
}

// Destruction with work in flight: it waits for the running tasks to finish.
TEST(IoPoolTest, DestructionWaitsForRunningTasks) {
  auto pool = std::make_unique<IoPool>(2);
  Gate gate;
  std::atomic<int> running{0};
  std::atomic<int> finished{0};
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(RunSoon(*pool, [&] {
      running.fetch_add(1);
      gate.Wait();
      finished.fetch_add(1);
    }));
  }
  const absl::Time end = absl::Now() + kWait;
  while (running.load() < 2 && absl::Now() < end) absl::SleepFor(absl::Milliseconds(1));
  ASSERT_EQ(running.load(), 2);
  std::atomic<bool> destroyed{false};
  std::atomic<int> finished_when_destroyed{-1};
  std::thread destroyer([&] {
    pool.reset();
    finished_when_destroyed = finished.load();
    destroyed = true;
  });
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_FALSE(destroyed.load()) << "the destructor returned with tasks still running";
  gate.Open();
  destroyer.join();
  EXPECT_EQ(finished_when_destroyed.load(), 2) << "tasks cut short by the destructor";
}

// A task accepted just before destruction begins has not necessarily started; it must
// still run before the destructor returns.
TEST(IoPoolTest, DestructionRunsEveryAcceptedTask) {
  int ran = 0;
  for (int round = 0; round < 200; ++round) {
    std::atomic<int> runs{0};
    {
      IoPool pool(2);
      ASSERT_TRUE(RunSoon(pool, [&] { runs.fetch_add(1); }));
      absl::AnyInvocable<void() &&> second = [&] { runs.fetch_add(1); };
      if (!pool.TryRun(second)) std::move(second)();  // as the store does when refused
    }  // destroyed at once
    ASSERT_EQ(runs.load(), 2) << "round " << round;
    ran += runs.load();
  }
  EXPECT_EQ(ran, 400);
}

// thread_cpu_ns is the CPU of the pool's threads, as soon as they used it (their clocks,
// read by the caller), and not the caller's own.
TEST(IoPoolTest, ThreadCpuIsThePoolThreadsNotTheCallers) {
  IoPool pool(2);
  absl::Notification done;
  ASSERT_TRUE(RunSoon(pool, [&] {
    Burn(30);
    done.Notify();
  }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
  const uint64_t after_task = pool.thread_cpu_ns();
  EXPECT_GE(after_task, 30'000'000u) << "the task burned 30 ms on a pool thread";
  Burn(50);
  EXPECT_LT(pool.thread_cpu_ns() - after_task, 10'000'000u) << "the caller's CPU counted";
}

// Idle threads, or threads not yet started waiting, leave their wait when the pool is
// destroyed (a hang here fails the test by its timeout).
TEST(IoPoolTest, IdleOrJustStartedPoolShutsDownCleanly) {
  for (int i = 0; i < 50; ++i) {
    IoPool pool(4);  // destroyed before its threads may even have reached their wait
  }
  IoPool pool(4);
  absl::Notification done;
  ASSERT_TRUE(RunSoon(pool, [&] { done.Notify(); }));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(kWait));
}

}  // namespace
}  // namespace msgr::store

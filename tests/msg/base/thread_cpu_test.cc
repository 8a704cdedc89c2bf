#include "msg/base/thread_cpu.h"

#include <chrono>
#include <thread>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace msgr {
namespace {

// Burns about `ms` of this thread's CPU.
void Burn(int ms) {
  const uint64_t until = ThisThreadCpuNs() + static_cast<uint64_t>(ms) * 1'000'000;
  volatile uint64_t x = 0;
  while (ThisThreadCpuNs() < until) {
    for (int i = 0; i < 1000; ++i) x = x + i;
  }
}

TEST(ThreadCpuClockTest, AnotherThreadReadsTheCpuOfTheThreadThatTookIt) {
  ThreadCpuClock clock;
  EXPECT_EQ(clock.Ns(), 0u) << "a clock of no thread";
  absl::Notification taken, burned, done;
  std::thread worker([&] {
    clock = ThreadCpuClock::OfThisThread();
    taken.Notify();
    Burn(30);
    burned.Notify();
    done.WaitForNotification();  // stays alive while the test reads its clock
  });
  taken.WaitForNotification();
  burned.WaitForNotification();
  const uint64_t after_burn = clock.Ns();
  EXPECT_GE(after_burn, 30'000'000u) << "the worker burned 30 ms of its own CPU";
  // The reader's own CPU is not counted: it sleeps, the worker waits.
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_LT(clock.Ns() - after_burn, 10'000'000u) << "a waiting thread's clock stands still";
  done.Notify();
  worker.join();
}

// A group counts its members' CPU, read by another thread while they run and kept when
// they leave; the reader's own CPU is not theirs.
TEST(ThreadCpuGroupTest, CountsRunningAndExitedMembersButNotTheReader) {
  ThreadCpuGroup group;
  EXPECT_EQ(group.Ns(), 0u) << "a group of no threads";
  absl::Notification burned, done;
  std::thread stays([&] {
    const ThreadCpuGroup::Member m(&group);
    Burn(30);
    burned.Notify();
    done.WaitForNotification();  // a member while the test reads
  });
  std::thread leaves([&] {
    const ThreadCpuGroup::Member m(&group);
    Burn(20);
  });
  leaves.join();
  burned.WaitForNotification();
  const uint64_t both = group.Ns();
  EXPECT_GE(both, 50'000'000u) << "30 ms of the running member, 20 ms of the one that left";
  Burn(50);
  EXPECT_LT(group.Ns() - both, 10'000'000u) << "the reader's CPU counted as the group's";
  done.Notify();
  stays.join();
  const uint64_t after = group.Ns();
  EXPECT_GE(after, both) << "a member's CPU is kept when it leaves";
  EXPECT_LT(after - both, 10'000'000u);
}

}  // namespace
}  // namespace msgr

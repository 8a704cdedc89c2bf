#include "msg/base/thread_cpu.h"

#include <atomic>
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

TEST(ThreadCpuMeterTest, ReportAddsWhatTheThreadUsedSinceTheLastReport) {
  std::atomic<uint64_t> total{0};
  ThreadCpuMeter meter;
  meter.Report(&total);
  const uint64_t first = total.load();
  Burn(20);
  meter.Report(&total);
  EXPECT_GE(total.load() - first, 20'000'000u);
}

}  // namespace
}  // namespace msgr

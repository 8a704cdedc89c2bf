// /proc parsing for the bench's CPU figures: a process's and each thread's utime + stime,
// with names holding spaces and parentheses, and per-thread deltas across two readings
// (threads that start, exit or whose tid is reused in between).
#include "client/bench/cpu_usage.h"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace msgr::bench {
namespace {

// Burns `ms` of CPU on `clock` (the process's or the calling thread's).
void Burn(clockid_t clock, double ms) {
  timespec start{}, now{};
  clock_gettime(clock, &start);
  volatile uint64_t sink = 0;
  do {
    for (int i = 0; i < 10000; ++i) sink = sink + i;
    clock_gettime(clock, &now);
  } while ((now.tv_sec - start.tv_sec) * 1e3 + (now.tv_nsec - start.tv_nsec) / 1e6 < ms);
}

const ThreadCpu* Find(const std::vector<ThreadCpu>& v, int tid) {
  auto it = std::find_if(v.begin(), v.end(), [tid](const ThreadCpu& t) { return t.tid == tid; });
  return it == v.end() ? nullptr : &*it;
}

TEST(CpuUsageTest, ParsesProcStatWithAwkwardCommNames) {
  std::string stat =
      "1234 (osd (x) 1) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 9 0 1 2 3";
  auto s = ParseProcStatCpu(stat, 100);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_DOUBLE_EQ(*s, 3.0);
  EXPECT_FALSE(ParseProcStatCpu("garbage", 100).ok());
  EXPECT_FALSE(ParseProcStatCpu("1 (a) S 1 2", 100).ok());
  // This process's reading grows by about the CPU time it burns: 50 ms here by the kernel's
  // own count (CLOCK_PROCESS_CPUTIME_ID), so at least 20 ms (a tick lost at either end) and
  // well under 2 s (a wrong tick rate or field would miss one bound or the other).
  auto before = ProcessCpuSeconds(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  Burn(CLOCK_PROCESS_CPUTIME_ID, 50);
  auto after = ProcessCpuSeconds(getpid());
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_GT(*after - *before, 0.02);
  EXPECT_LT(*after - *before, 2.0);
  EXPECT_EQ(ProcessCpuSeconds(0x7ffffff0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(ReadOsdPids("/no/such/dir").empty());
}

TEST(CpuUsageTest, ParsesTaskStatWithSpacesAndParensInTheName) {
  auto t = ParseTaskStat(
      "4321 (ms (tcp) io) R 1 1234 1234 0 -1 4194560 100 0 0 0 120 30 0 0 20 0 9 0 1 2 3", 100);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tid, 4321);
  EXPECT_EQ(t->comm, "ms (tcp) io");
  EXPECT_DOUBLE_EQ(t->cpu_s, 1.5);
  auto paren = ParseTaskStat("7 ()) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0 20 0 1 0 1 2 3", 10);
  ASSERT_TRUE(paren.ok()) << paren.status();
  EXPECT_EQ(paren->comm, ")");
  EXPECT_DOUBLE_EQ(paren->cpu_s, 1.0);
  EXPECT_FALSE(ParseTaskStat("", 100).ok());                                     // exited
  EXPECT_FALSE(ParseTaskStat("x (a) S 1 1 1 0 -1 0 0 0 0 0 5 5 0 0", 100).ok());  // no tid
  EXPECT_FALSE(ParseTaskStat("7 (a) S 1 1 1", 100).ok());                         // short
}

TEST(CpuUsageTest, ThreadReadingsFollowANamedThreadsCpu) {
  std::atomic<int> step{0};
  std::atomic<int> tid{0};
  std::thread worker([&] {
    pthread_setname_np(pthread_self(), "probe (a) b");
    tid = static_cast<int>(gettid());
    step = 1;
    while (step != 2) std::this_thread::yield();
    Burn(CLOCK_THREAD_CPUTIME_ID, 60);
    step = 3;
    while (step != 4) std::this_thread::yield();
  });
  while (step != 1) std::this_thread::yield();
  auto before = ProcessThreadCpu(getpid());
  ASSERT_TRUE(before.ok()) << before.status();
  step = 2;
  while (step != 3) std::this_thread::yield();
  auto after = ProcessThreadCpu(getpid());
  step = 4;
  worker.join();
  ASSERT_TRUE(after.ok()) << after.status();

  const ThreadCpu* main_thread = Find(*after, getpid());
  ASSERT_NE(main_thread, nullptr);
  const std::vector<ThreadCpu> delta = ThreadCpuDelta(*before, *after);
  const ThreadCpu* probe = Find(delta, tid);
  ASSERT_NE(probe, nullptr);
  EXPECT_EQ(probe->comm, "probe (a) b");
  // 60 ms of its own CPU: at least 30 ms (ticks), well under 2 s.
  EXPECT_GT(probe->cpu_s, 0.03);
  EXPECT_LT(probe->cpu_s, 2.0);
  EXPECT_EQ(ProcessThreadCpu(0x7ffffff0).status().code(), absl::StatusCode::kNotFound);
}

TEST(CpuUsageTest, ThreadDeltaCountsNewThreadsWholeAndLeavesExitedOnesOut) {
  const std::vector<ThreadCpu> before = {
      {10, "osd", 5.0}, {11, "ms-tcp-io", 2.0}, {12, "gone", 9.0}, {13, "reused", 4.0}};
  const std::vector<ThreadCpu> after = {{10, "osd", 5.5},
                                        {11, "ms-tcp-io", 3.25},
                                        {13, "new-one", 0.5},  // tid reused: went backwards
                                        {14, "started", 0.75}};
  const std::vector<ThreadCpu> d = ThreadCpuDelta(before, after);
  ASSERT_EQ(d.size(), 4u);
  EXPECT_DOUBLE_EQ(Find(d, 10)->cpu_s, 0.5);
  EXPECT_DOUBLE_EQ(Find(d, 11)->cpu_s, 1.25);
  EXPECT_EQ(Find(d, 11)->comm, "ms-tcp-io");
  EXPECT_DOUBLE_EQ(Find(d, 13)->cpu_s, 0.5);
  EXPECT_EQ(Find(d, 13)->comm, "new-one");
  EXPECT_DOUBLE_EQ(Find(d, 14)->cpu_s, 0.75);
  EXPECT_EQ(Find(d, 12), nullptr);
  EXPECT_TRUE(ThreadCpuDelta(before, {}).empty());
}

TEST(CpuUsageTest, HostCpuFromProcStatAndItsShareOfARun) {
  // user nice system idle iowait irq softirq steal guest guest_nice, in ticks of 1/100 s.
  const std::string stat =
      "cpu  300 20 80 500 100 0 0 100 0 0\n"
      "cpu0 150 10 40 250 50 0 0 50 0 0\n"
      "intr 12345\n";
  auto h = ParseHostCpu(stat, 100);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_DOUBLE_EQ(h->busy_s, 4.0);   // user + nice + system + irq + softirq
  EXPECT_DOUBLE_EQ(h->idle_s, 6.0);   // idle + iowait
  EXPECT_DOUBLE_EQ(h->steal_s, 1.0);

  const HostCpu before{4.0, 6.0, 1.0};
  const HostCpu after{10.0, 8.0, 4.0};  // +6 busy, +2 idle, +3 stolen: 11 s in all
  auto share = HostCpuBetween(before, after);
  ASSERT_TRUE(share.has_value());
  EXPECT_NEAR(share->busy_pct, 100.0 * 6 / 11, 1e-9);
  EXPECT_NEAR(share->steal_pct, 100.0 * 3 / 11, 1e-9);
  EXPECT_FALSE(HostCpuBetween(after, before).has_value());  // went backwards
  EXPECT_FALSE(HostCpuBetween(before, before).has_value());  // no time passed

  EXPECT_FALSE(ParseHostCpu("cpu0 1 2 3 4 5 6 7 8\n", 100).ok());  // no total line
  EXPECT_FALSE(ParseHostCpu("cpu  1 2 3\n", 100).ok());           // before steal existed
  EXPECT_FALSE(ParseHostCpu("cpu  1 2 x 4 5 6 7 8\n", 100).ok());

  // This machine's own /proc/stat reads, and time goes forward in it.
  auto now = ReadHostCpu();
  ASSERT_TRUE(now.ok()) << now.status();
  EXPECT_GT(now->busy_s + now->idle_s, 0);
}

}  // namespace
}  // namespace msgr::bench

// Thread CPU by role: the stat line parser, the role rule, totals that never go down.
#include "osd_sim/metrics/thread_cpu_collector.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace msgr::metrics {
namespace {

using ::testing::HasSubstr;

TEST(ParseTaskStatLineTest, CommWithSpacesAndParentheses) {
  // Fields: pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt
  // cmajflt utime stime ...
  auto t = ParseTaskStatLine("4242 (a (b) c) S 1 2 3 4 5 6 7 8 9 10 120 30 0 0 20 0\n");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->tid, 4242);
  EXPECT_EQ(t->comm, "a (b) c");
  EXPECT_EQ(t->ticks, 150u);
}

TEST(ParseTaskStatLineTest, RejectsGarbage) {
  EXPECT_FALSE(ParseTaskStatLine("").ok());
  EXPECT_FALSE(ParseTaskStatLine("12 (x) S 1 2").ok());
  EXPECT_FALSE(ParseTaskStatLine("x (y) S 1 2 3 4 5 6 7 8 9 10 1 1 0").ok());
}

TEST(ThreadRoleOfTest, RolesFromThreadNames) {
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("ms-tcp-io")], "transport");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("ms-rdma-cq")], "transport");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("soft-hca")], "transport");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("osd-poller-3")], "poller");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("store-flush")], "store");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("osd-read")], "other");
  EXPECT_STREQ(kThreadRoleNames[ThreadRoleOf("osd")], "other");
}

TEST(ThreadCpuCollectorTest, TotalsKeepExitedThreadsAndCountReusedTids) {
  ThreadCpuCollector c(Labels{});
  auto s = c.Update({{1, "osd-poller-0", 100}, {2, "ms-tcp-io", 50}}, 100);
  EXPECT_DOUBLE_EQ(s[1], 1.0);
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  // Thread 2 exits; thread 1 grows by 100 ticks.
  s = c.Update({{1, "osd-poller-0", 200}}, 100);
  EXPECT_DOUBLE_EQ(s[1], 2.0);
  EXPECT_DOUBLE_EQ(s[0], 0.5);
  // Tid 1 is reused by a store thread with less time: all of it is new.
  s = c.Update({{1, "store-io", 30}}, 100);
  EXPECT_DOUBLE_EQ(s[1], 2.0);
  EXPECT_DOUBLE_EQ(s[2], 0.3);
}

// A poller that drives a tcp messenger does its transport work: that time moves from the
// poller role to transport (at most all of the poller's), and no total ever goes down.
TEST(ThreadCpuCollectorTest, PollersTransportWorkIsTransportAndTotalsNeverFall) {
  ThreadCpuCollector c(Labels{});
  auto s = c.Split({0.5, 2.0, 0.25, 0.125}, 1.5);
  EXPECT_DOUBLE_EQ(s[0], 2.0);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
  EXPECT_DOUBLE_EQ(s[2], 0.25);
  EXPECT_DOUBLE_EQ(s[3], 0.125);
  // More than the poller threads' CPU (the counter is sampled): the poller's
  // share stays where it was, the rest is transport's; the sum is the threads' CPU.
  s = c.Split({0.5, 2.5, 0.25, 0.125}, 3.0);
  EXPECT_DOUBLE_EQ(s[0], 2.5);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
  s = c.Split({0.5, 3.0, 0.25, 0.125}, 3.0);
  EXPECT_DOUBLE_EQ(s[0], 3.0);
  EXPECT_DOUBLE_EQ(s[1], 0.5);
  s = c.Split({0.5, 4.0, 0.25, 0.125}, 3.0);  // the poller's own work grew
  EXPECT_DOUBLE_EQ(s[0], 3.5);
  EXPECT_DOUBLE_EQ(s[1], 1.0);
}

TEST(ThreadCpuCollectorTest, CollectsThisProcessByRole) {
  std::thread busy([] {
    pthread_setname_np(pthread_self(), "osd-poller-9");
    // ~50 ms of CPU: more than a clock tick (10 ms at 100 Hz).
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(50);
    volatile uint64_t x = 0;
    while (std::chrono::steady_clock::now() < until) x = x + 1;
    ThreadCpuCollector c(Labels{{"osd", "7"}});
    auto families = c.Collect();
    ASSERT_EQ(families.size(), 1u);
    ASSERT_EQ(families[0].metric.size(), 4u);
    EXPECT_EQ(families[0].metric[1].label[1].value, "poller");
    EXPECT_GT(families[0].metric[1].counter.value, 0.0);
    EXPECT_THAT(prometheus::TextSerializer().Serialize(families),
                HasSubstr("# TYPE msgr_thread_cpu_seconds_total counter\n"
                          "msgr_thread_cpu_seconds_total{osd=\"7\",role=\"transport\"} 0\n"));
  });
  busy.join();
}

}  // namespace
}  // namespace msgr::metrics

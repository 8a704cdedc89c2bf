#include "msg/base/perf_counters.h"

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace msgr {
namespace {

#define TEST_COUNTERS(X)                              \
  X(hits, kCounter, kNone, "lookups that found one")  \
  X(bytes, kCounter, kBytes, "bytes moved")           \
  X(open, kGauge, kNone, "open now")

MSGR_COUNTER_SNAPSHOT(TestCounters, TEST_COUNTERS);
MSGR_COUNTER_LIVE(LiveTestCounters, TestCounters, TEST_COUNTERS);

TEST(PerfCountersTest, OneListGivesFieldsDescriptionsAndValuesInOrder) {
  LiveTestCounters live;
  live.hits++;
  ++live.hits;
  live.bytes += 4096;
  live.open++;
  live.open++;
  live.open--;
  const TestCounters s = live.Snapshot();
  EXPECT_EQ(s.hits, 2u);
  EXPECT_EQ(s.bytes, 4096u);
  EXPECT_EQ(s.open, 1u);
  const CounterGroup g = s.Group("test");
  EXPECT_EQ(g.name, "test");
  ASSERT_EQ(g.values.size(), 3u);
  EXPECT_STREQ(g.values[0].desc->name, "hits");
  EXPECT_EQ(g.values[0].value, 2u);
  EXPECT_STREQ(g.values[1].desc->name, "bytes");
  EXPECT_EQ(g.values[1].desc->unit, CounterUnit::kBytes);
  EXPECT_EQ(g.values[1].value, 4096u);
  EXPECT_EQ(g.values[2].desc->kind, CounterKind::kGauge);
  EXPECT_STREQ(g.values[2].desc->description, "open now");
}

TEST(PerfCountersTest, BumpsFromManyThreadsAreAllCounted) {
  LiveTestCounters live;
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; ++t) {
    ts.emplace_back([&] {
      for (int i = 0; i < 10000; ++i) live.hits++;
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(live.Snapshot().hits, 40000u);
}

TEST(PerfCountersTest, RegistryDumpsEveryGroupAtItsPath) {
  CounterRegistry r;
  TestCounters a;
  a.hits = 7;
  TestCounters b;
  b.bytes = 9;
  r.Add({"net.tcp", -1, [&] { return std::vector{a.Group("messenger"), b.Group("extra")}; }});
  r.Add({"pollers", 1, [&] { return std::vector{b.Group("poller")}; }});
  r.Add({"pollers", 0, [&] { return std::vector{a.Group("poller")}; }});
  const nlohmann::json j = r.ToJson();
  EXPECT_EQ(j["net"]["tcp"]["hits"], 7);
  EXPECT_EQ(j["net"]["tcp"]["extra"]["bytes"], 9);
  ASSERT_TRUE(j["pollers"].is_array());
  ASSERT_EQ(j["pollers"].size(), 2u);
  EXPECT_EQ(j["pollers"][0]["hits"], 7);
  EXPECT_EQ(j["pollers"][1]["bytes"], 9);
  // Values are read at dump time, not at registration.
  a.hits = 8;
  EXPECT_EQ(r.ToJson()["net"]["tcp"]["hits"], 8);
  int sources = 0;
  r.ForEach([&](const CounterSource&, const std::vector<CounterGroup>&) { ++sources; });
  EXPECT_EQ(sources, 3);
}

}  // namespace
}  // namespace msgr

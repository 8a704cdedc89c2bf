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

constexpr HistogramDesc kTestLatency{"op_latency", "test op latency"};

TEST(PerfCountersTest, LatencyHistogramBucketsByPowersOfTwoMicroseconds) {
  LatencyHistogram h(&kTestLatency);
  h.Record(0);              // <= 1 us: bucket 0
  h.Record(1000);           // exactly 1 us: bucket 0
  h.Record(1001);           // just above: bucket 1 (<= 2 us)
  h.Record(3'000);          // bucket 2 (<= 4 us)
  h.Record(100'000);        // 100 us: bucket 7 (<= 128 us)
  h.Record(60'000'000'000);  // a minute: the +Inf bucket
  const HistogramValue v = h.Snapshot();
  EXPECT_EQ(v.desc, &kTestLatency);
  EXPECT_EQ(v.count, 6u);
  EXPECT_EQ(v.sum_ns, 0u + 1000 + 1001 + 3000 + 100'000 + 60'000'000'000);
  EXPECT_EQ(v.buckets[0], 2u);
  EXPECT_EQ(v.buckets[1], 1u);
  EXPECT_EQ(v.buckets[2], 1u);
  EXPECT_EQ(v.buckets[7], 1u);
  EXPECT_EQ(v.buckets[kHistogramBuckets - 1], 1u);
  EXPECT_EQ(HistogramBucketBoundNs(7), 128'000u);
  // Half of the six samples are at most 2 us; the 99th percentile is in +Inf, reported as
  // the last finite bound.
  EXPECT_EQ(v.QuantileBoundNs(0.5), 2'000u);
  EXPECT_EQ(v.QuantileBoundNs(0.99), HistogramBucketBoundNs(kHistogramBuckets - 2));
  EXPECT_EQ(HistogramValue{&kTestLatency}.QuantileBoundNs(0.5), 0u);
}

TEST(PerfCountersTest, HistogramsAreDumpedWithCountSumQuantilesAndNonEmptyBuckets) {
  LatencyHistogram h(&kTestLatency);
  for (int i = 0; i < 99; ++i) h.Record(50'000);  // 50 us -> bucket <= 64 us
  h.Record(5'000'000);                            // 5 ms -> bucket <= 8192 us
  CounterRegistry r;
  r.Add({"pollers", 0, [&] {
           CounterGroup g = TestCounters{}.Group("poller");
           g.histograms.push_back(h.Snapshot());
           return std::vector{g};
         }});
  const nlohmann::json j = r.ToJson()["pollers"][0]["op_latency"];
  EXPECT_EQ(j["count"], 100);
  EXPECT_EQ(j["sum_ns"], 99u * 50'000 + 5'000'000);
  EXPECT_EQ(j["avg_us"], (99u * 50'000 + 5'000'000) / 100 / 1000);
  EXPECT_EQ(j["p50_us"], 64);
  EXPECT_EQ(j["p99_us"], 64);
  ASSERT_EQ(j["buckets"].size(), 2u) << j;
  EXPECT_EQ(j["buckets"][0]["le_us"], 64);
  EXPECT_EQ(j["buckets"][0]["count"], 99);
  EXPECT_EQ(j["buckets"][1]["le_us"], 8192);
  EXPECT_EQ(j["buckets"][1]["count"], 1);
}

}  // namespace
}  // namespace msgr

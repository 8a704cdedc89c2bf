#include "client/bench/latency_histogram.h"

#include <cmath>
#include <random>

#include "gtest/gtest.h"

namespace msgr::bench {
namespace {

TEST(LatencyHistogramTest, EmptyIsZero) {
  LatencyHistogram h;
  EXPECT_EQ(h.Percentile(0.5), 0u);
  EXPECT_EQ(h.max(), 0u);
  EXPECT_TRUE(h.Cdf().empty());
}

TEST(LatencyHistogramTest, PercentilesOfAUniformRangeWithinBucketPrecision) {
  LatencyHistogram h;
  for (uint64_t v = 1; v <= 100000; ++v) h.Record(v * 10);  // 10 ns .. 1 ms
  EXPECT_EQ(h.count(), 100000u);
  auto near = [](uint64_t got, double want) { return std::abs(got - want) / want < 0.02; };
  EXPECT_TRUE(near(h.Percentile(0.5), 500000)) << h.Percentile(0.5);
  EXPECT_TRUE(near(h.Percentile(0.99), 990000)) << h.Percentile(0.99);
  EXPECT_TRUE(near(h.Percentile(0.999), 999000)) << h.Percentile(0.999);
  EXPECT_EQ(h.Percentile(1.0), 1000000u);
  EXPECT_EQ(h.max(), 1000000u);
  EXPECT_EQ(h.min(), 10u);
  EXPECT_NEAR(h.mean(), 500005, 1);
}

TEST(LatencyHistogramTest, SmallValuesAreExactAndTailsAreSeen) {
  LatencyHistogram h;
  for (int i = 0; i < 999; ++i) h.Record(100);
  h.Record(5000000);  // one 5 ms outlier
  EXPECT_EQ(h.Percentile(0.5), 100u);
  EXPECT_EQ(h.Percentile(0.999), 100u);
  EXPECT_EQ(h.Percentile(0.9995), 5000000u);
  EXPECT_EQ(h.max(), 5000000u);
}

TEST(LatencyHistogramTest, BucketsAreMonotonicAndTight) {
  uint64_t prev_upper = 0;
  for (int b = 0; b < LatencyHistogram::kBuckets; ++b) {
    uint64_t up = LatencyHistogram::BucketUpper(b);
    if (b > 0) {
      ASSERT_GT(up, prev_upper) << b;
      // The first value of bucket b maps back to b.
      ASSERT_EQ(LatencyHistogram::BucketOf(prev_upper + 1), b);
    }
    ASSERT_EQ(LatencyHistogram::BucketOf(up), b);
    prev_upper = up;
  }
  EXPECT_EQ(prev_upper, UINT64_MAX);
}

TEST(LatencyHistogramTest, MergeAndCdf) {
  LatencyHistogram a, b;
  std::mt19937_64 rng(1);
  for (int i = 0; i < 10000; ++i) a.Record(1000 + rng() % 1000);
  for (int i = 0; i < 10000; ++i) b.Record(3000 + rng() % 1000);
  a.Merge(b);
  EXPECT_EQ(a.count(), 20000u);
  EXPECT_GE(a.Percentile(0.25), 1400u);
  EXPECT_LE(a.Percentile(0.25), 1600u);
  EXPECT_GE(a.Percentile(0.75), 3400u);
  auto cdf = a.Cdf();
  ASSERT_GE(cdf.size(), 50u);
  for (size_t i = 1; i < cdf.size(); ++i) {
    EXPECT_GT(cdf[i].first, cdf[i - 1].first);
    EXPECT_GT(cdf[i].second, cdf[i - 1].second);
  }
  EXPECT_EQ(cdf.back().first, a.max());
  EXPECT_EQ(cdf.back().second, 1.0);
}

}  // namespace
}  // namespace msgr::bench

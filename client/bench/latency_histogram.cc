#include "client/bench/latency_histogram.h"

#include <algorithm>
#include <cmath>

namespace msgr::bench {

static_assert(LatencyHistogram::kBuckets == 128 + 57 * 64, "bucket layout");

int LatencyHistogram::BucketOf(uint64_t ns) {
  if (ns < static_cast<uint64_t>(kLinear)) return static_cast<int>(ns);
  int e = 63 - __builtin_clzll(ns);                       // >= kSubBits + 1
  int sub = static_cast<int>((ns >> (e - kSubBits)) & ((1 << kSubBits) - 1));
  return kLinear + (e - kSubBits - 1) * (1 << kSubBits) + sub;
}

uint64_t LatencyHistogram::BucketUpper(int bucket) {
  if (bucket < kLinear) return static_cast<uint64_t>(bucket);
  int e = (bucket - kLinear) / (1 << kSubBits) + kSubBits + 1;
  uint64_t sub = static_cast<uint64_t>((bucket - kLinear) % (1 << kSubBits));
  uint64_t lower = ((uint64_t{1} << kSubBits) + sub) << (e - kSubBits);
  return lower + ((uint64_t{1} << (e - kSubBits)) - 1);
}

void LatencyHistogram::Record(uint64_t ns) {
  ++counts_[BucketOf(ns)];
  ++count_;
  sum_ += ns;
  max_ = std::max(max_, ns);
  min_ = std::min(min_, ns);
}

void LatencyHistogram::Merge(const LatencyHistogram& o) {
  for (int i = 0; i < kBuckets; ++i) counts_[i] += o.counts_[i];
  count_ += o.count_;
  sum_ += o.sum_;
  max_ = std::max(max_, o.max_);
  min_ = std::min(min_, o.min_);
}

uint64_t LatencyHistogram::Percentile(double q) const {
  if (count_ == 0) return 0;
  q = std::clamp(q, 0.0, 1.0);
  uint64_t rank = std::max<uint64_t>(1, static_cast<uint64_t>(std::ceil(q * count_)));
  uint64_t seen = 0;
  for (int i = 0; i < kBuckets; ++i) {
    seen += counts_[i];
    if (seen >= rank) return std::min(BucketUpper(i), max_);
  }
  return max_;
}

std::vector<std::pair<uint64_t, double>> LatencyHistogram::Cdf() const {
  std::vector<std::pair<uint64_t, double>> out;
  if (count_ == 0) return out;
  std::vector<double> qs;
  for (int i = 0; i <= 98; ++i) qs.push_back(i / 100.0);
  for (int i = 990; i <= 999; ++i) qs.push_back(i / 1000.0);
  for (int i = 9991; i <= 9999; ++i) qs.push_back(i / 10000.0);
  for (double q : qs) {
    uint64_t v = Percentile(q);
    if (!out.empty() && out.back().first == v) {
      out.back().second = q;
    } else {
      out.emplace_back(v, q);
    }
  }
  if (out.back().first == max_) {
    out.back().second = 1.0;
  } else {
    out.emplace_back(max_, 1.0);
  }
  return out;
}

}  // namespace msgr::bench

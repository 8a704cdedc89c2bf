// A log-linear latency histogram (HdrHistogram-like): exact below 128 ns, then 64
// sub-buckets per power of two (relative error < 1.6%), fixed memory (~30 KiB), O(1)
// record. Percentiles report the bucket's upper bound (never above the true max).
//
// Thread-safety: none; each thread keeps its own, or the owner locks. Merge() to combine.
#ifndef MSGR_CLIENT_BENCH_LATENCY_HISTOGRAM_H_
#define MSGR_CLIENT_BENCH_LATENCY_HISTOGRAM_H_

#include <array>
#include <cstdint>
#include <utility>
#include <vector>

namespace msgr::bench {

class LatencyHistogram {
 public:
  static constexpr int kSubBits = 6;                    // 64 sub-buckets per octave
  static constexpr int kLinear = 2 << kSubBits;         // exact values below 128
  static constexpr int kBuckets = kLinear + (64 - kSubBits - 1) * (1 << kSubBits);

  void Record(uint64_t ns);
  void Merge(const LatencyHistogram& other);
  void Clear() { *this = LatencyHistogram(); }

  uint64_t count() const { return count_; }
  uint64_t max() const { return max_; }
  uint64_t min() const { return count_ ? min_ : 0; }
  double mean() const { return count_ ? static_cast<double>(sum_) / count_ : 0; }

  // Smallest recorded-bucket value v with at least q of the samples <= v, q in [0, 1].
  // 0 when empty.
  uint64_t Percentile(double q) const;
  // Points (latency ns, cumulative fraction) for a CDF plot: dense in the body, then
  // the 99.x and 99.9x tails, ending with (max, 1).
  std::vector<std::pair<uint64_t, double>> Cdf() const;

  static int BucketOf(uint64_t ns);
  static uint64_t BucketUpper(int bucket);

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0;
  uint64_t sum_ = 0;
  uint64_t max_ = 0;
  uint64_t min_ = UINT64_MAX;
};

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_LATENCY_HISTOGRAM_H_

#include "msg/base/perf_counters.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_split.h"

namespace msgr {

uint64_t HistogramValue::QuantileBoundNs(double q) const {
  if (count == 0) return 0;
  const double want = q * static_cast<double>(count);
  uint64_t seen = 0;
  for (int i = 0; i < kHistogramBuckets; ++i) {
    seen += buckets[i];
    if (static_cast<double>(seen) >= want && buckets[i] > 0) {
      // The +Inf bucket has no bound: report the last finite one's.
      return HistogramBucketBoundNs(std::min(i, kHistogramBuckets - 2));
    }
  }
  return HistogramBucketBoundNs(kHistogramBuckets - 2);
}

void LatencyHistogram::Record(uint64_t ns) {
  // The first bucket whose bound (1 us << i) holds ns: i = ceil(log2(ceil(ns / 1 us))).
  const uint64_t us = (ns + 999) / 1000;
  int i = us <= 1 ? 0 : 64 - __builtin_clzll(us - 1);
  if (i > kHistogramBuckets - 1) i = kHistogramBuckets - 1;
  buckets_[i].fetch_add(1, std::memory_order_relaxed);
  sum_ns_.fetch_add(ns, std::memory_order_relaxed);
}

HistogramValue LatencyHistogram::Snapshot() const {
  HistogramValue v;
  v.desc = desc_;
  for (int i = 0; i < kHistogramBuckets; ++i) {
    v.buckets[i] = buckets_[i].load(std::memory_order_relaxed);
    v.count += v.buckets[i];
  }
  v.sum_ns = sum_ns_.load(std::memory_order_relaxed);
  return v;
}

void AddToJson(const CounterGroup& group, nlohmann::json* out) {
  for (const CounterValue& v : group.values) (*out)[v.desc->name] = v.value;
  for (const HistogramValue& h : group.histograms) {
    nlohmann::json j;
    j["count"] = h.count;
    j["sum_ns"] = h.sum_ns;
    j["avg_us"] = h.count > 0 ? h.sum_ns / h.count / 1000 : 0;
    j["p50_us"] = h.QuantileBoundNs(0.5) / 1000;
    j["p99_us"] = h.QuantileBoundNs(0.99) / 1000;
    nlohmann::json buckets = nlohmann::json::array();
    for (int i = 0; i < kHistogramBuckets; ++i) {
      if (h.buckets[i] == 0) continue;
      nlohmann::json b;
      if (i < kHistogramBuckets - 1) {
        b["le_us"] = HistogramBucketBoundNs(i) / 1000;
      } else {
        b["le_us"] = "+Inf";
      }
      b["count"] = h.buckets[i];
      buckets.push_back(std::move(b));
    }
    j["buckets"] = std::move(buckets);
    (*out)[h.desc->name] = std::move(j);
  }
}

void CounterRegistry::Add(CounterSource source) {
  absl::MutexLock l(&mu_);
  sources_.push_back(std::move(source));
}

void CounterRegistry::ForEach(
    const std::function<void(const CounterSource&, const std::vector<CounterGroup>&)>& fn) const {
  std::vector<CounterSource> sources;
  {
    absl::MutexLock l(&mu_);
    sources = sources_;
  }
  // Collected outside the lock: a collect function may take its component's own locks.
  for (const CounterSource& s : sources) fn(s, s.collect());
}

nlohmann::json CounterRegistry::ToJson() const {
  nlohmann::json root = nlohmann::json::object();
  ForEach([&](const CounterSource& s, const std::vector<CounterGroup>& groups) {
    nlohmann::json* at = &root;
    for (absl::string_view part : absl::StrSplit(s.path, '.')) at = &(*at)[std::string(part)];
    if (s.index >= 0) {
      if (!at->is_array()) *at = nlohmann::json::array();
      while (at->size() <= static_cast<size_t>(s.index)) at->push_back(nlohmann::json::object());
      at = &(*at)[s.index];
    }
    for (size_t i = 0; i < groups.size(); ++i) {
      AddToJson(groups[i], i == 0 ? at : &(*at)[groups[i].name]);
    }
  });
  return root;
}

}  // namespace msgr

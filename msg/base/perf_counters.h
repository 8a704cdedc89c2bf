// Counters in one registry, in the manner of Ceph's PerfCounters.
//
// A component describes its counters once, as a list macro of
//   X(name, kind, unit, "description")
// entries (kind: kCounter, only ever grows; kGauge, goes up and down. unit: kNone,
// kBytes, kNanoseconds). From that one list:
//   MSGR_COUNTER_SNAPSHOT(Name, LIST)   struct Name { uint64_t <name> = 0; ... } with
//                                       Name::kDescs (the descriptions, in list order)
//                                       and Name::Group(group) (descriptions + values);
//   MSGR_COUNTER_LIVE(Live, Name, LIST) struct Live { RelaxedCounter <name>; ... } with
//                                       Live::Snapshot() -> Name, for the data path.
// So a counter cannot be bumped, snapshotted, dumped or exported under two lists that
// drift. Latency distributions are the third kind: a LatencyHistogram (log2 buckets of
// nanoseconds, lock-free Record) whose Snapshot goes into a group's `histograms` under a
// static HistogramDesc; perf dump shows count, sum, p50/p99 and the buckets, /metrics a
// Prometheus histogram. A CounterRegistry holds where each component's groups come from; perf dump
// (ToJson) and the Prometheus endpoint read it, never a hand-written list.
//
// Thread-safety: RelaxedCounter may be bumped and read from any thread (relaxed atomics:
// a snapshot is not one instant across counters). CounterRegistry is thread-safe; its
// collect functions run on the reading thread and must be safe to call from any thread.
#ifndef MSGR_MSG_BASE_PERF_COUNTERS_H_
#define MSGR_MSG_BASE_PERF_COUNTERS_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "nlohmann/json.hpp"

namespace msgr {

enum class CounterKind { kCounter, kGauge };
enum class CounterUnit { kNone, kBytes, kNanoseconds };

struct CounterDesc {
  const char* name;
  CounterKind kind;
  CounterUnit unit;
  const char* description;
};

struct CounterValue {
  const CounterDesc* desc;  // static storage: the component's kDescs
  uint64_t value;
};

// A latency distribution's name and meaning (its unit is always nanoseconds).
struct HistogramDesc {
  const char* name;
  const char* description;
};

// Bucket i counts samples of at most HistogramBucketBoundNs(i) = 1 us * 2^i; the last
// bucket (i = kHistogramBuckets - 1) counts the rest (+Inf).
inline constexpr int kHistogramBuckets = 26;  // finite bounds up to 2^24 us (~16.8 s)
constexpr uint64_t HistogramBucketBoundNs(int i) { return uint64_t{1000} << i; }

struct HistogramValue {
  const HistogramDesc* desc;  // static storage
  std::array<uint64_t, kHistogramBuckets> buckets{};  // not cumulative
  uint64_t count = 0;
  uint64_t sum_ns = 0;
  // The bound of the bucket holding quantile q (0 < q <= 1): an upper estimate, within a
  // factor 2; 0 when empty.
  uint64_t QuantileBoundNs(double q) const;
};

// One component's counters at one moment ("messenger", "rdma", "poller", "store", ...).
struct CounterGroup {
  std::string name;
  std::vector<CounterValue> values;
  std::vector<HistogramValue> histograms;
};

// A counter bumped on the data path: a relaxed atomic that reads as its value.
class RelaxedCounter {
 public:
  RelaxedCounter() = default;
  RelaxedCounter(const RelaxedCounter&) = delete;
  RelaxedCounter& operator=(const RelaxedCounter&) = delete;

  uint64_t operator++() { return v_.fetch_add(1, std::memory_order_relaxed) + 1; }
  uint64_t operator++(int) { return v_.fetch_add(1, std::memory_order_relaxed); }
  uint64_t operator--() { return v_.fetch_sub(1, std::memory_order_relaxed) - 1; }
  uint64_t operator--(int) { return v_.fetch_sub(1, std::memory_order_relaxed); }
  RelaxedCounter& operator+=(uint64_t n) {
    v_.fetch_add(n, std::memory_order_relaxed);
    return *this;
  }
  RelaxedCounter& operator-=(uint64_t n) {
    v_.fetch_sub(n, std::memory_order_relaxed);
    return *this;
  }
  void store(uint64_t v) { v_.store(v, std::memory_order_relaxed); }
  uint64_t load() const { return v_.load(std::memory_order_relaxed); }
  operator uint64_t() const { return load(); }  // NOLINT: reads as its value

 private:
  std::atomic<uint64_t> v_{0};
};

// A latency distribution bumped on the data path: Record is two relaxed atomic adds and
// a bit scan. Any thread may Record and Snapshot (a snapshot is not one instant).
class LatencyHistogram {
 public:
  explicit LatencyHistogram(const HistogramDesc* desc) : desc_(desc) {}
  LatencyHistogram(const LatencyHistogram&) = delete;
  LatencyHistogram& operator=(const LatencyHistogram&) = delete;

  void Record(uint64_t ns);
  HistogramValue Snapshot() const;

 private:
  const HistogramDesc* const desc_;
  std::array<std::atomic<uint64_t>, kHistogramBuckets> buckets_{};
  std::atomic<uint64_t> sum_ns_{0};
};

// Where a component's counters come from. `collect` returns its groups: the first is
// dumped at `path` ("store", "messenger.rdma": dots nest JSON objects), each further
// one under path.<group name> ("messenger.rdma.rdma"). index >= 0 makes `path` an
// array of alike components (pollers: "pollers"[index]).
struct CounterSource {
  std::string path;
  int index = -1;
  std::function<std::vector<CounterGroup>()> collect;
};

class CounterRegistry {
 public:
  void Add(CounterSource source) ABSL_LOCKS_EXCLUDED(mu_);

  // Calls fn(source, its groups now) for every source, in registration order.
  void ForEach(const std::function<void(const CounterSource&, const std::vector<CounterGroup>&)>&
                   fn) const ABSL_LOCKS_EXCLUDED(mu_);

  // perf dump: every counter of every source, at its path, named as registered.
  nlohmann::json ToJson() const;

 private:
  mutable absl::Mutex mu_;
  std::vector<CounterSource> sources_ ABSL_GUARDED_BY(mu_);
};

// Writes the group's values into `out` as name: value, and each histogram as name:
// {count, sum_ns, avg_us, p50_us, p99_us, buckets: [{le_us, count}...] (non-empty ones)}.
void AddToJson(const CounterGroup& group, nlohmann::json* out);

}  // namespace msgr

#define MSGR_COUNTER_FIELD_(name, kind, unit, desc) uint64_t name = 0;
#define MSGR_COUNTER_LIVE_FIELD_(name, kind, unit, desc) ::msgr::RelaxedCounter name;
#define MSGR_COUNTER_DESC_(name, kind, unit, desc) \
  ::msgr::CounterDesc{#name, ::msgr::CounterKind::kind, ::msgr::CounterUnit::unit, desc},
#define MSGR_COUNTER_VALUE_(name, kind, unit, desc) name,
#define MSGR_COUNTER_COPY_(name, kind, unit, desc) s.name = name.load();

#define MSGR_COUNTER_SNAPSHOT(Name, LIST)                                     \
  struct Name {                                                              \
    LIST(MSGR_COUNTER_FIELD_)                                                \
    static constexpr ::msgr::CounterDesc kDescs[] = {LIST(MSGR_COUNTER_DESC_)}; \
    ::msgr::CounterGroup Group(std::string group_name) const {               \
      const uint64_t values[] = {LIST(MSGR_COUNTER_VALUE_)};                 \
      ::msgr::CounterGroup g{std::move(group_name), {}};                     \
      g.values.reserve(std::size(kDescs));                                   \
      for (size_t i = 0; i < std::size(kDescs); ++i) {                       \
        g.values.push_back({&kDescs[i], values[i]});                         \
      }                                                                      \
      return g;                                                              \
    }                                                                        \
  }

#define MSGR_COUNTER_LIVE(Live, Name, LIST) \
  struct Live {                             \
    LIST(MSGR_COUNTER_LIVE_FIELD_)          \
    Name Snapshot() const {                 \
      Name s;                               \
      LIST(MSGR_COUNTER_COPY_)              \
      return s;                             \
    }                                       \
  }

#endif  // MSGR_MSG_BASE_PERF_COUNTERS_H_

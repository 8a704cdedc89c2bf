#include "client/bench/bench_runner.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <fstream>
#include <memory>
#include <mutex>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "client/bench/cpu_usage.h"
#include "client/bench/pattern.h"

namespace msgr::bench {
namespace {

constexpr size_t kMaxSamples = 5;

// State the write workers share with the progress loop.
struct WriteShared {
  std::mutex mu;
  LatencyHistogram total;          // guarded by mu
  uint64_t interval_count = 0;     // guarded by mu: since the last progress line
  uint64_t interval_sum_ns = 0;    // guarded by mu
  uint64_t ops = 0, bytes = 0, errors = 0;   // guarded by mu
  std::vector<std::string> samples;          // guarded by mu
  std::vector<uint64_t> acked;               // guarded by mu
  FILE* acked_log = nullptr;                 // written under mu
  std::atomic<uint64_t> next{0};
  std::atomic<bool> stop{false};
  std::atomic<int> running{0};
};

}  // namespace

std::string ObjectId(const std::string& prefix, uint64_t n) { return absl::StrCat(prefix, "_", n); }

absl::StatusOr<WriteRunResult> RunWrites(client::Client& c, const WriteRunOptions& o,
                                         std::ostream& out) {
  WriteShared sh;
  if (!o.acked_log.empty()) {
    sh.acked_log = std::fopen(o.acked_log.c_str(), "a");
    if (sh.acked_log == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("cannot open --acked-log ", o.acked_log, " for appending"));
    }
  }
  const double cpu0 = SelfCpuSeconds();
  const absl::Time start = absl::Now();
  sh.running = o.concurrency;
  std::vector<std::thread> workers;
  for (int t = 0; t < o.concurrency; ++t) {
    workers.emplace_back([&] {
      while (!sh.stop.load(std::memory_order_relaxed)) {
        uint64_t n = sh.next.fetch_add(1);
        if (o.count > 0 && n >= o.count) break;
        std::string oid = ObjectId(o.prefix, n);
        auto data = std::make_shared<const std::string>(MakePattern(oid, o.object_size));
        absl::Time t0 = absl::Now();
        absl::Status s = c.Write(oid, data);
        uint64_t ns = absl::ToInt64Nanoseconds(absl::Now() - t0);
        std::lock_guard<std::mutex> l(sh.mu);
        if (s.ok()) {
          sh.total.Record(ns);
          ++sh.interval_count;
          sh.interval_sum_ns += ns;
          ++sh.ops;
          sh.bytes += o.object_size;
          sh.acked.push_back(n);
          if (sh.acked_log) {
            std::fprintf(sh.acked_log, "%s\n", oid.c_str());
            std::fflush(sh.acked_log);
          }
        } else {
          ++sh.errors;
          if (sh.samples.size() < kMaxSamples) sh.samples.push_back(s.ToString());
        }
      }
      --sh.running;
    });
  }
  if (o.progress) out << "  sec        ops      MB/s   cur lat(us)   avg lat(us)\n" << std::flush;
  uint64_t last_ops = 0;
  for (int sec = 1; sh.running.load() > 0; ++sec) {
    absl::Time tick = start + absl::Seconds(sec);
    while (sh.running.load() > 0 && absl::Now() < tick) {
      absl::SleepFor(std::min(absl::Milliseconds(10), tick - absl::Now()));
      if (o.seconds > 0 && absl::Now() - start >= absl::Seconds(o.seconds)) sh.stop = true;
    }
    if (sh.running.load() == 0 || !o.progress) continue;
    std::lock_guard<std::mutex> l(sh.mu);
    double cur_us = sh.interval_count ? sh.interval_sum_ns / 1e3 / sh.interval_count : 0;
    double mbs = (sh.ops - last_ops) * static_cast<double>(o.object_size) / (1 << 20);
    out << absl::StrFormat("%5d %10d %9.2f %13.1f %13.1f\n", sec, sh.ops, mbs, cur_us,
                           sh.total.mean() / 1e3)
        << std::flush;
    last_ops = sh.ops;
    sh.interval_count = 0;
    sh.interval_sum_ns = 0;
  }
  for (auto& w : workers) w.join();
  WriteRunResult r;
  r.seconds = absl::ToDoubleSeconds(absl::Now() - start);
  r.client_cpu_s = SelfCpuSeconds() - cpu0;
  if (sh.acked_log) std::fclose(sh.acked_log);
  r.ops = sh.ops;
  r.bytes = sh.bytes;
  r.errors = sh.errors;
  r.error_samples = std::move(sh.samples);
  r.latency = sh.total;
  r.acked = std::move(sh.acked);
  return r;
}

VerifyResult VerifyObjects(client::Client& c, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size) {
  if (object_size > 0) {
    uint64_t cap = std::max<uint64_t>(1, kVerifyBytesInFlight / object_size);
    concurrency = static_cast<int>(std::min<uint64_t>(concurrency, cap));
  }
  std::mutex mu;
  VerifyResult r;
  std::atomic<uint64_t> next{0};
  std::vector<std::thread> workers;
  for (int t = 0; t < concurrency && static_cast<uint64_t>(t) < n; ++t) {
    workers.emplace_back([&] {
      for (uint64_t i = next++; i < n; i = next++) {
        std::string oid = oid_of(i);
        auto data = c.Read(oid);
        absl::Status s = data.ok() ? VerifyPattern(oid, *data) : data.status();
        std::lock_guard<std::mutex> l(mu);
        ++r.checked;
        if (!s.ok()) {
          ++r.mismatches;
          if (r.samples.size() < kMaxSamples) r.samples.push_back(s.ToString());
        }
      }
    });
  }
  for (auto& w : workers) w.join();
  return r;
}

absl::StatusOr<std::vector<std::string>> ReadOidFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read --oids file ", path));
  std::vector<std::string> oids;
  std::string line;
  while (std::getline(in, line)) {
    auto t = absl::StripAsciiWhitespace(line);
    if (!t.empty()) oids.emplace_back(t);
  }
  return oids;
}

}  // namespace msgr::bench

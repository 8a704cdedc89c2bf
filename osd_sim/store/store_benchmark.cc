// Segment log (ObjectStore) vs file-per-object (FileStore): whole-object writes of
// 4 KiB and 4 MiB, durable and buffered, from 1 and 8 threads. Each op returns once
// the write is durable per the mode (the log: Append + WaitDurable).
//
//   bazel run -c opt //osd_sim/store:store_benchmark -- --benchmark_min_time=1
// Group commit window: $STORE_BENCH_WINDOW_US (default: StoreOptions' 200 us).
// Directory: $STORE_BENCH_DIR (default /var/tmp/msgr-store-bench); use a real disk,
// not tmpfs, or fdatasync costs nothing.
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "msg/crc32c.h"
#include "osd_sim/store/file_store.h"
#include "osd_sim/store/object_store.h"

namespace msgr::store {
namespace {

constexpr int kOidsPerThread = 256;  // objects are overwritten round-robin

std::string BenchDir() {
  const char* d = std::getenv("STORE_BENCH_DIR");
  return d != nullptr ? d : "/var/tmp/msgr-store-bench";
}

struct Payload {
  explicit Payload(size_t len) : bytes(len, 'p') {
    for (size_t i = 0; i < len; ++i) bytes[i] = static_cast<char>(i * 131 + 7);
    crc = Crc32c(0, bytes.data(), bytes.size());
    iov = {bytes.data(), bytes.size()};
  }
  std::string bytes;
  uint32_t crc;
  struct iovec iov;
};

std::unique_ptr<ObjectStore> g_log;
std::unique_ptr<FileStore> g_files;

void Report(benchmark::State& state, size_t len) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * len));
  state.SetItemsProcessed(static_cast<int64_t>(state.iterations()));
}

template <Durability kMode>
void BM_Log(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  if (state.thread_index() == 0) {
    std::filesystem::remove_all(BenchDir());
    StoreOptions o;
    o.dir = BenchDir();
    o.mode = kMode;
    if (const char* w = std::getenv("STORE_BENCH_WINDOW_US")) {
      o.group_commit_window = absl::Microseconds(std::atoi(w));
    }
    auto s = ObjectStore::Open(o);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    g_log = std::move(*s);
  }
  Payload p(len);
  uint64_t n = 0;
  for (auto _ : state) {
    const std::string oid = "t" + std::to_string(state.thread_index()) + "-" +
                            std::to_string(n++ % kOidsPerThread);
    auto t = g_log->Append(oid, 0, &p.iov, 1, p.crc, kTruncate);
    if (!t.ok() || !g_log->WaitDurable(*t).ok()) {
      state.SkipWithError("append failed");
      break;
    }
  }
  Report(state, len);
  if (state.thread_index() == 0) {
    const StoreStats st = g_log->GetStats();
    if (kMode == Durability::kDurable && st.flushes > 0) {
      state.counters["appends_per_flush"] =
          static_cast<double>(st.flushed_appends) / static_cast<double>(st.flushes);
      state.counters["flush_us"] =
          static_cast<double>(st.flush_latency_sum_us) / static_cast<double>(st.flushes);
    }
    g_log.reset();
    std::filesystem::remove_all(BenchDir());
  }
}

template <Durability kMode>
void BM_FilePerObject(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  if (state.thread_index() == 0) {
    std::filesystem::remove_all(BenchDir());
    auto s = FileStore::Open(BenchDir(), kMode);
    if (!s.ok()) {
      state.SkipWithError(std::string(s.status().message()).c_str());
      return;
    }
    g_files = std::move(*s);
  }
  Payload p(len);
  uint64_t n = 0;
  for (auto _ : state) {
    const std::string oid = "t" + std::to_string(state.thread_index()) + "-" +
                            std::to_string(n++ % kOidsPerThread);
    if (!g_files->Put(oid, &p.iov, 1).ok()) {
      state.SkipWithError("put failed");
      break;
    }
  }
  Report(state, len);
  if (state.thread_index() == 0) {
    g_files.reset();
    std::filesystem::remove_all(BenchDir());
  }
}

void Args(benchmark::internal::Benchmark* b) {
  b->Arg(4 << 10)->Arg(4 << 20)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_Log, Durability::kDurable)->Apply(Args);
BENCHMARK_TEMPLATE(BM_FilePerObject, Durability::kDurable)->Apply(Args);
BENCHMARK_TEMPLATE(BM_Log, Durability::kBuffered)->Apply(Args);
BENCHMARK_TEMPLATE(BM_FilePerObject, Durability::kBuffered)->Apply(Args);

}  // namespace
}  // namespace msgr::store

// Segment log (ObjectStore) vs file-per-object (FileStore): whole-object writes of
// 4 KiB and 4 MiB, durable and buffered, from 1 and 8 threads. Each op returns once
// the write is durable per the mode (the log: Append + WaitDurable).
// BM_LogPipelined is what the OSD does: one thread appends with a DurableCallback and
// keeps up to range(1) appends in flight (256 and 1024 for 4 KiB, 16 for 4 MiB), so group commit
// batches them. BM_WriteFdatasync is the baseline: a plain pwrite + fdatasync loop on one
// preallocated-by-writing file (sequential, same sizes).
//
//   bazel run -c opt //osd_sim/store:store_benchmark -- --benchmark_min_time=1
// Group commit window: $STORE_BENCH_WINDOW_US (default: StoreOptions' 200 us).
// Directory: $STORE_BENCH_DIR (default /var/tmp/msgr-store-bench); use a real disk,
// not tmpfs, or fdatasync costs nothing.
#include <benchmark/benchmark.h>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <memory>
#include <string>

#include "msg/crc32c.h"
#include "osd_sim/store/file_store.h"
#include "osd_sim/store/object_store.h"

namespace msgr::store {
namespace {

constexpr int kOidsPerThread = 256;  // objects are overwritten round-robin

// kMemory keeps every object in RAM: cap the working set at 64 MiB per writer.
uint64_t OidCount(uint64_t want, size_t len, Durability mode) {
  if (mode != Durability::kMemory) return want;
  return std::max<uint64_t>(1, std::min<uint64_t>(want, (64ull << 20) / len));
}

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
  const uint64_t oids = OidCount(kOidsPerThread, len, kMode);
  uint64_t n = 0;
  for (auto _ : state) {
    const std::string oid = "t" + std::to_string(state.thread_index()) + "-" +
                            std::to_string(n++ % oids);
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

// One thread, many appends in flight: completions arrive on the flusher thread.
template <Durability kMode>
void BM_LogPipelined(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  const int depth = static_cast<int>(state.range(1));
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
  std::unique_ptr<ObjectStore> store = std::move(*s);
  Payload p(len);
  std::mutex mu;
  std::condition_variable cv;
  int inflight = 0;
  bool failed = false;
  const uint64_t oids = OidCount(4096, len, kMode);
  uint64_t n = 0;
  for (auto _ : state) {
    {
      std::unique_lock<std::mutex> l(mu);
      cv.wait(l, [&] { return inflight < depth; });
      ++inflight;
    }
    const std::string oid = "p-" + std::to_string(n++ % oids);
    auto t = store->Append(oid, 0, &p.iov, 1, p.crc, kTruncate, [&](absl::Status st) {
      std::lock_guard<std::mutex> l(mu);
      if (!st.ok()) failed = true;
      --inflight;
      cv.notify_one();
    });
    if (!t.ok()) {
      state.SkipWithError("append failed");
      break;
    }
  }
  {  // the timed region ends only when every append is durable
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return inflight == 0; });
  }
  if (failed) state.SkipWithError("durable callback reported an error");
  Report(state, len);
  const StoreStats st = store->GetStats();
  if (kMode == Durability::kDurable && st.flushes > 0) {
    state.counters["appends_per_flush"] =
        static_cast<double>(st.flushed_appends) / static_cast<double>(st.flushes);
    state.counters["flush_us"] =
        static_cast<double>(st.flush_latency_sum_us) / static_cast<double>(st.flushes);
  }
  store.reset();
  std::filesystem::remove_all(BenchDir());
}

// Baseline: sequential pwrite + fdatasync of the same record sizes into one file.
void BM_WriteFdatasync(benchmark::State& state) {
  const size_t len = static_cast<size_t>(state.range(0));
  std::filesystem::remove_all(BenchDir());
  std::filesystem::create_directories(BenchDir());
  const std::string path = BenchDir() + "/fdatasync.dat";
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    state.SkipWithError("open failed");
    return;
  }
  Payload p(len);
  constexpr uint64_t kWrap = 1ull << 30;  // rewrite the first GiB over and over
  uint64_t off = 0;
  for (auto _ : state) {
    if (::pwrite(fd, p.bytes.data(), len, static_cast<off_t>(off)) != static_cast<ssize_t>(len) ||
        ::fdatasync(fd) != 0) {
      state.SkipWithError("write/fdatasync failed");
      break;
    }
    off = (off + len) % kWrap;
  }
  Report(state, len);
  ::close(fd);
  std::filesystem::remove_all(BenchDir());
}

void Args(benchmark::internal::Benchmark* b) {
  b->Arg(4 << 10)->Arg(4 << 20)->Threads(1)->Threads(8)->UseRealTime()->Unit(benchmark::kMicrosecond);
}

BENCHMARK_TEMPLATE(BM_Log, Durability::kDurable)->Apply(Args);
BENCHMARK_TEMPLATE(BM_FilePerObject, Durability::kDurable)->Apply(Args);
BENCHMARK_TEMPLATE(BM_Log, Durability::kBuffered)->Apply(Args);
BENCHMARK_TEMPLATE(BM_FilePerObject, Durability::kBuffered)->Apply(Args);
BENCHMARK_TEMPLATE(BM_Log, Durability::kMemory)->Apply(Args);

void PipelinedArgs(benchmark::internal::Benchmark* b) {
  b->Args({4 << 10, 256})->Args({4 << 10, 1024})->Args({4 << 20, 16})->UseRealTime()->Unit(benchmark::kMicrosecond);
}
BENCHMARK_TEMPLATE(BM_LogPipelined, Durability::kDurable)->Apply(PipelinedArgs);
BENCHMARK_TEMPLATE(BM_LogPipelined, Durability::kBuffered)->Apply(PipelinedArgs);
BENCHMARK_TEMPLATE(BM_LogPipelined, Durability::kMemory)->Apply(PipelinedArgs);
BENCHMARK(BM_WriteFdatasync)
    ->Arg(4 << 10)
    ->Arg(4 << 20)
    ->UseRealTime()
    ->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace msgr::store

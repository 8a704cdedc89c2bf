// Ring-record throughput, tcp vs rdma (soft provider) vs single-thread memcpy, in one run:
// one client writes `--seconds` worth of records of each size into one OSD-side ring that a
// drainer thread consumes (RingConsumer, crc checked) and releases. Prints MB/s and
// records/s per backend and size, and the memcpy bandwidth measured in the same run.
// Then the round trip of one 4 KiB record at a time (write -> drained -> released ->
// OnRecordsAcked), p50/p99: the drainer busy-polls the ring, the writer busy-polls for its
// ack (Messenger::Poll on rdma; tcp's ack arrives on its io thread). What the messenger
// adds to an OSD write when both ends have a core to spin on.
//   bazel run -c opt //tests/msg/rdma:ring_throughput_benchmark [SECONDS [latency|TYPE:SIZE]]
// TYPE:SIZE (e.g. rdma:4096) runs only that throughput case, for profiling one case alone.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "msg/messenger.h"
#include "tests/msg/rdma/rdma_test_util.h"

namespace msgr::rdma {
namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

double MemcpyMBps(size_t size) {
  std::vector<char> a(size, 1), b(size);
  size_t bytes = 0;
  const double t0 = Now();
  while (Now() - t0 < 1.0) {
    std::memcpy(b.data(), a.data(), size);
    a[bytes % size] ^= b[(bytes + 1) % size];
    bytes += size;
  }
  return bytes / (Now() - t0) / 1e6;
}

// Counts acknowledged records (any thread).
class AckCounter : public testing::Recorder {
 public:
  void OnRecordsAcked(const ConnectionRef&, absl::Span<const RecordAck> acks) override {
    acked.fetch_add(acks.size(), std::memory_order_release);
  }
  std::atomic<uint64_t> acked{0};
};

void Run(const std::string& type, size_t size, double seconds, bool latency = false) {
  MessengerOptions so, co;
  so.type = co.type = type;
  so.name = EntityName{EntityType::kOsd, 0};
  co.name = EntityName{EntityType::kClient, 1};
  so.auth = co.auth = AuthConfig::None();
  so.ring_bytes = co.ring_bytes = 16u << 20;
  so.backend_options["rdma_device"] = co.backend_options["rdma_device"] = "soft";
  // One fixed ring: the drainer below drains the first ring the session attaches, so a
  // ring that grows (rdma rings start at rdma_ring_min_kb and are replaced by larger ones
  // under load) would leave it polling the old one while the writer waits for credit
  // (this benchmark measured 47 records/s that way).
  so.backend_options["rdma_ring_min_kb"] = std::to_string(so.ring_bytes >> 10);
  if (const char* e = getenv("CQSPIN")) co.backend_options["rdma_cq_spin_us"] = e;
  testing::Recorder sd;
  AckCounter cd;
  auto server = Messenger::Create(so, &sd);
  auto client = Messenger::Create(co, &cd);
  if (!server.ok() || !client.ok()) {
    std::printf("%s: cannot create messengers\n", type.c_str());
    return;
  }
  auto addr = (*server)->Bind("127.0.0.1:0");
  ConnectOptions opts;
  opts.want_ring = true;
  auto conn = (*client)->Connect(*addr, opts);
  if (!sd.WaitRings(1)) return;
  auto [sconn, ring] = sd.ring(0);
  // A drainer that does not keep copies (the test helper does): count only.
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> got{0};
  std::thread drain([&, sconn = sconn, ring = ring] {
    RingConsumer c(ring->base(), ring->bytes());
    RecordView v;
    std::string err;
    while (!stop) {
      auto r = c.Next(&v, &err);
      if (r == RingConsumer::Poll::kRecord) {
        c.Release(v.end_position);
        sconn->ReleaseRing(v.end_position, {});
        got++;
      } else if (r == RingConsumer::Poll::kCorrupt) {
        std::printf("corrupt: %s\n", err.c_str());
        return;
      }
    }
  });
  const std::string payload(size, 'x');
  RecordDesc d;
  d.oid = "bench.object";
  uint64_t sent = 0;
  if (latency) {
    std::vector<double> us, write_us;
    const double t_end = Now() + seconds;
    while (Now() < t_end) {
      d.tid = ++sent;
      const double t = Now();
      if (!(*conn)->WriteRecord(d, payload, absl::Seconds(10)).ok()) break;
      write_us.push_back((Now() - t) * 1e6);
      while (cd.acked.load(std::memory_order_acquire) < sent) {
        if (!(*client)->Poll()) std::this_thread::yield();
      }
      us.push_back((Now() - t) * 1e6);
    }
    std::sort(us.begin(), us.end());
    std::sort(write_us.begin(), write_us.end());
    if (!us.empty()) {
      std::printf("%-5s %8zu B one in flight: p50 %7.1f us  p99 %7.1f us (%zu round trips; "
                  "WriteRecord itself p50 %.1f us)\n",
                  type.c_str(), size, us[us.size() / 2], us[us.size() * 99 / 100], us.size(),
                  write_us[write_us.size() / 2]);
    }
    stop = true;
    drain.join();
    (*client)->Shutdown();
    (*server)->Shutdown();
    return;
  }
  const double t0 = Now();
  while (Now() - t0 < seconds) {
    d.tid = ++sent;
    if (!(*conn)->WriteRecord(d, payload, absl::Seconds(10)).ok()) break;
  }
  while (got < sent && Now() - t0 < seconds + 10) std::this_thread::yield();
  const double dt = Now() - t0;
  stop = true;
  drain.join();
  std::printf("%-5s %8zu B records: %9.1f MB/s %10.0f records/s (%llu records)\n", type.c_str(),
              size, got * size / dt / 1e6, got / dt, static_cast<unsigned long long>(got.load()));
  (*client)->Shutdown();
  (*server)->Shutdown();
}

}  // namespace
}  // namespace msgr::rdma

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);  // as the daemons do
  const double seconds = argc > 1 ? std::atof(argv[1]) : 2.0;
  const std::string only = argc > 2 ? argv[2] : "";
  if (!only.empty() && only != "latency") {
    const size_t colon = only.find(':');
    if (colon == std::string::npos) {
      std::fprintf(stderr, "usage: %s [SECONDS [latency|TYPE:SIZE]]\n", argv[0]);
      return 2;
    }
    msgr::rdma::Run(only.substr(0, colon), std::stoul(only.substr(colon + 1)), seconds);
    return 0;
  }
  for (size_t size : {size_t{4096}, size_t{4} << 20}) {
    if (only == "latency") break;
    std::printf("memcpy %8zu B: %9.1f MB/s (single thread)\n", size,
                msgr::rdma::MemcpyMBps(size));
    for (const char* t : {"tcp", "rdma"}) msgr::rdma::Run(t, size, seconds);
  }
  for (const char* t : {"tcp", "rdma"}) msgr::rdma::Run(t, 4096, seconds, /*latency=*/true);
  return 0;
}

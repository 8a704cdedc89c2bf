// Ring-record throughput of the TCP messenger vs a raw TCP socket over loopback sending
// the same bytes, at 4 KiB (per-frame overhead), 64 KiB (mixed) and 4 MiB (bulk); and
// the latency of one 4 KiB record at a time (write -> the receiver's poller releases it ->
// OnRecordsAcked), p50/p99 in the counters, vs a raw TCP ping-pong of 4 KiB out and a
// 48-byte answer back (the size of a CREDIT frame), blocking reads on both ends.
//
//   bazel run -c opt //tests/msg/tcp:tcp_benchmark -- --benchmark_min_time=0.5
//
// Each case sets up its own messengers, so google-benchmark's default (min_time 0.5 s per
// case, several growing runs) takes ~15 s for all six cases; --benchmark_min_time=2 about
// a minute (steadier numbers on a noisy machine). Compare the messenger with raw TCP in
// the same run: the ratio is meaningful, absolute numbers move with machine load.
#include <arpa/inet.h>
#include <benchmark/benchmark.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

// A tcp server messenger ("osd.0", records drained by `sd`'s drainer) on loopback and a
// client messenger with a lossless ring session to it.
struct MessengerPair {
  std::unique_ptr<Messenger> server, client;
  ConnectionRef conn;
};
MessengerPair ConnectPair(testing::RecordingDispatcher* sd, Dispatcher* cd,
                          size_t ring_bytes = 0) {
  sd->keep_records = false;
  MessengerPair p;
  MessengerOptions so;
  so.name = EntityName{EntityType::kOsd, 0};
  so.auth = AuthConfig::None();
  if (ring_bytes != 0) so.ring_bytes = ring_bytes;
  p.server = std::move(*Messenger::Create(so, sd));
  const std::string addr = *p.server->Bind("127.0.0.1:0");
  MessengerOptions co;
  co.name = EntityName{EntityType::kClient, 1};
  co.auth = AuthConfig::None();
  p.client = std::move(*Messenger::Create(co, cd));
  p.conn = *p.client->Connect(addr, ConnectOptions{Policy::Lossless(), true});
  return p;
}

void BM_MessengerRingRecords(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const size_t size = static_cast<size_t>(state.range(0));
  testing::RecordingDispatcher sd, cd;
  MessengerPair p = ConnectPair(&sd, &cd, 32 << 20);
  const ConnectionRef& conn = p.conn;
  const std::string payload(size, 'x');
  uint64_t tid = 0;
  for (auto _ : state) {
    absl::Status s =
        conn->WriteRecord(RecordDesc{"bench.obj", ++tid, 0, 0}, payload, absl::Seconds(10));
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  // Count only what has landed in the ring.
  while (sd.drainer() == nullptr || sd.drainer()->Count() < tid) std::this_thread::yield();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  sd.StopDrainers();
}
BENCHMARK(BM_MessengerRingRecords)->Arg(4 << 10)->Arg(64 << 10)->Arg(4 << 20)->UseRealTime();

// Latency percentiles (us) of `lat_ns` as benchmark counters.
void ReportLatency(benchmark::State& state, std::vector<int64_t>* lat_ns) {
  if (lat_ns->empty()) return;
  std::sort(lat_ns->begin(), lat_ns->end());
  auto pct = [&](double p) {
    return static_cast<double>((*lat_ns)[static_cast<size_t>(p * (lat_ns->size() - 1))]) / 1e3;
  };
  state.counters["p50_us"] = pct(0.50);
  state.counters["p99_us"] = pct(0.99);
}

// Counts acknowledged records; a waiter spins (yielding) like the client's SpinWait for
// up to 50 us, then sleeps.
class AckWaiter : public testing::RecordingDispatcher {
 public:
  void OnRecordsAcked(const ConnectionRef&, absl::Span<const RecordAck> acks) override {
    acked_.fetch_add(acks.size());
    std::lock_guard<std::mutex> l(m_);
    cv_.notify_all();
  }
  void WaitAcked(uint64_t n) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
    while (acked_.load() < n && std::chrono::steady_clock::now() < until) std::this_thread::yield();
    std::unique_lock<std::mutex> l(m_);
    cv_.wait(l, [&] { return acked_.load() >= n; });
  }

 private:
  std::atomic<uint64_t> acked_{0};
  std::mutex m_;
  std::condition_variable cv_;
};

void BM_MessengerRecordLatency(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const size_t size = static_cast<size_t>(state.range(0));
  testing::RecordingDispatcher sd;
  AckWaiter cd;
  MessengerPair p = ConnectPair(&sd, &cd);
  const ConnectionRef& conn = p.conn;
  const std::string payload(size, 'x');
  uint64_t tid = 0;
  // The first record waits for the handshake; not timed.
  if (!conn->WriteRecord(RecordDesc{"bench.obj", ++tid, 0, 0}, payload, absl::Seconds(10)).ok()) {
    state.SkipWithError("first record failed");
    return;
  }
  cd.WaitAcked(tid);
  std::vector<int64_t> lat;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status s =
        conn->WriteRecord(RecordDesc{"bench.obj", ++tid, 0, 0}, payload, absl::Seconds(10));
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    cd.WaitAcked(tid);
    lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count());
  }
  ReportLatency(state, &lat);
  sd.StopDrainers();
}
BENCHMARK(BM_MessengerRecordLatency)->Arg(4 << 10)->UseRealTime();

bool ReadFull(int fd, char* p, size_t n) {
  while (n > 0) {
    ssize_t r = read(fd, p, n);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

// A loopback listener (`lfd`, on `addr`) and a TCP_NODELAY socket to connect to it.
struct RawSockets {
  int lfd = -1;
  sockaddr_in addr{};
  int fd = -1;
  // After the receiver's thread is done with lfd.
  void Close() {
    close(fd);
    close(lfd);
  }
};
RawSockets Listen() {
  RawSockets r;
  r.lfd = socket(AF_INET, SOCK_STREAM, 0);
  r.addr.sin_family = AF_INET;
  r.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(r.lfd, reinterpret_cast<sockaddr*>(&r.addr), sizeof(r.addr));
  listen(r.lfd, 1);
  socklen_t len = sizeof(r.addr);
  getsockname(r.lfd, reinterpret_cast<sockaddr*>(&r.addr), &len);
  r.fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(r.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return r;
}

void BM_RawTcpPingPong(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  constexpr size_t kAnswer = 48;
  RawSockets sk = Listen();
  const int lfd = sk.lfd, fd = sk.fd;
  std::thread rx([&] {
    int peer = accept(lfd, nullptr, nullptr);
    int one = 1;
    setsockopt(peer, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    std::string buf(size, '\0'), answer(kAnswer, 'a');
    while (ReadFull(peer, buf.data(), size)) {
      if (write(peer, answer.data(), kAnswer) != static_cast<ssize_t>(kAnswer)) break;
    }
    close(peer);
  });
  connect(fd, reinterpret_cast<sockaddr*>(&sk.addr), sizeof(sk.addr));
  const std::string payload(size, 'x');
  std::string answer(kAnswer, '\0');
  std::vector<int64_t> lat;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (write(fd, payload.data(), size) != static_cast<ssize_t>(size) ||
        !ReadFull(fd, answer.data(), kAnswer)) {
      state.SkipWithError("raw ping-pong failed");
      break;
    }
    lat.push_back(std::chrono::duration_cast<std::chrono::nanoseconds>(
                      std::chrono::steady_clock::now() - t0)
                      .count());
  }
  shutdown(fd, SHUT_WR);
  rx.join();
  sk.Close();
  ReportLatency(state, &lat);
}
BENCHMARK(BM_RawTcpPingPong)->Arg(4 << 10)->UseRealTime();

void BM_RawTcp(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  RawSockets sk = Listen();
  const int lfd = sk.lfd, fd = sk.fd;
  std::atomic<uint64_t> received{0};
  std::thread rx([&] {
    int peer = accept(lfd, nullptr, nullptr);
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = read(peer, buf.data(), buf.size());
      if (n <= 0) break;
      received += n;
    }
    close(peer);
  });
  connect(fd, reinterpret_cast<sockaddr*>(&sk.addr), sizeof(sk.addr));
  const std::string payload(size, 'x');
  for (auto _ : state) {
    size_t off = 0;
    while (off < size) {
      ssize_t n = write(fd, payload.data() + off, size - off);
      if (n <= 0) break;
      off += n;
    }
  }
  shutdown(fd, SHUT_WR);
  rx.join();
  sk.Close();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_RawTcp)->Arg(4 << 10)->Arg(64 << 10)->Arg(4 << 20)->UseRealTime();

}  // namespace
}  // namespace msgr

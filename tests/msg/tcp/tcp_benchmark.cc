// Ring-record throughput of the TCP messenger vs a raw TCP socket over loopback sending
// the same bytes, at 4 KiB (per-frame overhead), 64 KiB (mixed) and 4 MiB (bulk).
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

#include <atomic>
#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

void BM_MessengerRingRecords(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const size_t size = static_cast<size_t>(state.range(0));
  testing::RecordingDispatcher sd, cd;
  sd.keep_records = false;
  MessengerOptions so;
  so.name = EntityName{EntityType::kOsd, 0};
  so.auth = AuthConfig::None();
  so.ring_bytes = 32 << 20;
  auto server = std::move(*Messenger::Create(so, &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  MessengerOptions co;
  co.name = EntityName{EntityType::kClient, 1};
  co.auth = AuthConfig::None();
  auto client = std::move(*Messenger::Create(co, &cd));
  auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), true});
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

void BM_RawTcp(benchmark::State& state) {
  const size_t size = static_cast<size_t>(state.range(0));
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(lfd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  listen(lfd, 1);
  socklen_t len = sizeof(a);
  getsockname(lfd, reinterpret_cast<sockaddr*>(&a), &len);
  std::atomic<uint64_t> received{0};
  std::thread rx([&] {
    int fd = accept(lfd, nullptr, nullptr);
    std::string buf(1 << 20, '\0');
    for (;;) {
      ssize_t n = read(fd, buf.data(), buf.size());
      if (n <= 0) break;
      received += n;
    }
    close(fd);
  });
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
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
  close(fd);
  close(lfd);
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
}
BENCHMARK(BM_RawTcp)->Arg(4 << 10)->Arg(64 << 10)->Arg(4 << 20)->UseRealTime();

}  // namespace
}  // namespace msgr

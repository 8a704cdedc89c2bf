// ms_mode secure vs crc over loopback in one process: ring-record and message throughput
// of the TCP messenger at 4 KiB and 64 KiB (arg 1: 0 crc, 1 secure aes-128-gcm, 2 secure
// aes-256-gcm). Compare the modes within one run; absolute figures move with load.
//
//   bazel run -c opt //tests/msg/tcp:secure_benchmark -- --benchmark_min_time=1
#include <benchmark/benchmark.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <string>
#include <thread>

#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

MessengerOptions Options(EntityName name, int64_t mode) {
  MessengerOptions o;
  o.name = name;
  o.auth = AuthConfig{AuthConfig::Mode::kSecret, "bench-key"};
  o.ms_mode = mode == 0 ? "crc" : "secure";
  o.ms_secure_cipher = mode == 2 ? "aes-256-gcm" : "aes-128-gcm";
  o.ring_bytes = 32 << 20;
  return o;
}

void SetLabel(benchmark::State& state) {
  const int64_t m = state.range(1);
  state.SetLabel(m == 0 ? "crc" : m == 1 ? "secure aes-128-gcm" : "secure aes-256-gcm");
}

void BM_RingRecords(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const size_t size = static_cast<size_t>(state.range(0));
  testing::RecordingDispatcher sd, cd;
  sd.keep_records = false;
  auto server = std::move(*Messenger::Create(Options({EntityType::kOsd, 0}, state.range(1)), &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  auto client =
      std::move(*Messenger::Create(Options({EntityType::kClient, 1}, state.range(1)), &cd));
  auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), true});
  const std::string payload(size, 'x');
  uint64_t tid = 0;
  for (auto _ : state) {
    absl::Status s =
        conn->WriteRecord(RecordDesc{"bench.obj", ++tid, 0, 0}, payload, absl::Seconds(10));
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
  }
  while (sd.drainer() == nullptr || sd.drainer()->Count() < tid) std::this_thread::yield();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  SetLabel(state);
  sd.StopDrainers();
}
BENCHMARK(BM_RingRecords)
    ->ArgsProduct({{4 << 10, 64 << 10}, {0, 1, 2}})
    ->UseRealTime();

class CountingDispatcher : public testing::RecordingDispatcher {
 public:
  void OnMessage(const ConnectionRef&, Message) override { n.fetch_add(1); }
  std::atomic<uint64_t> n{0};
};

void BM_Messages(benchmark::State& state) {
  spdlog::set_level(spdlog::level::warn);
  const size_t size = static_cast<size_t>(state.range(0));
  CountingDispatcher sd;
  testing::RecordingDispatcher cd;
  auto server = std::move(*Messenger::Create(Options({EntityType::kOsd, 0}, state.range(1)), &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  auto client =
      std::move(*Messenger::Create(Options({EntityType::kClient, 1}, state.range(1)), &cd));
  auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), false});
  const std::string payload(size, 'x');
  uint64_t sent = 0;
  for (auto _ : state) {
    absl::Status s = conn->Send(Message{1, payload});
    if (!s.ok()) state.SkipWithError(std::string(s.message()).c_str());
    ++sent;
  }
  while (sd.n.load() < sent) std::this_thread::yield();
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * size));
  SetLabel(state);
}
BENCHMARK(BM_Messages)->ArgsProduct({{4 << 10, 64 << 10}, {0, 1, 2}})->UseRealTime();

}  // namespace
}  // namespace msgr

// The TCP backend batches its standalone control frames: a stream of N data frames is
// acknowledged (and its ring space credited) with far fewer than N ACK/CREDIT frames,
// while every frame still arrives exactly once, in order. The receiver writes nothing
// but control frames here, so its bytes_sent / 48 bounds how many it wrote.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "msg/frame.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

using testing::RecordingDispatcher;

struct Pair {
  std::unique_ptr<Messenger> server, client;
  ConnectionRef conn;
};

Pair Connect(RecordingDispatcher* sd, RecordingDispatcher* cd, bool want_ring) {
  Pair p;
  MessengerOptions so;
  so.name = EntityName{EntityType::kOsd, 0};
  so.auth = AuthConfig::None();
  so.ring_bytes = 1 << 20;
  p.server = std::move(*Messenger::Create(so, sd));
  const std::string addr = *p.server->Bind("127.0.0.1:0");
  MessengerOptions co;
  co.name = EntityName{EntityType::kClient, 1};
  co.auth = AuthConfig::None();
  p.client = std::move(*Messenger::Create(co, cd));
  p.conn = *p.client->Connect(addr, ConnectOptions{Policy::Lossless(), want_ring});
  return p;
}

TEST(TcpBatchingTest, MessageStreamGetsFewAcks) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  Pair p = Connect(&sd, &cd, /*want_ring=*/false);
  constexpr int kMsgs = 20000;
  for (int i = 0; i < kMsgs; ++i) ASSERT_TRUE(p.conn->Send(Message{7, absl::StrCat(i)}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= kMsgs; }, std::chrono::seconds(30)));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));  // late acks, duplicates
  sd.Locked([&] {
    ASSERT_EQ(sd.messages.size(), static_cast<size_t>(kMsgs));
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(sd.messages[i].payload, absl::StrCat(i));
  });
  // One ACK per frame would be kMsgs frames; batching (32 frames or 200 us) gives a few
  // hundred. The bound leaves room for a slow, loaded machine (1 s of 200 us timers).
  const uint64_t frames = p.server->counters().bytes_sent / kFrameHeaderBytes;
  EXPECT_LT(frames, kMsgs / 4u) << "server wrote " << frames << " control frames";
  EXPECT_GT(frames, 0u) << "the stream must be acknowledged at all";
}

TEST(TcpBatchingTest, RecordStreamGetsFewAcksAndCredits) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  Pair p = Connect(&sd, &cd, /*want_ring=*/true);
  constexpr int kRecs = 4000;
  const std::string payload(4096, 'r');
  for (int i = 0; i < kRecs; ++i) {
    ASSERT_TRUE(p.conn
                    ->WriteRecord(RecordDesc{"obj", static_cast<uint64_t>(i), 0, 0}, payload,
                                  absl::Seconds(10))
                    .ok());
  }
  for (int t = 0; t < 3000 && (sd.drainer() == nullptr || sd.drainer()->Count() < kRecs); ++t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  auto got = sd.drainer()->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(kRecs));
  for (int i = 0; i < kRecs; ++i) {
    ASSERT_EQ(got[i].tid, static_cast<uint64_t>(i));
    ASSERT_TRUE(got[i].payload == payload) << "record " << i;
  }
  // The drainer releases after every record; one ACK + one CREDIT per record would be
  // 2 * kRecs frames.
  const uint64_t frames = p.server->counters().bytes_sent / kFrameHeaderBytes;
  EXPECT_LT(frames, kRecs / 2u) << "server wrote " << frames << " control frames";
}

}  // namespace
}  // namespace msgr

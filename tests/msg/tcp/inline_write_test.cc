// The TCP backend's inline writer (msg/tcp/writer.cc): a thread that queues a frame or
// releases ring space writes it itself when the socket is idle, and otherwise leaves it
// to the writer that owns the socket or to the io thread. Many threads share one lossless
// connection here while both ends inject socket failures, and records are large enough
// that the socket sometimes takes only part of a batch (the io thread writes the rest):
// every message and record still arrives exactly once, in each sender's order, and every
// record is acknowledged exactly once.
#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "msg/messenger.h"
#include "msg/tcp/tcp_connection.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

using testing::RecordingDispatcher;

constexpr int kSenders = 6;
constexpr int kPerSender = 300;  // messages and records each (sender 0: kBigRecords)
constexpr int kBigRecords = 24;
constexpr size_t kBigRecordBytes = 3 << 20;
int Count(int sender) { return sender == 0 ? kBigRecords : kPerSender; }
size_t RecordBytes(int sender) { return sender == 0 ? kBigRecordBytes : 1000u + 100u * sender; }

// "sender:index" -> (sender, index)
std::pair<int, int> ParseTag(const std::string& s) {
  std::vector<std::string> parts = absl::StrSplit(s.substr(0, s.find('|')), ':');
  int a = -1, b = -1;
  if (parts.size() == 2) {
    (void)absl::SimpleAtoi(parts[0], &a);
    (void)absl::SimpleAtoi(parts[1], &b);
  }
  return {a, b};
}

TEST(TcpInlineWriteTest, ConcurrentSendersWithFaultsExactlyOnceInOrder) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  MessengerOptions so;
  so.name = EntityName{EntityType::kOsd, 0};
  so.auth = AuthConfig::None();
  so.ring_bytes = 8 << 20;
  so.inject_socket_failures = 97;  // the credit writer (the drainer's ReleaseRing) faults too
  auto server = std::move(*Messenger::Create(so, &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  MessengerOptions co;
  co.name = EntityName{EntityType::kClient, 1};
  co.auth = AuthConfig::None();
  co.inject_socket_failures = 61;
  auto client = std::move(*Messenger::Create(co, &cd));
  ConnectionRef conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), true});
  auto* tcp_conn = dynamic_cast<tcp::TcpConnection*>(conn.get());
  ASSERT_NE(tcp_conn, nullptr);

  std::vector<std::thread> senders;
  std::vector<std::string> errors(kSenders);
  for (int s = 0; s < kSenders; ++s) {
    senders.emplace_back([&, s] {
      // Sender 0 writes 3 MiB records: more than a loopback socket takes at once, so
      // inline writes of them are finished by the io thread.
      const size_t record_bytes = RecordBytes(s);
      for (int i = 0; i < Count(s); ++i) {
        const std::string tag = absl::StrCat(s, ":", i);
        absl::Status st = conn->Send(Message{7, tag});
        if (st.ok()) {
          std::string payload = absl::StrCat(tag, "|");
          payload.resize(record_bytes, static_cast<char>('a' + s));
          st = conn->WriteRecord(
              RecordDesc{absl::StrCat("obj.", s), static_cast<uint64_t>(s * 1000000 + i), 0, 0},
              payload, absl::Seconds(30));
        }
        if (!st.ok()) {
          errors[s] = st.ToString();
          return;
        }
      }
    });
  }
  for (auto& t : senders) t.join();
  for (int s = 0; s < kSenders; ++s) EXPECT_EQ(errors[s], "") << "sender " << s;

  constexpr size_t kTotal = (kSenders - 1) * kPerSender + kBigRecords;
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= kTotal; }, std::chrono::seconds(60)))
      << sd.Locked([&] { return sd.messages.size(); }) << " of " << kTotal << " messages";
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kTotal; }, std::chrono::seconds(60)))
      << cd.Locked([&] { return cd.record_acks.size(); }) << " of " << kTotal << " record acks";
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // late duplicates, if any

  // Messages: exactly once, each sender's in its order.
  sd.Locked([&] {
    ASSERT_EQ(sd.messages.size(), kTotal);
    std::vector<int> next(kSenders, 0);
    for (const Message& m : sd.messages) {
      auto [s, i] = ParseTag(m.payload);
      ASSERT_TRUE(s >= 0 && s < kSenders) << m.payload;
      ASSERT_EQ(i, next[s]) << "sender " << s << " message out of order or repeated";
      next[s]++;
    }
  });
  // Records: exactly once, each sender's in its order, bytes intact.
  ASSERT_NE(sd.drainer(), nullptr);
  ASSERT_EQ(sd.drainer()->Error(), "");
  auto records = sd.drainer()->Records();
  ASSERT_EQ(records.size(), kTotal);
  std::vector<int> next(kSenders, 0);
  for (const auto& r : records) {
    auto [s, i] = ParseTag(r.payload);
    ASSERT_TRUE(s >= 0 && s < kSenders) << r.oid;
    ASSERT_EQ(r.oid, absl::StrCat("obj.", s));
    ASSERT_EQ(r.tid, static_cast<uint64_t>(s * 1000000 + i));
    ASSERT_EQ(i, next[s]) << "sender " << s << " record out of order or repeated";
    next[s]++;
    ASSERT_EQ(r.payload.size(), RecordBytes(s));
    ASSERT_EQ(r.payload.back(), static_cast<char>('a' + s));
  }
  // Acknowledgements: each record exactly once, kOk.
  cd.Locked([&] {
    ASSERT_EQ(cd.record_acks.size(), kTotal);
    std::set<uint64_t> tids;
    for (const auto& a : cd.record_acks) {
      EXPECT_EQ(a.code, absl::StatusCode::kOk);
      EXPECT_TRUE(tids.insert(a.tid).second) << "tid " << a.tid << " acknowledged twice";
    }
  });
  // The faults happened, and the inline path was used.
  EXPECT_GT(client->counters().reconnects, 0u);
  EXPECT_GT(tcp_conn->inline_writes(), 0u);
  std::cout << "inline writes " << tcp_conn->inline_writes() << ", finished by the io thread "
            << tcp_conn->inline_handoffs() << ", reconnects " << client->counters().reconnects
            << ", resends " << client->counters().resends << "\n";
}

}  // namespace
}  // namespace msgr

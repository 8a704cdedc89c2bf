// Record notifications (msg/rdma/ring_notifier.h, msg/PROTOCOL.md "Record notifications"),
// on the soft provider: an OSD-type messenger with one notifier, a client that writes
// records, and the test in the poller's place -- it polls the notifier, drains the ring and
// releases what it drained.
#include <gtest/gtest.h>

#include <poll.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "msg/messenger.h"
#include "msg/rdma/rdma_stats.h"
#include "msg/ring/ring.h"
#include "tests/msg/rdma/rdma_test_util.h"

namespace msgr::rdma {
namespace {

using testing::Recorder;

MessengerOptions Options(EntityType type, uint64_t id) {
  MessengerOptions o;
  o.type = "rdma";
  o.name = EntityName{type, id};
  o.auth.mode = AuthConfig::Mode::kSecret;
  o.auth.secret = "k3y";
  o.backend_options["rdma_device"] = "soft";
  o.ring_bytes = 4u << 20;  // fixed: no resize in these tests
  o.backend_options["rdma_ring_min_kb"] = "4096";
  return o;
}

// The server (an OSD with one poller's notifier), a client with a ring session, and the
// test's own drain of the server's ring.
struct Rig {
  Recorder server_d, client_d;
  std::unique_ptr<Messenger> server, client;
  ConnectionRef conn, sconn;
  std::shared_ptr<RecvRing> ring;
  std::unique_ptr<RingConsumer> consumer;

  void Start(bool client_announces = true, int inject_socket_failures = 0) {
    MessengerOptions so = Options(EntityType::kOsd, 0);
    so.backend_options["rdma_ring_notifiers"] = "1";
    auto s = Messenger::Create(so, &server_d);
    ASSERT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    auto addr = server->Bind("127.0.0.1:0");
    ASSERT_TRUE(addr.ok()) << addr.status();
    MessengerOptions co = Options(EntityType::kClient, 1);
    if (!client_announces) co.backend_options["rdma_record_imm"] = "0";
    co.inject_socket_failures = inject_socket_failures;
    auto c = Messenger::Create(co, &client_d);
    ASSERT_TRUE(c.ok()) << c.status();
    client = std::move(*c);
    ConnectOptions opts;
    opts.want_ring = true;
    auto cn = client->Connect(*addr, opts);
    ASSERT_TRUE(cn.ok()) << cn.status();
    conn = *cn;
    ASSERT_TRUE(server_d.WaitRings(1));
    std::tie(sconn, ring) = server_d.ring(0);
    for (int i = 0; i < 1000 && !conn->is_connected(); ++i) absl::SleepFor(absl::Milliseconds(5));
    ASSERT_TRUE(conn->is_connected());
    consumer = std::make_unique<RingConsumer>(ring->base(), ring->bytes(), ring->first_seq());
  }
  ~Rig() {
    if (client) client->Shutdown();
    if (server) server->Shutdown();
  }
  void Write(uint64_t tid) {
    const std::string oid = "obj." + std::to_string(tid);
    RecordDesc d;
    d.oid = oid;
    d.tid = tid;
    ASSERT_TRUE(conn->WriteRecord(d, std::string(4096, static_cast<char>('a' + tid % 26)),
                                  absl::Seconds(10))
                    .ok());
  }
  // Polls the notifier (as the poller does) until it has reported the ring `n` times in
  // all, or 5 s; returns how many times it did.
  size_t PollUntil(size_t n) {
    size_t reported = 0;
    const absl::Time deadline = absl::Now() + absl::Seconds(5);
    RecvRing* out[16];
    while (reported < n && absl::Now() < deadline) {
      const size_t got = ring->notifier()->Poll(out, 16);
      for (size_t i = 0; i < got; ++i) {
        EXPECT_EQ(out[i], ring.get());
        ++reported;
      }
      if (got == 0) absl::SleepFor(absl::Microseconds(200));
    }
    return reported;
  }
  // Takes up to `max` published records from the ring; the end position of the last.
  size_t Drain(size_t max, uint64_t* end) {
    size_t n = 0;
    RecordView v;
    std::string err;
    while (n < max && consumer->Next(&v, &err) == RingConsumer::Poll::kRecord) {
      *end = v.end_position;
      ++n;
    }
    EXPECT_TRUE(err.empty()) << err;
    return n;
  }
  void Release(uint64_t end) {
    consumer->Release(end);
    sconn->ReleaseRing(end, {});
  }
  RdmaStats ClientStats() { return *RdmaStatsOf(*client); }
  RdmaStats ServerStats() { return *RdmaStatsOf(*server); }
};

// Each record's arrival is one report of its ring by the notifier (no look at the ring
// needed to learn it), and the session's messages reach the server only through the
// notifier's Poll, on the caller's thread.
TEST(RingNotifier, EachRecordIsReportedAndMessagesAreDeliveredByItsPoll) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start());
  ASSERT_NE(rig.ring->notifier(), nullptr);
  EXPECT_TRUE(rig.ring->announced());
  EXPECT_EQ(rig.ring->notifier()->index(), 0);
  constexpr uint64_t kRecords = 40;  // more than the client's 16 imm credits, one at a time
  for (uint64_t tid = 1; tid <= kRecords; ++tid) {
    ASSERT_NO_FATAL_FAILURE(rig.Write(tid));
    ASSERT_EQ(rig.PollUntil(1), 1u) << "record " << tid << " was not reported";
    uint64_t end = 0;
    ASSERT_EQ(rig.Drain(10, &end), 1u);
    rig.Release(end);
    ASSERT_TRUE(rig.client_d.WaitAcks(tid));
  }
  EXPECT_EQ(rig.ClientStats().record_imms_sent, kRecords);
  EXPECT_EQ(rig.ClientStats().record_imms_owed, 0u);
  EXPECT_EQ(rig.ServerStats().record_imms_received, kRecords);
  EXPECT_GT(rig.ServerStats().imm_count_writes, 0u) << "the credits came back by the count";
  EXPECT_EQ(rig.ServerStats().doorbells_received, 0u);

  Message m;
  m.type = 77;
  m.payload = "through the notifier";
  ASSERT_TRUE(rig.conn->Send(m).ok());
  EXPECT_FALSE(rig.server_d.WaitMessages(1, absl::Milliseconds(300)))
      << "delivered without the notifier being polled";
  RecvRing* out[4];
  for (int i = 0; i < 500 && rig.server_d.messages().empty(); ++i) {
    EXPECT_EQ(rig.ring->notifier()->Poll(out, 4), 0u) << "a message is not a record";
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(rig.server_d.messages().size(), 1u);
  EXPECT_EQ(rig.server_d.messages()[0].payload, "through the notifier");
}

// With every imm credit in flight the client writes on without announcing. Once the OSD's
// notifier has re-posted the receives (its count, written at once when three quarters of
// the credits wait, tells the client), the client announces its newest record still
// unreleased: records written without their own imm are never left unreported.
TEST(RingNotifier, RecordsBeyondTheCreditsAreAnnouncedWhenCreditsComeBack) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start());
  constexpr uint64_t kRecords = 24;
  for (uint64_t tid = 1; tid <= kRecords; ++tid) ASSERT_NO_FATAL_FAILURE(rig.Write(tid));
  EXPECT_EQ(rig.ClientStats().record_imms_sent, 16u) << "half the 32 receives";
  EXPECT_EQ(rig.ClientStats().record_imms_owed, 8u);
  // Nothing released yet, and the 16 imms not yet polled: no count to write, nothing
  // more announced.
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(rig.ClientStats().record_imms_sent, 16u);
  EXPECT_EQ(rig.ServerStats().imm_count_writes, 0u);
  // Polling them re-posts their receives; the count goes out and the owed one comes.
  EXPECT_EQ(rig.PollUntil(17), 17u) << "the owed announcement never came";
  EXPECT_EQ(rig.ClientStats().record_imms_sent, 17u);
  EXPECT_EQ(rig.ServerStats().imm_count_writes, 1u);
  uint64_t end = 0;
  ASSERT_EQ(rig.Drain(100, &end), kRecords);
  rig.Release(end);
  ASSERT_TRUE(rig.client_d.WaitAcks(kRecords));
}

// A client that does not announce (rdma_record_imm=0) is served as before: its ring is
// not announced (the poller keeps looking at it and asks for doorbells), and its session's
// receives still come through the notifier.
TEST(RingNotifier, ClientThatDoesNotAnnounceIsServedThroughTheNotifier) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*client_announces=*/false));
  ASSERT_NE(rig.ring->notifier(), nullptr);
  EXPECT_FALSE(rig.ring->announced());
  ASSERT_NO_FATAL_FAILURE(rig.Write(1));
  uint64_t end = 0;
  for (int i = 0; i < 500 && rig.Drain(1, &end) == 0; ++i) absl::SleepFor(absl::Milliseconds(2));
  ASSERT_NE(end, 0u) << "the record never landed";
  rig.Release(end);
  ASSERT_TRUE(rig.client_d.WaitAcks(1));
  EXPECT_EQ(rig.ClientStats().record_imms_sent, 0u);
  Message m;
  m.type = 78;
  m.payload = "legacy";
  ASSERT_TRUE(rig.conn->Send(m).ok());
  RecvRing* out[4];
  for (int i = 0; i < 500 && rig.server_d.messages().empty(); ++i) {
    EXPECT_EQ(rig.ring->notifier()->Poll(out, 4), 0u);
    absl::SleepFor(absl::Milliseconds(2));
  }
  ASSERT_EQ(rig.server_d.messages().size(), 1u);
}

// A lossless session that loses its link again and again (every 37 frames) keeps its
// notifier: records resent on each new link are announced on it, messages come through
// it, and nothing is lost or repeated. The test thread plays the poller, sleeping on the
// notifier's channel between records.
TEST(RingNotifier, LosslessSessionKeepsItsNotifierAcrossInjectedFaults) {
  Rig rig;
  ASSERT_NO_FATAL_FAILURE(rig.Start(/*client_announces=*/true, /*inject_socket_failures=*/37));
  rig.server_d.set_echo(true);
  std::atomic<bool> stop{false};
  std::vector<std::string> payloads;
  absl::Mutex seen_mu;
  std::vector<std::pair<uint64_t, std::string>> seen;
  std::thread poller([&] {
    RecvRing* out[16];
    RingNotifier* n = rig.ring->notifier();
    while (!stop) {
      while (n->Poll(out, 16) > 0) {
      }
      RecordView v;
      std::string err;
      uint64_t end = 0;
      while (rig.consumer->Next(&v, &err) == RingConsumer::Poll::kRecord) {
        absl::MutexLock l(&seen_mu);
        seen.emplace_back(v.header->tid,
                          std::string(reinterpret_cast<const char*>(v.payload),
                                      v.header->payload_len));
        end = v.end_position;
      }
      ASSERT_TRUE(err.empty()) << err;
      if (end != 0) {
        rig.Release(end);
        continue;
      }
      // Idle: arm, look once more, sleep on the channel (bounded), clear it.
      n->Arm();
      if (n->Poll(out, 16) > 0) continue;
      pollfd p{n->wait_fd(), POLLIN, 0};
      if (poll(&p, 1, 20) > 0) n->ClearWait();
    }
  });
  constexpr int kN = 300;
  for (int i = 0; i < kN; ++i) {
    payloads.push_back(std::string(2000 + i, static_cast<char>('A' + i % 26)));
    const std::string oid = "obj" + std::to_string(i);
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE(rig.conn->WriteRecord(d, payloads.back(), absl::Seconds(10)).ok());
    ASSERT_TRUE(rig.conn->Send(Message{1, std::to_string(i)}).ok());
  }
  ASSERT_TRUE(rig.client_d.WaitAcks(kN, absl::Seconds(60)));
  ASSERT_TRUE(rig.client_d.WaitMessages(kN, absl::Seconds(60)));
  stop = true;
  poller.join();
  absl::MutexLock l(&seen_mu);
  ASSERT_EQ(seen.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(seen[i].first, static_cast<uint64_t>(i + 1));
    EXPECT_TRUE(seen[i].second == payloads[i]) << "record " << i;
  }
  auto echoed = rig.client_d.messages();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(echoed[i].payload, std::to_string(i));
  EXPECT_GE(rig.client->counters().reconnects, 3u);
  // Announced on every link (an imm in flight when its link broke is lost with it: the
  // ring is scanned when the session resumes).
  EXPECT_GT(rig.ClientStats().record_imms_sent, 0u);
  EXPECT_GT(rig.ServerStats().record_imms_received, 0u);
  EXPECT_LE(rig.ServerStats().record_imms_received, rig.ClientStats().record_imms_sent);
}

}  // namespace
}  // namespace msgr::rdma

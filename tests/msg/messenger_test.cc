// The messenger conformance suite: every backend registered in msg/messenger.h runs
// these tests (INSTANTIATE_TEST_SUITE_P at the bottom lists them). Tests use only the
// public contract; backend-specific setup lives in BackendOptions().
#include "msg/messenger.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "msg/ring/ring_format.h"
#include "tests/msg/client_child_spawn.h"
#include "tests/msg/messenger_test_util.h"
#include "tests/msg/test_pki.h"

namespace msgr {
namespace {

using std::chrono::milliseconds;
using testing::RecordingDispatcher;

constexpr size_t kTestRing = 256 * 1024;

// The suite's parameters: the backends, and "tcp-driven", the tcp backend in driven mode
// (MessengerOptions::worker_threads 0) run by a thread of the test's (DrivenMessenger).
std::string BackendOf(const std::string& param) { return param == "tcp-driven" ? "tcp" : param; }

// Per-backend knobs (the one place that knows backend names).
void BackendOptions(const std::string& param, MessengerOptions* o) {
  if (param == "rdma") o->backend_options["rdma_device"] = "soft";
  if (param == "tcp-driven") o->worker_threads = 0;
}

// Polls `done` every 2 ms for up to `limit`: for state that another thread updates after
// the event a test waited for (a counter bumped when a write completes, or when a drainer
// releases what it already recorded). True once `done` held.
template <typename F>
bool Eventually(F done, milliseconds limit = milliseconds(10000)) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (!done()) {
    if (std::chrono::steady_clock::now() >= until) return false;
    std::this_thread::sleep_for(milliseconds(2));
  }
  return true;
}

std::string Pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  std::mt19937_64 rng(seed);
  for (size_t i = 0; i < n; i += 8) {
    uint64_t v = rng();
    std::memcpy(&s[i], &v, std::min<size_t>(8, n - i));
  }
  return s;
}

class MessengerTest : public ::testing::TestWithParam<std::string> {
 public:  // also for the shared helpers below
  MessengerOptions Options(EntityType type, uint64_t id) {
    MessengerOptions o;
    o.type = BackendOf(GetParam());
    o.name = EntityName{type, id};
    o.auth = AuthConfig::None();
    o.keepalive_interval = absl::Milliseconds(200);
    o.keepalive_timeout = absl::Seconds(5);
    o.handshake_timeout = absl::Seconds(3);
    o.reconnect_backoff_max = absl::Milliseconds(100);
    o.ring_bytes = kTestRing;
    BackendOptions(GetParam(), &o);
    return o;
  }

  std::unique_ptr<Messenger> Make(const MessengerOptions& o, Dispatcher* d) {
    auto m = Messenger::Create(o, d);
    EXPECT_TRUE(m.ok()) << m.status();
    if (!m.ok()) return nullptr;
    if (o.worker_threads == 0) {
      EXPECT_TRUE((*m)->driven());
      return std::make_unique<testing::DrivenMessenger>(std::move(*m));
    }
    return std::move(*m);
  }

  // A server bound on 127.0.0.1 (port picked by the OS); `addr_` is where it listens.
  std::unique_ptr<Messenger> MakeServer(RecordingDispatcher* d,
                                        std::function<void(MessengerOptions*)> tweak = nullptr) {
    auto o = Options(EntityType::kOsd, 0);
    if (tweak) tweak(&o);
    auto m = Make(o, d);
    auto a = m->Bind("127.0.0.1:0");
    EXPECT_TRUE(a.ok()) << a.status();
    addr_ = a.ok() ? *a : "";
    return m;
  }

  const std::string& addr() const { return addr_; }

  std::string addr_;
};

TEST_P(MessengerTest, PingPong) {
  RecordingDispatcher sd, cd;
  sd.on_message = [](const ConnectionRef& c, const Message& m) {
    ASSERT_TRUE(c->Send(Message{static_cast<uint16_t>(m.type + 1), "pong:" + m.payload}).ok());
  };
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 7), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE(conn.ok()) << conn.status();
  for (int i = 0; i < 100; ++i) {
    ASSERT_TRUE((*conn)->Send(Message{10, absl::StrCat("ping", i)}).ok());
    ASSERT_TRUE(cd.WaitFor([&] { return cd.messages.size() == static_cast<size_t>(i + 1); }));
    cd.Locked([&] {
      EXPECT_EQ(cd.messages.back().type, 11);
      EXPECT_EQ(cd.messages.back().payload, absl::StrCat("pong:ping", i));
    });
  }
  EXPECT_TRUE((*conn)->is_connected());
  EXPECT_EQ((*conn)->peer_name(), (EntityName{EntityType::kOsd, 0}));
  ASSERT_TRUE(sd.WaitFor([&] { return sd.accepted.size() == 1; }));
  sd.Locked([&] { EXPECT_EQ(sd.accepted[0]->peer_name(), (EntityName{EntityType::kClient, 7})); });

  // Counters move on both ends (a write is counted when it completes, which may be after
  // the peer has the message: on either end).
  EXPECT_TRUE(Eventually([&] {
    return client->counters().msgs_sent >= 100 && server->counters().msgs_sent >= 100;
  }));
  const MessengerCounters cc = client->counters();
  const MessengerCounters sc = server->counters();
  EXPECT_EQ(cc.msgs_sent, 100u);
  EXPECT_EQ(cc.msgs_received, 100u);
  EXPECT_EQ(sc.msgs_received, 100u);
  EXPECT_EQ(sc.msgs_sent, 100u);
  EXPECT_GT(cc.bytes_sent, 100u * 5);
  EXPECT_GT(sc.bytes_received, 100u * 5);
  EXPECT_EQ(cc.connections_open, 1u);
  EXPECT_EQ(sc.connections_open, 1u);
  EXPECT_EQ(cc.protocol_errors + cc.crc_errors + sc.protocol_errors + sc.crc_errors, 0u);
}

TEST_P(MessengerTest, TenThousandMessagesInOrder) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 1), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE(conn.ok());
  constexpr int kN = 10000;
  for (int i = 0; i < kN; ++i) {
    ASSERT_TRUE((*conn)->Send(Message{static_cast<uint16_t>(i & 0xffff), absl::StrCat(i)}).ok());
  }
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() == kN; }, std::chrono::seconds(20)));
  sd.Locked([&] {
    for (int i = 0; i < kN; ++i) {
      ASSERT_EQ(sd.messages[i].payload, absl::StrCat(i)) << "at " << i;
      ASSERT_EQ(sd.messages[i].type, i & 0xffff);
    }
  });
}

TEST_P(MessengerTest, SixtyFourMiBMessage) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 1), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE(conn.ok());
  const std::string big = Pattern(64u << 20, 42);
  ASSERT_TRUE((*conn)->Send(Message{3, big}).ok());
  ASSERT_TRUE((*conn)->Send(Message{4, "after"}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() == 2; }, std::chrono::seconds(30)));
  sd.Locked([&] {
    EXPECT_EQ(sd.messages[0].type, 3);
    EXPECT_TRUE(sd.messages[0].payload == big) << "64 MiB payload differs";
    EXPECT_EQ(sd.messages[1].payload, "after");
  });
}

TEST_P(MessengerTest, RingRecordsWrapAroundByteIdentical) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 9), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(conn.ok());
  constexpr int kN = 1500;  // ~5.5 MiB through a 256 KiB ring: wraps ~20 times
  std::mt19937 rng(1);
  std::vector<std::string> sent;
  for (int i = 0; i < kN; ++i) {
    const size_t len = (i % 7 == 0) ? 1 : rng() % 8000 + 1;
    sent.push_back(Pattern(len, i));
    const std::string oid = absl::StrCat("obj.", i);
    RecordDesc d{oid, static_cast<uint64_t>(1000 + i),
                 static_cast<uint64_t>(i) * 4096, 0};
    ASSERT_TRUE((*conn)->WriteRecord(d, sent.back(), absl::Seconds(10)).ok()) << i;
  }
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.drainers.empty(); }));
  auto* drainer = sd.drainer();
  for (int t = 0; t < 2000 && drainer->Count() < kN; ++t)
    std::this_thread::sleep_for(milliseconds(10));
  ASSERT_EQ(drainer->Error(), "");
  auto got = drainer->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    ASSERT_EQ(got[i].oid, absl::StrCat("obj.", i));
    ASSERT_EQ(got[i].tid, static_cast<uint64_t>(1000 + i));
    ASSERT_EQ(got[i].object_offset, static_cast<uint64_t>(i) * 4096);
    ASSERT_EQ(got[i].client_id, 9u);
    ASSERT_TRUE(got[i].payload == sent[i]) << "record " << i << " differs";
  }
  EXPECT_GT((*conn)->max_record_payload(), 0u);
  // The sender counts a record once its write finished, the receiver once the record is
  // in the ring (tcp) or released by the drainer (rdma): each may be a moment after the
  // drainer has it.
  EXPECT_TRUE(Eventually([&] {
    return client->counters().records_sent >= static_cast<uint64_t>(kN) &&
           server->counters().records_received >= static_cast<uint64_t>(kN);
  }));
  EXPECT_EQ(client->counters().records_sent, static_cast<uint64_t>(kN));
  EXPECT_EQ(server->counters().records_received, static_cast<uint64_t>(kN));
  EXPECT_EQ(sd.Locked([&] { return sd.rings[0]->bytes(); }), kTestRing);
}

// RecordDesc::payload_crc: a caller that has the record's crc already (an OSD forwarding
// what it received and checked) spares the sender's crc32c pass; the receiver still checks
// it, so a wrong one is refused as corrupt, never delivered as the record.
TEST_P(MessengerTest, ACrcTheCallerGivesIsNotSummedAgainAndAWrongOneIsRefused) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 24), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(conn.ok());
  const std::string a = Pattern(6000, 1), b = Pattern(7000, 2);
  RecordDesc given{"given", 1, 0, 0};
  given.payload_crc = RecordPayloadCrc(given.oid.data(), given.oid.size(), a.data(), a.size());
  ASSERT_TRUE((*conn)->WriteRecord(given, a, absl::Seconds(10)).ok());
  ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{"summed", 2, 0, 0}, b, absl::Seconds(10)).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() == 2; }));
  auto* drainer = sd.drainer();
  ASSERT_TRUE(Eventually([&] { return drainer->Count() == 2; }));
  ASSERT_EQ(drainer->Error(), "");
  auto got = drainer->Records();
  EXPECT_TRUE(got[0].oid == "given" && got[0].payload == a);
  EXPECT_TRUE(got[1].oid == "summed" && got[1].payload == b);
  // Only the record without a given crc was summed by the sender.
  EXPECT_EQ(client->counters().record_crc_bytes_tx, b.size());

  // A wrong crc (lossy: the session is not resumed to send it again).
  RecordingDispatcher bd;
  auto liar = Make(Options(EntityType::kClient, 25), &bd);
  auto bad = liar->Connect(addr_, ConnectOptions{Policy::Lossy(), /*want_ring=*/true});
  ASSERT_TRUE(bad.ok());
  const uint64_t crc_errors_before = server->counters().crc_errors;
  RecordDesc wrong{"wrong", 1, 0, 0};
  wrong.payload_crc = *given.payload_crc;  // the crc of other bytes
  (void)(*bad)->WriteRecord(wrong, b, absl::Seconds(10));
  // tcp checks the payload as it reads it (crc_errors, the connection closed); rdma's
  // HCA places it and the ring's consumer finds the mismatch.
  EXPECT_TRUE(Eventually([&] {
    if (server->counters().crc_errors > crc_errors_before) return true;
    for (size_t i = 1; i < sd.Locked([&] { return sd.drainers.size(); }); ++i) {
      if (sd.Locked([&] { return sd.drainers[i]->Error(); }).find("crc mismatch") !=
          std::string::npos) {
        return true;
      }
    }
    return false;
  })) << "a record with a wrong crc was not refused";
  for (size_t i = 1; i < sd.Locked([&] { return sd.drainers.size(); }); ++i) {
    EXPECT_EQ(sd.Locked([&] { return sd.drainers[i]->Count(); }), 0u);
  }
  liar->Shutdown();
  client->Shutdown();
}

TEST_P(MessengerTest, RingCreditBackpressure) {
  RecordingDispatcher sd, cd;
  sd.release_rings = false;  // a consumer that reads but does not free space yet
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 2), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  const std::string payload = Pattern(30000, 5);
  int written = 0;
  absl::Status s;
  for (; written < 100; ++written) {
    s = (*conn)->WriteRecord(RecordDesc{"o", static_cast<uint64_t>(written), 0, 0}, payload,
                             absl::Milliseconds(300));
    if (!s.ok()) break;
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_GE(written, 4);
  EXPECT_LE(static_cast<size_t>(written) * payload.size(), kTestRing);
  EXPECT_GE(client->counters().ring_credit_waits, 1u);
  // Free the ring: the writer proceeds.
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.drainers.empty(); }));
  sd.drainer()->SetRelease(true);
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE((*conn)
                    ->WriteRecord(RecordDesc{"o", static_cast<uint64_t>(written + i), 0, 0},
                                  payload, absl::Seconds(10))
                    .ok());
  }
  for (int t = 0; t < 1000 && sd.drainer()->Count() < static_cast<size_t>(written + 20); ++t) {
    std::this_thread::sleep_for(milliseconds(5));
  }
  EXPECT_EQ(sd.drainer()->Count(), static_cast<size_t>(written + 20));
  EXPECT_EQ(sd.drainer()->Error(), "");
}

TEST_P(MessengerTest, LosslessSurvivesInjectedSocketFailures) {
  RecordingDispatcher sd, cd;
  sd.on_message = [](const ConnectionRef& c, const Message& m) {
    ASSERT_TRUE(c->Send(Message{m.type, "echo" + m.payload}).ok());
  };
  auto server = MakeServer(&sd, [](MessengerOptions* o) { o->inject_socket_failures = 37; });
  auto co = Options(EntityType::kClient, 3);
  co.inject_socket_failures = 50;
  auto client = Make(co, &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  constexpr int kMsgs = 2000, kRecs = 1000;
  std::vector<std::string> recs;
  int m = 0, r = 0;
  while (m < kMsgs || r < kRecs) {
    for (int k = 0; k < 2 && m < kMsgs; ++k) {
      ASSERT_TRUE((*conn)->Send(Message{1, absl::StrCat(m++)}).ok());
    }
    if (r < kRecs) {
      recs.push_back(Pattern(100 + r * 7 % 3000, r));
      const absl::Status ws =
          (*conn)->WriteRecord(RecordDesc{absl::StrCat("r", r), static_cast<uint64_t>(r), 0, 0},
                               recs.back(), absl::Seconds(30));
      ASSERT_TRUE(ws.ok()) << "record " << r << ": " << ws;
      ++r;
    }
  }
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= kMsgs; }, std::chrono::seconds(30)));
  ASSERT_TRUE(cd.WaitFor([&] { return cd.messages.size() >= kMsgs; }, std::chrono::seconds(30)));
  auto* drainer = sd.drainer();
  ASSERT_NE(drainer, nullptr);
  for (int t = 0; t < 3000 && drainer->Count() < kRecs; ++t)
    std::this_thread::sleep_for(milliseconds(10));
  std::this_thread::sleep_for(milliseconds(100));  // duplicates would show up now
  sd.Locked([&] {
    ASSERT_EQ(sd.messages.size(), static_cast<size_t>(kMsgs));
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(sd.messages[i].payload, absl::StrCat(i));
    EXPECT_TRUE(sd.resets.empty());
  });
  cd.Locked([&] {
    ASSERT_EQ(cd.messages.size(), static_cast<size_t>(kMsgs));
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(cd.messages[i].payload, absl::StrCat("echo", i));
    EXPECT_TRUE(cd.resets.empty());
    EXPECT_EQ(cd.remote_resets, 0);
  });
  auto got = drainer->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(kRecs));
  for (int i = 0; i < kRecs; ++i) {
    ASSERT_EQ(got[i].oid, absl::StrCat("r", i));
    ASSERT_TRUE(got[i].payload == recs[i]) << "record " << i;
  }
  EXPECT_EQ(drainer->Error(), "");
  const auto cc = client->counters();
  EXPECT_GT(cc.reconnects, 10u);
  EXPECT_GT(cc.resends + server->counters().resends, 0u);
  EXPECT_EQ(sd.Locked([&] { return sd.accepted.size(); }), 1u) << "one session throughout";
}

// The ring credit is the acknowledgement: every record is acknowledged exactly once, in
// write order, with the receiver's verdict -- also when failures and socket faults mix
// (a failure must never be overtaken by the credit that would read as success).
TEST_P(MessengerTest, RecordAcksExactlyOnceWithFailuresAcrossFaults) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd, [](MessengerOptions* o) { o->inject_socket_failures = 41; });
  auto co = Options(EntityType::kClient, 3);
  co.inject_socket_failures = 53;
  auto client = Make(co, &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  constexpr uint64_t kRecs = 1500;
  auto should_fail = [](uint64_t tid) { return tid % 7 == 3; };
  for (uint64_t t = 1; t <= kRecs; ++t) {
    const std::string oid = absl::StrCat(should_fail(t) ? "fail-" : "ok-", t);
    // Messages in between give the fault injection frames to count on both sides.
    if (t % 3 == 0) {
      ASSERT_TRUE((*conn)->Send(Message{1, absl::StrCat(t)}).ok());
    }
    const absl::Status ws = (*conn)->WriteRecord(RecordDesc{oid, t, 0, 0},
                                                 Pattern(64 + t * 13 % 2000, t), absl::Seconds(30));
    ASSERT_TRUE(ws.ok()) << "record " << t << ": " << ws;
  }
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kRecs; }, std::chrono::seconds(30)))
      << cd.Locked([&] { return cd.record_acks.size(); }) << " of " << kRecs << " acked";
  std::this_thread::sleep_for(milliseconds(100));  // a duplicate ack would show up now
  cd.Locked([&] {
    ASSERT_EQ(cd.record_acks.size(), kRecs);
    std::vector<int> seen(kRecs + 1, 0);
    for (const RecordAck& a : cd.record_acks) {
      ASSERT_GE(a.tid, 1u);
      ASSERT_LE(a.tid, kRecs);
      ++seen[a.tid];
      EXPECT_EQ(a.code, should_fail(a.tid) ? absl::StatusCode::kResourceExhausted
                                           : absl::StatusCode::kOk)
          << "tid " << a.tid;
    }
    for (uint64_t t = 1; t <= kRecs; ++t) ASSERT_EQ(seen[t], 1) << "tid " << t;
    EXPECT_TRUE(cd.resets.empty());
    EXPECT_EQ(cd.remote_resets, 0);
  });
  EXPECT_GT(client->counters().reconnects, 3u) << "the faults really happened";
}

// Lossy sessions carry failures too: the receiver's verdict reaches the sender for every
// record, never overtaken by the ring credit (tcp put the credit on the nack frame's own
// header, which the sender reads before the body: the failures were reported OK).
TEST_P(MessengerTest, RecordFailuresReachTheSenderOnLossySessions) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  server->SetPolicy(EntityType::kClient, Policy::Lossy());
  auto client = Make(Options(EntityType::kClient, 4), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossy(), true});
  ASSERT_TRUE(conn.ok()) << conn.status();
  constexpr uint64_t kRecs = 200;
  auto should_fail = [](uint64_t tid) { return tid % 7 == 3; };
  for (uint64_t t = 1; t <= kRecs; ++t) {
    const std::string oid = absl::StrCat(should_fail(t) ? "fail-" : "ok-", t);
    ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{oid, t, 0, 0}, Pattern(100, t), absl::Seconds(10))
                    .ok());
  }
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kRecs; }))
      << cd.Locked([&] { return cd.record_acks.size(); }) << " of " << kRecs << " acked";
  cd.Locked([&] {
    for (const RecordAck& a : cd.record_acks) {
      EXPECT_EQ(a.code, should_fail(a.tid) ? absl::StatusCode::kResourceExhausted
                                           : absl::StatusCode::kOk)
          << "tid " << a.tid;
    }
  });
}

// Where a shared-payload test puts record i's payload `want`: the bytes the record carries
// (inside the memory `owner` keeps alive).
struct PlacedPayload {
  std::shared_ptr<const void> owner;
  std::string_view bytes;
};
using PlacePayload = std::function<PlacedPayload(Messenger& client, const std::string& want)>;

// Writes `recs` records with WriteRecordShared through injected socket faults on both ends
// (and, with `messages`, a message every fourth record), their payloads placed by `place`;
// then checks that every record arrived exactly, in order, and that the backend let go of
// every owner once its record was acknowledged.
void WriteSharedThroughFaults(MessengerTest* t, int recs, size_t max_payload, PlacePayload place,
                              bool messages,
                              std::map<std::string, std::string> client_backend_options = {}) {
  RecordingDispatcher sd, cd;
  auto server = t->MakeServer(&sd, [](MessengerOptions* o) { o->inject_socket_failures = 43; });
  auto co = t->Options(EntityType::kClient, 3);
  co.inject_socket_failures = 47;
  for (auto& [k, v] : client_backend_options) co.backend_options[k] = v;
  auto client = t->Make(co, &cd);
  auto conn = client->Connect(t->addr(), ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  std::vector<std::string> want;
  std::vector<std::weak_ptr<const void>> owners;
  for (int i = 0; i < recs; ++i) {
    want.push_back(Pattern(100 + i * 211 % max_payload, i));
    PlacedPayload p = place(*client, want.back());
    ASSERT_EQ(p.bytes, want.back()) << "record " << i << " was not placed";
    owners.push_back(p.owner);
    if (messages && i % 4 == 0) {
      ASSERT_TRUE((*conn)->Send(Message{1, absl::StrCat(i)}).ok());
    }
    const absl::Status ws = (*conn)->WriteRecordShared(
        RecordDesc{absl::StrCat("s", i), static_cast<uint64_t>(i + 1), 0, 0}, p.bytes,
        std::move(p.owner), absl::Seconds(30));
    ASSERT_TRUE(ws.ok()) << "record " << i << ": " << ws;
  }
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= static_cast<size_t>(recs); },
                         std::chrono::seconds(30)));
  auto* drainer = sd.drainer();
  ASSERT_NE(drainer, nullptr);
  ASSERT_EQ(drainer->Error(), "");
  auto got = drainer->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(recs));
  for (int i = 0; i < recs; ++i) {
    ASSERT_EQ(got[i].oid, absl::StrCat("s", i));
    ASSERT_TRUE(got[i].payload == want[i]) << "record " << i;
  }
  auto held = [&] {
    int n = 0;
    for (const auto& w : owners) n += !w.expired();
    return n;
  };
  for (int i = 0; i < 500 && held() > 0; ++i) std::this_thread::sleep_for(milliseconds(10));
  EXPECT_EQ(held(), 0) << "payloads still referenced after every record was acknowledged";
  EXPECT_GT(client->counters().reconnects, 2u) << "the faults really happened";
}

// WriteRecordShared: the backend may keep the caller's buffer instead of a copy (tcp);
// the bytes still arrive exactly, also when resent after socket faults, and the backend
// lets go of every buffer once its record is acknowledged. (A backend that kept only a
// view of a buffer whose last owner we drop below reads freed memory: ASan reports it.)
TEST_P(MessengerTest, SharedPayloadRecordsSurviveFaultsAndAreLetGoWhenAcked) {
  // rdma: payloads from 2 KiB on are written from the caller's memory (registered in place),
  // the smaller ones staged: both kinds go through the faults and resends.
  WriteSharedThroughFaults(
      this, 800, 6000,
      [](Messenger&, const std::string& want) {
        auto buf = std::make_shared<const std::string>("head" + want + "tail");
        return PlacedPayload{buf, std::string_view(buf->data() + 4, want.size())};
      },
      /*messages=*/true, {{"rdma_zero_copy_min_bytes", "2048"}});
}

// Messenger::AllocRecordBuffer: payloads written from slices of the messenger's own
// buffers arrive exactly, across socket faults and resends, and every buffer is let go once
// its record is acknowledged (rdma: the buffers are registered once, see rdma_messenger_test).
TEST_P(MessengerTest, RecordBufferPayloadsSurviveFaultsAndAreLetGoWhenAcked) {
  WriteSharedThroughFaults(this, 300, 70000, [](Messenger& client, const std::string& want) {
    // A slice at offset 8 of a buffer with room on both sides.
    RecordBufferRef buf = client.AllocRecordBuffer(want.size() + 16);
    if (buf == nullptr || buf->size() != want.size() + 16) return PlacedPayload{};
    std::memcpy(buf->data() + 8, want.data(), want.size());
    return PlacedPayload{buf, std::string_view(buf->data() + 8, want.size())};
  }, /*messages=*/false);
}

// The copies a record's payload took on its way out are counted by the time its ack is
// delivered (tcp: the kernel's send copy, counted as the batch goes to the socket; rdma on
// the soft HCA: its memcpy, and the staging copy), so a figure read after the last ack is
// whole: every payload byte was copied at least once by this process's CPU.
TEST_P(MessengerTest, PayloadCopiesAreCountedByTheTimeTheAckArrives) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 4), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  constexpr int kRecs = 300;
  constexpr size_t kBytes = 4096;
  const uint64_t before = client->counters().payload_bytes_copied_tx;
  for (int i = 0; i < kRecs; ++i) {
    auto buf = std::make_shared<const std::string>(Pattern(kBytes, i));
    const std::string_view body(*buf);
    ASSERT_TRUE((*conn)->WriteRecordShared(RecordDesc{absl::StrCat("c", i),
                                                      static_cast<uint64_t>(i + 1), 0, 0},
                                           body, std::move(buf), absl::Seconds(30))
                    .ok());
  }
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kRecs; }, std::chrono::seconds(30)));
  EXPECT_GE(client->counters().payload_bytes_copied_tx - before, uint64_t{kRecs} * kBytes);
}

// A lossless session whose client went away for good (its process exited or died) ends
// after session_reconnect_timeout: OnReset with the reason, and the ring with it. A client
// that is back within the timeout resumes the same session.
TEST_P(MessengerTest, LosslessSessionOfAVanishedClientEndsAfterTheReconnectTimeout) {
  RecordingDispatcher sd;
  auto server = MakeServer(&sd, [](MessengerOptions* o) {
    o->session_reconnect_timeout = absl::Milliseconds(1500);
  });
  // The client lives in a child process that exits without Shutdown (no goodbye): its
  // sockets close as the kernel cleans up, as when a process dies.
  const pid_t child = testing::SpawnClientChild({BackendOf(GetParam()), addr_, "21", "exit"});
  ASSERT_GT(child, 0) << "cannot start tests/msg/client_child";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  const auto lost = std::chrono::steady_clock::now();
  std::this_thread::sleep_for(milliseconds(700));
  EXPECT_TRUE(sd.Locked([&] { return sd.resets.empty(); })) << "ended before the timeout";
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.resets.empty(); }, std::chrono::seconds(15)))
      << "the session of a vanished client never ended";
  EXPECT_GE(std::chrono::steady_clock::now() - lost, milliseconds(1400));
  sd.Locked([&] {
    ASSERT_EQ(sd.resets.size(), 1u);
    EXPECT_TRUE(absl::IsDeadlineExceeded(sd.resets[0])) << sd.resets[0];
    EXPECT_NE(sd.resets[0].message().find("did not reconnect"), std::string::npos)
        << sd.resets[0];
  });
}

// A client that restarts comes back with a new cookie: the server ends its old session,
// unlinked since the old process died, at once (not after session_reconnect_timeout),
// with the same words on both backends (msg/session/session_table.h), and serves the new.
TEST_P(MessengerTest, AClientBackWithANewSessionEndsItsOldOne) {
  RecordingDispatcher sd;
  auto server = MakeServer(&sd);  // session_reconnect_timeout: the default 120 s
  const pid_t child = testing::SpawnClientChild({BackendOf(GetParam()), addr_, "23", "exit"});
  ASSERT_GT(child, 0) << "cannot start tests/msg/client_child";
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  ASSERT_TRUE(Eventually([&] {
    auto sessions = server->DumpSessions();
    return sessions.size() == 1 && sessions[0].state == "standby";
  })) << "the dead client's session never lost its link";
  EXPECT_TRUE(sd.Locked([&] { return sd.resets.empty(); }));

  RecordingDispatcher cd;
  auto client = Make(Options(EntityType::kClient, 23), &cd);  // the same name, restarted
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok()) << conn.status();
  ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{"o", 1, 0, 0}, "new", absl::Seconds(10)).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() == 1; }));
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.resets.empty(); }, std::chrono::seconds(5)))
      << "the old session was kept beside the new one";
  sd.Locked([&] {
    ASSERT_EQ(sd.resets.size(), 1u);
    EXPECT_TRUE(absl::IsUnavailable(sd.resets[0])) << sd.resets[0];
    EXPECT_NE(sd.resets[0].message().find("client.23 restarted (new session from "),
              std::string::npos)
        << sd.resets[0];
  });
  auto sessions = server->DumpSessions();
  ASSERT_EQ(sessions.size(), 1u);
  EXPECT_EQ(sessions[0].state, "connected");
  EXPECT_EQ(sessions[0].peer.ToString(), "client.23");
  client->Shutdown();
}

// Shutdown says goodbye: the server ends the sessions the client had opened at once (the
// ring is freed), without waiting session_reconnect_timeout; and the server's own
// Shutdown does not end its clients' sessions for them.
TEST_P(MessengerTest, ShutdownEndsTheSessionsItOpenedAtOnce) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);  // session_reconnect_timeout: the default 120 s
  auto client = Make(Options(EntityType::kClient, 22), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{"o", 1, 0, 0}, "data", absl::Seconds(10)).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() == 1; }));
  const auto t0 = std::chrono::steady_clock::now();
  client->Shutdown();
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.resets.empty(); }, std::chrono::seconds(5)))
      << "the server kept the session of a client that said goodbye";
  sd.Locked([&] {
    ASSERT_EQ(sd.resets.size(), 1u);
    EXPECT_NE(sd.resets[0].message().find("shutting down"), std::string::npos) << sd.resets[0];
  });
  EXPECT_TRUE(cd.Locked([&] { return cd.resets.empty(); })) << "callback after Shutdown";
  EXPECT_EQ(server->counters().connections_open, 0u);
}

// DumpSessions: each end lists the session with the peer it authenticated, the same
// instance (cookie) on both ends, and the accepting side's ring: its size, and the bytes
// of records published and not yet released; the session leaves the list when it ends.
TEST_P(MessengerTest, DumpSessionsShowsPeerInstanceAndRingFill) {
  RecordingDispatcher sd, cd;
  sd.release_rings = false;  // records stay in the ring until the test lets them go
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 31), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(conn.ok());
  auto one_connected = [](const std::vector<SessionInfo>& v) {
    return v.size() == 1 && v[0].state == "connected";
  };
  ASSERT_TRUE(Eventually([&] { return one_connected(server->DumpSessions()); }));
  ASSERT_TRUE(Eventually([&] { return one_connected(client->DumpSessions()); }));
  const SessionInfo accepted = server->DumpSessions().at(0);
  const SessionInfo opened = client->DumpSessions().at(0);
  EXPECT_EQ(accepted.peer, (EntityName{EntityType::kClient, 31}));
  EXPECT_EQ(accepted.backend, BackendOf(GetParam()));
  EXPECT_FALSE(accepted.outgoing);
  EXPECT_TRUE(accepted.lossless);
  EXPECT_EQ(accepted.ring_bytes, kTestRing);
  EXPECT_EQ(accepted.ring_used_bytes, 0u);
  EXPECT_EQ(accepted.records_received, 0u);
  EXPECT_NE(accepted.peer_addr, "");
  EXPECT_EQ(opened.peer, (EntityName{EntityType::kOsd, 0}));
  EXPECT_TRUE(opened.outgoing);
  EXPECT_EQ(opened.ring_bytes, 0u) << "the connecting side has no receive ring";
  EXPECT_EQ(opened.peer_addr, addr_);
  EXPECT_NE(accepted.instance, 0u);
  EXPECT_EQ(accepted.instance, opened.instance) << "one session, one instance on both ends";

  const std::string payload = Pattern(10000, 31);
  for (uint64_t t = 1; t <= 3; ++t) {
    ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{"held", t, 0, 0}, payload, absl::Seconds(10)).ok());
  }
  // Published when the reader (tcp) or the client's WRITE (rdma) has put them there.
  ASSERT_TRUE(Eventually([&] { return server->DumpSessions().at(0).records_received == 3; }));
  const SessionInfo held = server->DumpSessions().at(0);
  EXPECT_GE(held.ring_used_bytes, 3 * payload.size());
  EXPECT_LE(held.ring_used_bytes, kTestRing);
  EXPECT_GE(held.age, absl::ZeroDuration());

  ASSERT_TRUE(sd.WaitFor([&] { return !sd.drainers.empty(); }));
  sd.drainer()->SetRelease(true);
  EXPECT_TRUE(Eventually([&] { return server->DumpSessions().at(0).ring_used_bytes == 0; }))
      << "released records still counted in the ring's fill";
  EXPECT_EQ(server->DumpSessions().at(0).records_received, 3u);
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() == 3; }));

  client->Shutdown();  // says goodbye: the server ends the session at once
  EXPECT_TRUE(Eventually([&] { return server->DumpSessions().empty(); }))
      << server->DumpSessions().size() << " session(s) left after the client went";
}

// Fencing (the cluster's blocklist): a fenced client's session is closed and its ring's
// key revoked before SetFenced returns, so nothing it writes afterwards lands; its next
// handshakes are refused naming why; another client, and another incarnation of the
// same name when only one instance is fenced, go on.
TEST_P(MessengerTest, FencedPeerIsCutOffAndRefusedOthersGoOn) {
  RecordingDispatcher sd, cd, od, nd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 21), &cd);
  auto other = Make(Options(EntityType::kClient, 22), &od);
  ASSERT_NE(client->options().instance, 0u) << "Create draws an instance";
  ASSERT_NE(client->options().instance, other->options().instance);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  auto oconn = other->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(conn.ok() && oconn.ok());
  const std::string payload = Pattern(4000, 21);
  ASSERT_TRUE((*conn)->WriteRecord(RecordDesc{"before", 1, 0, 0}, payload, absl::Seconds(10)).ok());
  ASSERT_TRUE((*oconn)->WriteRecord(RecordDesc{"o1", 1, 0, 0}, payload, absl::Seconds(10)).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() == 1; }));
  ASSERT_TRUE(od.WaitFor([&] { return od.record_acks.size() == 1; }));
  auto sessions_of = [&](uint64_t id) {
    size_t n = 0;
    for (const SessionInfo& i : server->DumpSessions()) {
      if (i.peer == EntityName{EntityType::kClient, id} && i.state != "closed") ++n;
    }
    return n;
  };
  ASSERT_TRUE(Eventually([&] { return sessions_of(21) == 1 && sessions_of(22) == 1; }));
  for (const SessionInfo& i : server->DumpSessions()) {
    if (i.peer.id == 21) {
      EXPECT_EQ(i.peer_instance, client->options().instance);
    }
  }

  // Fencing another incarnation of client.21 leaves this one alone.
  server->SetFenced({FencedPeer{EntityName{EntityType::kClient, 21},
                                client->options().instance + 1, "an older client.21"}});
  EXPECT_EQ(sessions_of(21), 1u);
  EXPECT_EQ(server->counters().fenced_sessions_closed, 0u);

  server->SetFenced({FencedPeer{EntityName{EntityType::kClient, 21},
                                client->options().instance, "blocklisted at epoch 9"}});
  EXPECT_EQ(server->counters().fenced_sessions_closed, 1u);
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.resets.empty(); }));
  sd.Locked([&] {
    EXPECT_EQ(sd.resets[0].code(), absl::StatusCode::kPermissionDenied) << sd.resets[0];
    EXPECT_NE(sd.resets[0].message().find("blocklisted at epoch 9"), std::string::npos)
        << sd.resets[0];
  });
  const uint64_t received = server->counters().records_received;
  // The client learns why its session ended; connecting again is refused with the reason,
  // and nothing it writes reaches the server.
  ASSERT_TRUE(cd.WaitFor([&] { return !cd.resets.empty(); }));
  absl::Status why = cd.Locked([&] { return cd.resets[0]; });
  EXPECT_NE(why.message().find("blocklisted at epoch 9"), std::string::npos) << why;
  EXPECT_FALSE(
      (*conn)->WriteRecord(RecordDesc{"after", 2, 0, 0}, payload, absl::Milliseconds(300)).ok());
  auto again = client->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(
      (*again)->WriteRecord(RecordDesc{"after", 3, 0, 0}, payload, absl::Milliseconds(500)).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return !cd.refused.empty(); }));
  why = cd.Locked([&] { return cd.refused[0]; });
  EXPECT_EQ(why.code(), absl::StatusCode::kPermissionDenied) << why;
  EXPECT_NE(why.message().find("is fenced: blocklisted at epoch 9"), std::string::npos) << why;
  EXPECT_GE(server->counters().fenced_refusals, 1u);
  ASSERT_TRUE((*oconn)->WriteRecord(RecordDesc{"o2", 2, 0, 0}, payload, absl::Seconds(10)).ok());
  ASSERT_TRUE(od.WaitFor([&] { return od.record_acks.size() == 2; })) << "the other client goes on";
  EXPECT_TRUE(Eventually([&] { return server->counters().records_received >= received + 1; }));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(server->counters().records_received, received + 1) << "only the other's record";
  EXPECT_EQ(sessions_of(21), 0u);

  // A new incarnation of the same name is served: only the fenced instance was.
  auto reborn = Make(Options(EntityType::kClient, 21), &nd);
  auto nconn = reborn->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(nconn.ok());
  ASSERT_TRUE((*nconn)->WriteRecord(RecordDesc{"new", 1, 0, 0}, payload, absl::Seconds(10)).ok());
  ASSERT_TRUE(nd.WaitFor([&] { return nd.record_acks.size() == 1; }));

  // Fencing every instance of the name cuts that one off too; lifting it lets it back.
  server->SetFenced({FencedPeer{EntityName{EntityType::kClient, 21}, 0, "every client.21"}});
  EXPECT_EQ(sessions_of(21), 0u);
  server->SetFenced({});
  auto later = Make(Options(EntityType::kClient, 21), &nd);
  auto lconn = later->Connect(addr_, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  ASSERT_TRUE(lconn.ok());
  ASSERT_TRUE((*lconn)->WriteRecord(RecordDesc{"l", 1, 0, 0}, payload, absl::Seconds(10)).ok());
}

TEST_P(MessengerTest, ReservedMessageTypesAreRefused) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 4), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossless(), false});
  ASSERT_TRUE(conn.ok());
  const absl::Status s = (*conn)->Send(Message{kReservedMessageTypes + 1, "x"});
  EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
}

TEST_P(MessengerTest, LossyFaultResets) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  server->SetPolicy(EntityType::kClient, Policy::Lossy());
  auto co = Options(EntityType::kClient, 4);
  co.inject_socket_failures = 5;
  auto client = Make(co, &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossy(), false});
  ASSERT_TRUE(conn.ok());
  for (int i = 0; i < 5; ++i) ASSERT_TRUE((*conn)->Send(Message{1, "x"}).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return cd.resets.size() == 1; }));
  ASSERT_TRUE(sd.WaitFor([&] { return sd.resets.size() == 1; }));
  EXPECT_FALSE((*conn)->is_connected());
  EXPECT_FALSE((*conn)->Send(Message{1, "y"}).ok());
  EXPECT_GE(client->counters().resets, 1u);
  // Connect again gives a fresh connection.
  auto conn2 = client->Connect(addr_, ConnectOptions{Policy::Lossy(), false});
  ASSERT_TRUE(conn2.ok());
  EXPECT_NE(conn2->get(), conn->get());
}

TEST_P(MessengerTest, MarkDownResetsBothEnds) {
  RecordingDispatcher sd, cd;
  auto server = MakeServer(&sd);
  auto client = Make(Options(EntityType::kClient, 5), &cd);
  auto conn = client->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Send(Message{1, "hello"}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() == 1; }));
  (*conn)->MarkDown();
  (*conn)->MarkDown();  // idempotent
  ASSERT_TRUE(cd.WaitFor([&] { return cd.resets.size() == 1; }));
  ASSERT_TRUE(sd.WaitFor([&] { return sd.resets.size() == 1; }));
  // The same words on every backend (msg/session/delivery.h).
  const std::string peer = (*conn)->peer_addr();
  EXPECT_EQ(cd.Locked([&] { return cd.resets[0]; }),
            absl::CancelledError("connection to " + peer + " marked down"));
  EXPECT_EQ(sd.Locked([&] { return sd.resets[0].code(); }), absl::StatusCode::kUnavailable);
  EXPECT_EQ((*conn)->Send(Message{1, "late"}),
            absl::FailedPreconditionError("connection to " + peer +
                                          " is closed (marked down or reset)"));
  std::this_thread::sleep_for(milliseconds(100));
  EXPECT_EQ(cd.Locked([&] { return cd.resets.size(); }), 1u) << "OnReset exactly once";
}

TEST_P(MessengerTest, TrySendOverLimitIsResourceExhausted) {
  // Nothing listens at the address (a messenger bound and shut down), so messages queue.
  RecordingDispatcher sd, cd;
  auto dead = MakeServer(&sd);
  dead->Shutdown();
  auto co = Options(EntityType::kClient, 6);
  co.conn_max_msgs_in_flight = 8;
  auto client = Make(co, &cd);
  auto conn = client->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE(conn.ok());
  for (int i = 0; i < 8; ++i) ASSERT_TRUE((*conn)->TrySend(Message{1, "q"}).ok()) << i;
  absl::Status s = (*conn)->TrySend(Message{1, "q"});
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  ASSERT_TRUE(cd.WaitFor([&] { return !cd.refused.empty(); }));
  // Byte limit too.
  auto co2 = Options(EntityType::kClient, 8);
  co2.conn_max_bytes_in_flight = 1000;
  RecordingDispatcher cd2;
  auto client2 = Make(co2, &cd2);
  auto conn2 = client2->Connect(addr_, ConnectOptions{});
  ASSERT_TRUE((*conn2)->TrySend(Message{1, std::string(600, 'a')}).ok());
  EXPECT_EQ((*conn2)->TrySend(Message{1, std::string(600, 'b')}).code(),
            absl::StatusCode::kResourceExhausted);
}

TEST_P(MessengerTest, KeepaliveTimeoutResetsSilentPeer) {
  // The server's only worker blocks in a callback: it stops answering keepalives.
  RecordingDispatcher sd, cd;
  std::atomic<bool> release{false};
  sd.on_message = [&](const ConnectionRef&, const Message& m) {
    while (m.type == 99 && !release) std::this_thread::sleep_for(milliseconds(5));
  };
  auto server = MakeServer(&sd, [](MessengerOptions* o) { o->worker_threads = 1; });
  auto co = Options(EntityType::kClient, 10);
  co.keepalive_interval = absl::Milliseconds(100);
  co.keepalive_timeout = absl::Milliseconds(600);
  auto client = Make(co, &cd);
  auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossy(), false});
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE((*conn)->Send(Message{1, "ok"}).ok());
  std::this_thread::sleep_for(milliseconds(800));  // keepalives keep a live peer up
  EXPECT_TRUE(cd.Locked([&] { return cd.resets.empty(); }));
  ASSERT_TRUE((*conn)->Send(Message{99, "block"}).ok());
  ASSERT_TRUE(cd.WaitFor([&] { return !cd.resets.empty(); }, std::chrono::seconds(5)));
  EXPECT_EQ(cd.Locked([&] { return cd.resets[0].code(); }), absl::StatusCode::kDeadlineExceeded);
  EXPECT_GT(client->counters().keepalives_sent, 0u);
  release = true;
}

// ------------------------------------------------------------------ authentication

class AuthTest : public MessengerTest {
 protected:
  std::string WriteKeyring(const std::string& line) {
    const char* dir = std::getenv("TEST_TMPDIR");
    std::string path = absl::StrCat(dir ? dir : "/tmp", "/keyring.", counter_++);
    std::ofstream(path) << "[client.admin]\n" << line << "\n";
    return path;
  }
  int counter_ = 0;
};

TEST_P(AuthTest, KeyringFormats) {
  auto a = AuthConfig::FromKeyringFile(WriteKeyring("key = AQBzaWxseSBrZXkgZm9yIHRlc3Q="));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->secret, std::string("\x01\x00silly key for test", 20));
  auto h = AuthConfig::FromKeyringFile(WriteKeyring("key = 00112233"));
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->secret, std::string("\x00\x11\x22\x33", 4));
  auto r = AuthConfig::FromKeyringFile(WriteKeyring("key = plain-secret"));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->secret, "plain-secret");
  EXPECT_FALSE(AuthConfig::FromKeyringFile(WriteKeyring("nokey here")).ok());
  EXPECT_FALSE(AuthConfig::FromKeyringFile("/nonexistent/keyring").ok());
}

TEST_P(AuthTest, RightKeyAcceptedWrongOrNoKeyRefused) {
  const AuthConfig good{AuthConfig::Mode::kSecret, "cluster-secret-1"};
  const AuthConfig bad{AuthConfig::Mode::kSecret, "cluster-secret-2"};
  RecordingDispatcher sd;
  auto server = MakeServer(&sd, [&](MessengerOptions* o) { o->auth = good; });
  struct Case {
    AuthConfig auth;
    bool ok;
  };
  for (const Case& c : {Case{good, true}, Case{bad, false}, Case{AuthConfig::None(), false}}) {
    SCOPED_TRACE(c.auth.secret.empty() ? "no key" : c.auth.secret);
    RecordingDispatcher cd;
    auto co = Options(EntityType::kClient, 11);
    co.auth = c.auth;
    auto client = Make(co, &cd);
    const size_t accepted_before = sd.Locked([&] { return sd.accepted.size(); });
    auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossy(), false});
    ASSERT_TRUE(conn.ok());
    const absl::Status sent = (*conn)->Send(Message{1, "secret data"});
    // A refused (lossy) connection may be down before Send is called: then Send says so.
    if (c.ok) {
      ASSERT_TRUE(sent.ok()) << sent;
    }
    if (c.ok) {
      ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() == 1; }));
      EXPECT_TRUE((*conn)->is_connected());
    } else {
      ASSERT_TRUE(cd.WaitFor([&] { return !cd.refused.empty(); }));
      const absl::Status why = cd.Locked([&] { return cd.refused[0]; });
      EXPECT_TRUE(absl::IsUnauthenticated(why) || absl::IsPermissionDenied(why)) << why;
      EXPECT_GE(client->counters().auth_failures, 1u);
      std::this_thread::sleep_for(milliseconds(50));
      EXPECT_EQ(sd.Locked([&] { return sd.accepted.size(); }), accepted_before)
          << "a refused peer never reaches the dispatcher";
      EXPECT_EQ(sd.Locked([&] { return sd.messages.size(); }), 1u);
    }
  }
  EXPECT_GE(server->counters().auth_failures, 1u);
}

// Entity proof (msg/PROTOCOL.md "Entity proof"): with the cluster's certificates, a peer
// proves which entity it is; holding the cluster key is not enough to pose as an OSD.
TEST_P(AuthTest, EntityCertificatesProveTheNameAKeyHolderCannotPoseAsAnOsd) {
  testing::TestPki pki;
  RecordingDispatcher sd;
  auto server = MakeServer(&sd, [&](MessengerOptions* o) { o->auth = pki.Auth("k", "osd.0"); });
  struct Case {
    const char* what;
    EntityName name;
    AuthConfig auth;
    bool ok;
    const char* why;  // in the refusal the client sees
  };
  const Case cases[] = {
      {"client.bench as a client", {EntityType::kClient, 11}, pki.Auth("k", "client.bench"), true,
       ""},
      {"osd.1 as itself", {EntityType::kOsd, 1}, pki.Auth("k", "osd.1"), true, ""},
      {"client.bench as osd.5", {EntityType::kOsd, 5}, pki.Auth("k", "client.bench"), false,
       "a peer with the certificate of 'client.bench' claimed to be osd.5"},
      {"osd.1 as osd.5", {EntityType::kOsd, 5}, pki.Auth("k", "osd.1"), false,
       "a peer with the certificate of 'osd.1' claimed to be osd.5"},
      {"the key alone", {EntityType::kOsd, 5}, AuthConfig{AuthConfig::Mode::kSecret, "k"}, false,
       "osd.0 proves its entity with a certificate, osd.5 has none"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    RecordingDispatcher cd;
    auto co = Options(c.name.type, c.name.id);
    co.auth = c.auth;
    auto client = Make(co, &cd);
    const size_t before = sd.Locked([&] { return sd.messages.size(); });
    const uint64_t refusals_before = server->counters().auth_failures;
    auto conn = client->Connect(addr_, ConnectOptions{Policy::Lossy(), false});
    ASSERT_TRUE(conn.ok());
    const absl::Status sent = (*conn)->Send(Message{1, c.what});
    if (c.ok) {
      ASSERT_TRUE(sent.ok()) << sent;
      ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() == before + 1; }));
      EXPECT_EQ(sd.Locked([&] { return sd.messages.back().payload; }), c.what);
    } else {
      ASSERT_TRUE(cd.WaitFor([&] { return !cd.refused.empty(); }));
      const absl::Status why = cd.Locked([&] { return cd.refused[0]; });
      EXPECT_NE(why.message().find(c.why), std::string::npos) << why;
      EXPECT_TRUE(sd.WaitFor([&] { return server->counters().auth_failures > refusals_before; }));
      std::this_thread::sleep_for(milliseconds(50));
      EXPECT_EQ(sd.Locked([&] { return sd.messages.size(); }), before)
          << "nothing from a refused peer reaches the dispatcher";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, MessengerTest, ::testing::Values("tcp", "rdma", "tcp-driven"),
                         [](const auto& info) {
                           return info.param == "tcp-driven" ? std::string("tcp_driven")
                                                             : info.param;
                         });
INSTANTIATE_TEST_SUITE_P(Backends, AuthTest, ::testing::Values("tcp", "rdma"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace msgr

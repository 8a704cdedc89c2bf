// End-to-end tests of the "rdma" messenger on the soft verbs provider (two messengers in
// one process, or a forked child): messages, fragmentation, ring records placed by RDMA
// WRITE with no receive-side copy, credits through the control region, doorbells, faults.
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <numeric>
#include <optional>
#include <random>
#include <thread>
#include <tuple>

#include "gtest/gtest.h"
#include "msg/messenger.h"
#include "msg/rdma/rdma_stats.h"
#include "tests/msg/client_child_spawn.h"
#include "tests/msg/rdma/rdma_test_util.h"

namespace msgr::rdma {
namespace {

using testing::Drainer;
using testing::Recorder;

std::string Bytes(size_t n, uint32_t seed) {
  std::string s(n, '\0');
  std::mt19937 rng(seed);
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

MessengerOptions Options(EntityType type, uint64_t id, const std::string& secret = "k3y") {
  MessengerOptions o;
  o.type = "rdma";
  o.name = EntityName{type, id};
  o.auth.mode = AuthConfig::Mode::kSecret;
  o.auth.secret = secret;
  o.backend_options["rdma_device"] = "soft";
  o.ring_bytes = 256 * 1024;
  return o;
}

// A 4 MiB ring that never resizes (rings start at rdma_ring_min_kb and grow under load):
// for tests that are not about resizing.
void UseFixedRing(MessengerOptions* o) {
  o->ring_bytes = 4u << 20;
  o->backend_options["rdma_ring_min_kb"] = "4096";
}

struct Pair {
  Recorder server_d, client_d;
  std::unique_ptr<Messenger> server, client;
  std::string addr;
  void Start(MessengerOptions so, MessengerOptions co) {
    auto s = Messenger::Create(so, &server_d);
    ASSERT_TRUE(s.ok()) << s.status();
    server = std::move(*s);
    auto a = server->Bind("127.0.0.1:0");
    ASSERT_TRUE(a.ok()) << a.status();
    addr = *a;
    auto c = Messenger::Create(co, &client_d);
    ASSERT_TRUE(c.ok()) << c.status();
    client = std::move(*c);
  }
  // The default pair: an OSD-type server and a client, both with Options().
  void Start() {
    ASSERT_NO_FATAL_FAILURE(
        Start(Options(EntityType::kOsd, 0), Options(EntityType::kClient, 1)));
  }
  // Connects the client with a receive ring and takes the server's side of it (the
  // server's `n`th ring).
  void ConnectRing(ConnectionRef* conn, ConnectionRef* sconn, std::shared_ptr<RecvRing>* ring,
                   size_t n = 0) {
    ConnectOptions co;
    co.want_ring = true;
    auto c = client->Connect(addr, co);
    ASSERT_TRUE(c.ok()) << c.status();
    *conn = *c;
    ASSERT_TRUE(server_d.WaitRings(n + 1));
    std::tie(*sconn, *ring) = server_d.ring(n);
    // The server attaches the ring when setup ends on its side; the client finishes its
    // own (staging mirror, link) a moment later.
    for (int i = 0; i < 1000 && !(*conn)->is_connected(); ++i) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    ASSERT_TRUE((*conn)->is_connected());
  }
  // The same, into conn / sconn / ring.
  void ConnectRing(size_t n = 0) { ConnectRing(&conn, &sconn, &ring, n); }
  ConnectionRef conn, sconn;  // after ConnectRing(): the client's and the server's side
  std::shared_ptr<RecvRing> ring;
  ~Pair() {
    if (client) client->Shutdown();
    if (server) server->Shutdown();
  }
};

TEST(RdmaMessenger, MessagesBothWaysAndLargeFragmentedMessage) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  p.server_d.set_echo(true);
  auto conn = p.client->Connect(p.addr, ConnectOptions{});
  ASSERT_TRUE(conn.ok());
  std::vector<Message> sent;
  for (int i = 0; i < 200; ++i) {
    Message m{static_cast<uint16_t>(i), Bytes(static_cast<size_t>(i) * 97, i)};
    sent.push_back(m);
    ASSERT_TRUE((*conn)->Send(m).ok());
  }
  Message big{7, Bytes(9u << 20, 99)};  // 9 MiB: ~150 SEND fragments
  sent.push_back(big);
  ASSERT_TRUE((*conn)->Send(big).ok());
  ASSERT_TRUE(p.client_d.WaitMessages(sent.size(), absl::Seconds(60)));
  auto got = p.client_d.messages();
  ASSERT_EQ(got.size(), sent.size());
  for (size_t i = 0; i < sent.size(); ++i) {
    EXPECT_EQ(got[i].type, sent[i].type);
    EXPECT_TRUE(got[i].payload == sent[i].payload) << "message " << i;
  }
  EXPECT_EQ(p.server->counters().auth_failures, 0u);
  auto st = RdmaStatsOf(*p.client);
  ASSERT_TRUE(st.has_value());
  EXPECT_GT(st->registered_bytes, 0u);
}

// The completion thread's spin after work is adaptive if asked (event_loop.h): with
// messages 2 ms apart every spin runs out, so it soon sleeps at once after each; with the
// spin fixed (rdma_cq_spin_adaptive=0) it spins out every idle period. Echoes arrive
// either way. The server gets a loop of its own (rdma_shared_loop=0): a shared loop's
// counts are its thread's, for every messenger it drives. `adaptive` unset: the defaults.
struct LoopCounts {
  uint64_t idle_periods = 0;
  uint64_t sleeps_at_once = 0;
};
void PingEvery2Ms(std::optional<bool> adaptive, LoopCounts* server, LoopCounts* client) {
  Pair p;
  MessengerOptions so = Options(EntityType::kOsd, 0);
  if (adaptive.has_value()) so.backend_options["rdma_cq_spin_adaptive"] = *adaptive ? "1" : "0";
  so.backend_options["rdma_shared_loop"] = "0";
  ASSERT_NO_FATAL_FAILURE(p.Start(so, Options(EntityType::kClient, 1)));
  p.server_d.set_echo(true);
  auto conn = p.client->Connect(p.addr, ConnectOptions{});
  ASSERT_TRUE(conn.ok()) << conn.status();
  constexpr size_t kPings = 100;
  for (size_t i = 0; i < kPings; ++i) {
    ASSERT_TRUE((*conn)->Send(Message{1, Bytes(64, static_cast<int>(i))}).ok());
    ASSERT_TRUE(p.client_d.WaitMessages(i + 1, absl::Seconds(10))) << "echo " << i;
    absl::SleepFor(absl::Milliseconds(2));
  }
  auto ss = RdmaStatsOf(*p.server);
  auto cs = RdmaStatsOf(*p.client);
  ASSERT_TRUE(ss.has_value());
  ASSERT_TRUE(cs.has_value());
  *server = LoopCounts{ss->cq_idle_periods, ss->cq_sleeps_at_once};
  *client = LoopCounts{cs->cq_idle_periods, cs->cq_sleeps_at_once};
}

TEST(RdmaMessenger, CompletionThreadStopsSpinningWhenWorkIsFarApart) {
  LoopCounts s, c;
  ASSERT_NO_FATAL_FAILURE(PingEvery2Ms(/*adaptive=*/true, &s, &c));
  EXPECT_GE(s.idle_periods, 100u);  // at least one per ping
  EXPECT_GE(s.sleeps_at_once * 3, s.idle_periods)
      << s.sleeps_at_once << " of " << s.idle_periods << " slept at once";
  ASSERT_NO_FATAL_FAILURE(PingEvery2Ms(/*adaptive=*/false, &s, &c));
  EXPECT_GE(s.idle_periods, 100u);
  EXPECT_EQ(s.sleeps_at_once, 0u) << "of " << s.idle_periods << ": a fixed spin never sleeps at once";
}

// By default an OSD's completion thread adapts its spin and a client's spins in full (the
// thread that collects a lone write's acknowledgement: docs/BENCHMARKS.md "Session 28").
TEST(RdmaMessenger, ClientsSpinInFullAndOsdsAdaptByDefault) {
  LoopCounts s, c;
  ASSERT_NO_FATAL_FAILURE(PingEvery2Ms(std::nullopt, &s, &c));
  EXPECT_GE(s.idle_periods, 100u);
  EXPECT_GE(s.sleeps_at_once * 3, s.idle_periods)
      << "the OSD: " << s.sleeps_at_once << " of " << s.idle_periods << " slept at once";
  EXPECT_GE(c.idle_periods, 100u);
  EXPECT_EQ(c.sleeps_at_once, 0u) << "the client: of " << c.idle_periods;
}

// Each record tells the OSD how many of its writer's records were in flight on the ring
// when it was written (RecordHeader::writer_depth), or the caller's own count of its
// writes pending to that peer (RecordDesc::writer_depth) when that is larger: the OSD's
// pollers nap rather than spin for a writer with a deep queue.
TEST(RdmaMessenger, RecordsCarryTheWritersQueueDepth) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);
  drain.set_paused(true);  // nothing released: each write finds the ones before in flight
  constexpr size_t kRecords = 6;
  for (size_t i = 0; i < kRecords; ++i) {
    const std::string oid = "depth." + std::to_string(i);
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE(
        p.conn->WriteRecord(d, Bytes(512, static_cast<uint32_t>(i)), absl::Seconds(10)).ok());
  }
  drain.set_paused(false);
  ASSERT_TRUE(drain.WaitRecords(kRecords)) << drain.error();
  // All released and acknowledged: the next write is alone again.
  ASSERT_TRUE(p.client_d.WaitAcks(kRecords));
  RecordDesc d;
  d.oid = "depth.alone";
  d.tid = kRecords + 1;
  ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(512, 7), absl::Seconds(10)).ok());
  ASSERT_TRUE(drain.WaitRecords(kRecords + 1)) << drain.error();
  ASSERT_TRUE(p.client_d.WaitAcks(kRecords + 1));
  // The caller counts 9 writes pending to this peer (its application's queue): that is
  // sent, though none is in flight on the ring.
  d.oid = "depth.caller";
  d.tid = kRecords + 2;
  d.writer_depth = 9;
  ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(512, 8), absl::Seconds(10)).ok());
  ASSERT_TRUE(drain.WaitRecords(kRecords + 2)) << drain.error();
  const auto seen = drain.records();
  for (size_t i = 0; i < kRecords; ++i) EXPECT_EQ(seen[i].writer_depth, i) << "record " << i;
  EXPECT_EQ(seen[kRecords].writer_depth, 0u) << "written with nothing in flight";
  EXPECT_EQ(seen[kRecords + 1].writer_depth, 9u) << "the caller's count";
}

TEST(RdmaMessenger, RingRecordsWrapByteIdenticalWithNoReceiveCopy) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);
  std::vector<std::string> payloads;
  const size_t kRecords = 300;  // ~3.5 laps of a 256 KiB ring
  for (size_t i = 0; i < kRecords; ++i) {
    payloads.push_back(Bytes(1000 + (i * 7919) % 5000, static_cast<uint32_t>(i)));
    const std::string oid = "obj." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE(p.conn->WriteRecord(d, payloads.back(), absl::Seconds(10)).ok()) << i;
  }
  ASSERT_TRUE(drain.WaitRecords(kRecords)) << drain.error();
  auto seen = drain.records();
  for (size_t i = 0; i < kRecords; ++i) {
    EXPECT_EQ(seen[i].oid, "obj." + std::to_string(i));
    EXPECT_EQ(seen[i].tid, i + 1);
    EXPECT_TRUE(seen[i].payload == payloads[i]) << "record " << i;
    EXPECT_TRUE(seen[i].payload_in_ring) << "record " << i;
  }
  // Credits came back as RDMA writes into the client's control region, not as messages:
  // the client received none, yet 3.5 laps of records got ring space.
  auto ss = RdmaStatsOf(*p.server);
  ASSERT_TRUE(ss.has_value());
  EXPECT_GT(ss->ring_credit_writes, 0u);
  EXPECT_EQ(p.client->counters().msgs_received, 0u);
  EXPECT_EQ(p.server->counters().msgs_received, 0u);
  EXPECT_EQ(p.server->counters().records_received, kRecords);
  EXPECT_EQ(p.client->counters().msgs_sent, 0u);
}

// A client that polls (Messenger::Poll) gets its acknowledgements through those calls --
// the completion thread stands back meanwhile -- including those of a connection opened
// after polling began.
TEST(RdmaMessenger, PollingCallerCollectsAcksOfConnectionsOpenedLater) {
  struct AckRecorder : Recorder {
    void OnRecordsAcked(const ConnectionRef&, absl::Span<const RecordAck> acks) override {
      absl::MutexLock l(&mu);
      for (const RecordAck& a : acks) {
        ++count[a.tid];
        if (a.code != absl::StatusCode::kOk) ++failed;
        if (std::this_thread::get_id() == poller) ++on_poller;
      }
    }
    absl::Mutex mu;
    std::map<uint64_t, int> count;
    int failed = 0, on_poller = 0;
    std::thread::id poller = std::this_thread::get_id();
  } client_d;
  Recorder server_d[2];
  std::unique_ptr<Messenger> server[2];
  std::string addr[2];
  for (int i = 0; i < 2; ++i) {
    auto s = Messenger::Create(Options(EntityType::kOsd, i), &server_d[i]);
    ASSERT_TRUE(s.ok()) << s.status();
    server[i] = std::move(*s);
    auto a = server[i]->Bind("127.0.0.1:0");
    ASSERT_TRUE(a.ok()) << a.status();
    addr[i] = *a;
  }
  // The completion thread stands back for as long as the test runs, not just 200 us (this
  // thread may lose its core for longer on a busy 2-core VM).
  MessengerOptions co = Options(EntityType::kClient, 9);
  co.backend_options["rdma_app_poll_window_us"] = "60000000";
  auto client = Messenger::Create(co, &client_d);
  ASSERT_TRUE(client.ok()) << client.status();
  auto acked = [&] {
    absl::MutexLock l(&client_d.mu);
    return client_d.count.size();
  };
  constexpr uint64_t kPerServer = 50;
  std::vector<std::unique_ptr<Drainer>> drains;
  for (int i = 0; i < 2; ++i) {
    ConnectOptions co;
    co.want_ring = true;
    auto conn = (*client)->Connect(addr[i], co);  // the second one after polling began
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(server_d[i].WaitRings(1));
    auto [sconn, ring] = server_d[i].ring(0);
    // Paused from the start: nothing is acked before we poll.
    drains.push_back(std::make_unique<Drainer>(sconn, ring, /*sleep=*/false,
                                               absl::Microseconds(50), /*paused=*/true));
    for (uint64_t k = 1; k <= kPerServer; ++k) {
      const std::string oid = "obj." + std::to_string(k);  // d.oid is a view of it
      RecordDesc d;
      d.oid = oid;
      d.tid = i * kPerServer + k;
      ASSERT_TRUE((*conn)->WriteRecord(d, Bytes(2048, k), absl::Seconds(10)).ok());
    }
    ASSERT_EQ(acked(), i * kPerServer);
    (*client)->Poll();
    drains.back()->set_paused(false);
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (acked() < (i + 1) * kPerServer && absl::Now() < deadline) (*client)->Poll();
    ASSERT_EQ(acked(), (i + 1) * kPerServer) << "server " << i;
    absl::MutexLock l(&client_d.mu);
    // All but a few: a completion the completion thread handles at the moment Poll()
    // gathered acks may deliver them (rare; exactly once either way).
    EXPECT_GE(client_d.on_poller, static_cast<int>(kPerServer) - 5) << "server " << i;
    client_d.on_poller = 0;
  }
  absl::MutexLock l(&client_d.mu);
  for (const auto& [tid, n] : client_d.count) EXPECT_EQ(n, 1) << "tid " << tid;
  EXPECT_EQ(client_d.failed, 0);
  drains.clear();
  (*client)->Shutdown();
  for (auto& s : server) s->Shutdown();
}

TEST(RdmaMessenger, CreditBackpressureTimesOutThenResumes) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  const std::string payload = Bytes(60000, 1);
  RecordDesc d;
  d.oid = "o";
  int written = 0;
  absl::Status s;
  while ((s = p.conn->WriteRecord(d, payload, absl::Milliseconds(200))).ok()) ++written;
  EXPECT_TRUE(absl::IsDeadlineExceeded(s)) << s;
  EXPECT_GE(written, 3);
  EXPECT_LE(written, 5);  // a 256 KiB ring holds four 60 KB records
  EXPECT_GE(p.client->counters().ring_credit_waits, 1u);
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);
  ASSERT_TRUE(drain.WaitRecords(written));
  for (int i = 0; i < 20; ++i) {
    ASSERT_TRUE(p.conn->WriteRecord(d, payload, absl::Seconds(5)).ok());
  }
  ASSERT_TRUE(drain.WaitRecords(written + 20)) << drain.error();
}

TEST(RdmaMessenger, DoorbellWakesSleepingPoller) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/true, absl::Microseconds(10));
  RecordDesc d;
  d.oid = "o";
  for (int i = 0; i < 30; ++i) {
    absl::SleepFor(absl::Milliseconds(20));  // the poller goes to sleep in between
    const absl::Time t0 = absl::Now();
    ASSERT_TRUE(p.conn->WriteRecord(d, "x" + std::to_string(i), absl::Seconds(5)).ok());
    ASSERT_TRUE(drain.WaitRecords(static_cast<size_t>(i) + 1, absl::Seconds(5)))
        << "lost wake-up at record " << i << ": doorbells sent "
        << RdmaStatsOf(*p.client)->doorbells_sent << " received "
        << RdmaStatsOf(*p.server)->doorbells_received << " sleep words "
        << RdmaStatsOf(*p.server)->sleep_word_writes << " sleeps " << drain.sleeps()
        << " " << drain.Debug() << " control sends c/s " << RdmaStatsOf(*p.client)->control_sends << "/"
        << RdmaStatsOf(*p.server)->control_sends;
    EXPECT_LT(absl::Now() - t0, absl::Seconds(2));
  }
  EXPECT_GE(drain.sleeps(), 10);
  auto cs = RdmaStatsOf(*p.client);
  auto ss = RdmaStatsOf(*p.server);
  EXPECT_GE(cs->doorbells_sent, 10u);
  EXPECT_GE(ss->doorbells_received, 10u);
  EXPECT_GE(ss->sleep_word_writes, 20u);
  // A doorbell with nothing else to say is a WRITE_WITH_IMM, not a CONTROL SEND.
  EXPECT_LT(cs->control_sends, cs->doorbells_sent / 2) << "doorbells " << cs->doorbells_sent;
}

// A sleeping poller gets one doorbell, however many records are published before it
// wakes: it drains its eventfd before it announces the sleep, so that doorbell cannot be
// swallowed, and it looks at the whole ring when it wakes. (It used to be one doorbell
// per record -- on the soft provider each costs the writer a sendmsg and three thread
// wake-ups, and durable small writes over rdma ran slower than over tcp.)
TEST(RdmaMessenger, OneDoorbellPerPollerSleep) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  // This thread is the poller: it announces a sleep and does not wake up yet.
  p.ring->SetPollerSleeping(true);
  constexpr int kRecords = 20;
  RecordDesc d;
  d.oid = "o";
  for (int i = 0; i < kRecords; ++i) {
    d.tid = static_cast<uint64_t>(i) + 1;
    ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(512, i), absl::Seconds(5)).ok()) << i;
  }
  // The doorbell arrives (the ring's eventfd is signalled) ...
  pollfd pfd{p.ring->wait_fd(), POLLIN, 0};
  ASSERT_EQ(poll(&pfd, 1, 5000), 1) << "no doorbell for a sleeping poller";
  absl::SleepFor(absl::Milliseconds(50));  // let any further doorbell land too
  auto cs = RdmaStatsOf(*p.client);
  auto ss = RdmaStatsOf(*p.server);
  EXPECT_EQ(cs->doorbells_sent, 1u);
  EXPECT_EQ(ss->doorbells_received, 1u);
  // ... and the woken poller finds every record.
  p.ring->SetPollerSleeping(false);
  Drainer drain(p.sconn, p.ring, /*sleep=*/true, absl::Microseconds(10));
  ASSERT_TRUE(drain.WaitRecords(kRecords, absl::Seconds(5))) << drain.error();
  // Each later sleep gets its own doorbell.
  for (int i = 0; i < 5; ++i) {
    while (drain.sleeps() <= i) absl::SleepFor(absl::Milliseconds(1));
    absl::SleepFor(absl::Milliseconds(5));
    d.tid = kRecords + static_cast<uint64_t>(i) + 1;
    ASSERT_TRUE(p.conn->WriteRecord(d, "late", absl::Seconds(5)).ok());
    ASSERT_TRUE(drain.WaitRecords(kRecords + i + 1, absl::Seconds(5))) << "record " << i;
  }
  EXPECT_GE(RdmaStatsOf(*p.client)->doorbells_sent, 6u);
}

TEST(RdmaMessenger, WrongKeyIsRefusedAndNeverDispatched) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(Options(EntityType::kOsd, 0),
                                  Options(EntityType::kClient, 1, "wrong")));
  ConnectOptions co;
  co.policy = Policy::Lossy();
  auto conn = p.client->Connect(p.addr, co);
  ASSERT_TRUE(conn.ok());
  ASSERT_TRUE(p.client_d.WaitRefused(1));
  EXPECT_TRUE(absl::IsUnauthenticated(p.client_d.refused()[0])) << p.client_d.refused()[0];
  // The server counts its failure when it reads the client's CLOSE, which may come after
  // the client's own refusal.
  for (int i = 0; i < 500 && p.server->counters().auth_failures == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(p.server->counters().auth_failures, 1u);
  EXPECT_EQ(p.server_d.accepted(), 0u);
  EXPECT_FALSE((*conn)->is_connected());
}

// Connects `m` to `addr` with a ring, lossy (one attempt), and waits for the refusal that
// must come; `why` is the first one `d` recorded.
void ConnectRingRefused(Messenger& m, Recorder& d, const std::string& addr, ConnectionRef* conn,
                        absl::Status* why) {
  ConnectOptions co;
  co.want_ring = true;
  co.policy = Policy::Lossy();
  auto c = m.Connect(addr, co);
  ASSERT_TRUE(c.ok()) << c.status();
  *conn = *c;
  ASSERT_TRUE(d.WaitRefused(1));
  *why = d.refused()[0];
}

// The registered-memory budget (rdma_max_registered_mb). An OSD whose budget holds one
// session refuses the second with the reason -- RESOURCE_EXHAUSTED, naming the option --
// and keeps serving the first; nothing it registered goes over the budget.
TEST(RdmaMessenger, RegisteredMemoryBudgetRefusesASessionAndKeepsServing) {
  MessengerOptions so = Options(EntityType::kOsd, 0);
  so.backend_options["rdma_max_registered_mb"] = "5";  // pools ~4 MiB + a 256 KiB ring
  so.backend_options["rdma_buffer_bytes"] = "65536";   // 2 x 32 x 64 KiB pools
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, Options(EntityType::kClient, 1)));
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);

  Recorder second_d;
  auto second = Messenger::Create(Options(EntityType::kClient, 2), &second_d);
  ASSERT_TRUE(second.ok()) << second.status();
  ConnectionRef refused;
  absl::Status why;
  ASSERT_NO_FATAL_FAILURE(ConnectRingRefused(**second, second_d, p.addr, &refused, &why));
  EXPECT_TRUE(absl::IsResourceExhausted(why)) << why;
  EXPECT_NE(why.message().find("rdma_max_registered_mb"), std::string::npos) << why;
  EXPECT_FALSE(refused->is_connected());
  auto ss = RdmaStatsOf(*p.server);
  EXPECT_EQ(ss->registered_max_bytes, 5u << 20);
  EXPECT_GE(ss->registration_refusals, 1u);
  EXPECT_GT(ss->registered_bytes, 4u << 20) << "the served session's pools and ring";
  EXPECT_LE(ss->registered_bytes, ss->registered_max_bytes);
  EXPECT_EQ(p.server_d.accepted(), 1u) << "a refused session never reaches the dispatcher";

  // The first client is served as before.
  RecordDesc d;
  d.oid = "still.served";
  for (int i = 0; i < 50; ++i) {
    d.tid = static_cast<uint64_t>(i) + 1;
    ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(3000, i), absl::Seconds(5)).ok()) << i;
  }
  ASSERT_TRUE(drain.WaitRecords(50)) << drain.error();
  (*second)->Shutdown();
}

// A session whose ring does not fit (its pools do) is refused the same way, and the
// messenger goes on: a session without a ring is served. (The refusal used to be handled
// under the connection lock that its reset takes: the accepting thread hung for good.)
TEST(RdmaMessenger, RingOverTheBudgetIsRefusedAndTheMessengerGoesOn) {
  MessengerOptions so = Options(EntityType::kOsd, 0);
  UseFixedRing(&so);
  so.backend_options["rdma_max_registered_mb"] = "6";  // pools ~4 MiB fit, + the ring not
  so.backend_options["rdma_buffer_bytes"] = "65536";   // 2 x 32 x 64 KiB pools
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, Options(EntityType::kClient, 1)));
  p.server_d.set_echo(true);
  ConnectionRef refused;
  absl::Status why;
  ASSERT_NO_FATAL_FAILURE(ConnectRingRefused(*p.client, p.client_d, p.addr, &refused, &why));
  EXPECT_TRUE(absl::IsResourceExhausted(why)) << why;
  EXPECT_NE(why.message().find("receive ring"), std::string::npos) << why;
  EXPECT_EQ(RdmaStatsOf(*p.server)->registration_refusals, 1u);
  ASSERT_TRUE(p.client_d.WaitResets(1));  // the refused (lossy) connection is closed
  auto plain = p.client->Connect(p.addr, ConnectOptions{});
  ASSERT_TRUE(plain.ok());
  ASSERT_TRUE((*plain)->Send(Message{3, "hello"}).ok());
  ASSERT_TRUE(p.client_d.WaitMessages(1)) << "the messenger stopped serving after a refusal";
  EXPECT_EQ(p.client_d.messages()[0].payload, "hello");
}

// A client whose own budget cannot hold the staging mirror of the OSD's ring refuses the
// session before either side has set anything up: the reason on both sides, nothing left
// registered on the OSD, and writes on the refused connection fail cleanly. (The mirror
// used to be charged after setup had ended: a refusal left a session without a mirror,
// and a write on it crashed.)
TEST(RdmaMessenger, ClientMirrorOverItsBudgetIsRefusedBeforeSetup) {
  MessengerOptions so = Options(EntityType::kOsd, 0);
  UseFixedRing(&so);
  MessengerOptions co = Options(EntityType::kClient, 1);
  co.backend_options["rdma_max_registered_mb"] = "6";  // pools ~4 MiB fit, + the mirror not
  co.backend_options["rdma_buffer_bytes"] = "65536";   // 2 x 32 x 64 KiB pools
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  ConnectionRef conn;
  absl::Status why;
  ASSERT_NO_FATAL_FAILURE(ConnectRingRefused(*p.client, p.client_d, p.addr, &conn, &why));
  EXPECT_TRUE(absl::IsResourceExhausted(why)) << why;
  EXPECT_NE(why.message().find("staging mirror"), std::string::npos) << why;
  EXPECT_EQ(RdmaStatsOf(*p.client)->registration_refusals, 1u);
  ASSERT_TRUE(p.client_d.WaitResets(1));
  RecordDesc d;
  d.oid = "x";
  EXPECT_FALSE(conn->WriteRecord(d, "", absl::Milliseconds(100)).ok());
  EXPECT_FALSE(conn->WriteRecord(d, "abc", absl::Milliseconds(100)).ok());
  // The OSD never accepted the session and let go of what it had registered for it.
  for (int i = 0; i < 200 && RdmaStatsOf(*p.server)->registered_bytes != 0; ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(RdmaStatsOf(*p.server)->registered_bytes, 0u);
  EXPECT_EQ(p.server_d.accepted(), 0u);
}

// A client whose budget has no room for a zero-copy registration copies the payload into
// its (registered) staging mirror instead: every write succeeds, byte-identical.
TEST(RdmaMessenger, ZeroCopyOverTheBudgetFallsBackToStaging) {
  MessengerOptions so = Options(EntityType::kOsd, 0);
  UseFixedRing(&so);
  MessengerOptions co = Options(EntityType::kClient, 1);
  // Pools 2 x 32 x 16 KiB + the 4 MiB mirror + control region: ~5 MiB of a 6 MiB budget,
  // so a 1.5 MiB payload never fits.
  co.backend_options["rdma_buffer_bytes"] = "16384";
  co.backend_options["rdma_max_registered_mb"] = "6";
  co.backend_options["rdma_zero_copy_min_bytes"] = "65536";
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);
  std::vector<std::string> want;
  for (int i = 0; i < 6; ++i) {
    want.push_back(Bytes((12 << 17) + i, 70 + i));  // 1.5 MiB
    auto buf = std::make_shared<const std::string>(want.back());
    const std::string oid = "big." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = static_cast<uint64_t>(i) + 1;
    ASSERT_TRUE(p.conn->WriteRecordShared(d, *buf, buf, absl::Seconds(10)).ok()) << i;
  }
  ASSERT_TRUE(drain.WaitRecords(want.size())) << drain.error();
  auto seen = drain.records();
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(seen[i].payload == want[i]) << i;
  auto cs = RdmaStatsOf(*p.client);
  EXPECT_EQ(cs->zero_copy_records, 0u);
  EXPECT_GE(cs->record_payload_bytes_staged, 6u * (12 << 17));
  EXPECT_GE(cs->registration_refusals, 6u);
  EXPECT_LE(cs->registered_bytes, cs->registered_max_bytes);
}

TEST(RdmaMessenger, LosslessSurvivesInjectedFaults) {
  Pair p;
  MessengerOptions so = Options(EntityType::kOsd, 0), co = Options(EntityType::kClient, 1);
  co.inject_socket_failures = 37;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  p.server_d.set_echo(true);
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/true);
  const int kN = 300;
  std::vector<std::string> payloads;
  for (int i = 0; i < kN; ++i) {
    payloads.push_back(Bytes(2000 + i, i));
    const std::string oid = "obj" + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE(p.conn->WriteRecord(d, payloads.back(), absl::Seconds(10)).ok());
    ASSERT_TRUE(p.conn->Send(Message{1, std::to_string(i)}).ok());
  }
  ASSERT_TRUE(drain.WaitRecords(kN, absl::Seconds(60))) << drain.error();
  ASSERT_TRUE(p.client_d.WaitMessages(kN, absl::Seconds(60)));
  auto seen = drain.records();
  ASSERT_EQ(seen.size(), static_cast<size_t>(kN));
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(seen[i].tid, static_cast<uint64_t>(i + 1));
    EXPECT_TRUE(seen[i].payload == payloads[i]);
  }
  auto echoed = p.client_d.messages();
  for (int i = 0; i < kN; ++i) EXPECT_EQ(echoed[i].payload, std::to_string(i));
  EXPECT_GE(p.client->counters().reconnects, 3u);
  // Every resumed session re-registered the ring under a new key (records kept).
  EXPECT_GE(RdmaStatsOf(*p.server)->ring_reregistrations, 3u);
  EXPECT_EQ(RdmaStatsOf(*p.server)->ring_reregistrations, p.server->counters().reconnects);
}

// A client whose record stays unacknowledged for longer than its completion thread naps
// (~1 ms) asks the OSD for a credit wake-up (a WRITE_WITH_IMM) and sleeps on its CQ; the OSD writes the
// credit that releases the record WITH_IMM, which wakes it, and the ack is delivered.
TEST(RdmaMessenger, ClientAwaitingAnAckSleepsUntilTheCreditWakesIt) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/true, absl::Microseconds(50), /*paused=*/true);
  RecordDesc d{"slow", 1, 0, 0};
  const uint64_t control_sends = RdmaStatsOf(*p.client)->control_sends;
  ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(4096, 3), absl::Seconds(5)).ok());
  uint64_t asked = 0;
  for (int i = 0; i < 200 && asked == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
    asked = RdmaStatsOf(*p.client)->credit_wakeups_asked;
  }
  EXPECT_EQ(asked, 1u) << "one ask per wait: the thread sleeps until the wake-up comes";
  EXPECT_EQ(RdmaStatsOf(*p.client)->control_sends, control_sends)
      << "the ask (and a doorbell) are WRITE_WITH_IMMs, not CONTROL SENDs";
  EXPECT_TRUE(p.client_d.acked().empty());
  drain.set_paused(false);
  ASSERT_TRUE(drain.WaitRecords(1)) << drain.error();
  ASSERT_TRUE(p.client_d.WaitAcks(1)) << "the credit wake-up did not deliver the ack";
  EXPECT_EQ(p.client_d.acked(), std::vector<uint64_t>{1});
  EXPECT_EQ(RdmaStatsOf(*p.server)->credit_wakeups_sent, 1u);
  // The session goes on as before (the wake-up took one of the client's receives).
  ASSERT_TRUE(p.conn->WriteRecord(RecordDesc{"next", 2, 0, 0}, "x", absl::Seconds(5)).ok());
  ASSERT_TRUE(p.client_d.WaitAcks(2));
  p.server_d.set_echo(true);
  ASSERT_TRUE(p.conn->Send(Message{9, "still talking"}).ok());
  ASSERT_TRUE(p.client_d.WaitMessages(1));
}

// A writer that finds its ring full makes the client ask for a ring 4x as large: once
// what it wrote is released, it reconnects and resumes, and the server replaces the ring
// with one that goes on with the session's seqs from position 0 (PROTOCOL.md "Ring
// sizes"); the blocked write lands there.
TEST(RdmaMessenger, FullRingGrowsOnceItsRecordsAreReleased) {
  Pair p;
  MessengerOptions so = Options(EntityType::kOsd, 0), co = Options(EntityType::kClient, 1);
  so.ring_bytes = 4 << 20;
  so.backend_options["rdma_ring_min_kb"] = "256";
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  ASSERT_EQ(p.ring->bytes(), 256u << 10) << "the ring starts at rdma_ring_min_kb";
  auto first = std::make_unique<Drainer>(p.sconn, p.ring, /*sleep=*/true,
                                         absl::Microseconds(50), /*paused=*/true);
  // 60 KiB records: four fill the 256 KiB ring (a record may take half of it).
  std::vector<std::string> want;
  for (int i = 0; i < 4; ++i) {
    want.push_back(Bytes(60 << 10, 40 + i));
    const std::string oid = "full." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d{oid, static_cast<uint64_t>(i + 1), 0, 0};
    ASSERT_TRUE(p.conn->WriteRecord(d, want.back(), absl::Seconds(5)).ok()) << i;
  }
  want.push_back(Bytes(60 << 10, 44));
  const uint64_t waits_before = p.client->counters().ring_credit_waits;
  absl::Status blocked = absl::UnknownError("not done");
  std::thread writer([&] {
    RecordDesc d{"full.4", 5, 0, 0};
    blocked = p.conn->WriteRecord(d, want.back(), absl::Seconds(20));
  });
  // The writer finds the ring full, asks to grow, then waits for room (counted): a fixed
  // delay could end before a loaded machine ran it that far, and the four released first
  // would make room without a resize.
  for (int i = 0; i < 2000 && p.client->counters().ring_credit_waits == waits_before; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  EXPECT_GT(p.client->counters().ring_credit_waits, waits_before) << "the writer never waited";
  absl::SleepFor(absl::Milliseconds(200));  // the completion thread starts the resize
  first->set_paused(false);                  // the four are released: the resize goes on
  ASSERT_TRUE(first->WaitRecords(4)) << first->error();
  ASSERT_TRUE(p.server_d.WaitRings(2)) << "no second ring";
  auto [sconn, ring] = p.server_d.ring(1);
  EXPECT_EQ(sconn.get(), p.sconn.get()) << "the same session";
  EXPECT_EQ(ring->bytes(), 1u << 20);
  EXPECT_EQ(ring->first_seq(), first->records().size() + 1u) << "seqs go on";
  Drainer second(sconn, ring, /*sleep=*/true);
  writer.join();
  ASSERT_TRUE(blocked.ok()) << blocked;
  ASSERT_TRUE(second.WaitRecords(1)) << second.error() << " " << second.Debug();
  EXPECT_EQ(second.records()[0].tid, 5u);
  EXPECT_TRUE(second.records()[0].payload == want[4]);
  const auto seen = first->records();
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i].payload == want[i]) << i;
  EXPECT_EQ(RdmaStatsOf(*p.client)->ring_resizes, 1u);
  EXPECT_EQ(RdmaStatsOf(*p.server)->ring_resizes, 1u);
  EXPECT_EQ(p.conn->max_record_payload(), MaxRecordPayload(1 << 20));
  // Acknowledged once each, in order, across the resize.
  ASSERT_TRUE(p.client_d.WaitAcks(5));
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(p.client_d.acked(), (std::vector<uint64_t>{1, 2, 3, 4, 5}));
}

// WriteRecordShared payloads above rdma_zero_copy_min_bytes are written from the caller's
// memory (registered in place while unacknowledged), smaller ones from the staging mirror;
// across injected link faults and resends every record arrives intact, every caller buffer
// is let go once acknowledged and its registration with it.
TEST(RdmaMessenger, LargeSharedPayloadsAreWrittenFromCallerMemory) {
  Pair p;
  MessengerOptions so = Options(EntityType::kOsd, 0), co = Options(EntityType::kClient, 1);
  UseFixedRing(&so);
  co.ring_bytes = so.ring_bytes;
  co.backend_options["rdma_zero_copy_min_bytes"] = "65536";
  co.inject_socket_failures = 13;
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/true);
  const uint64_t registered_before = RdmaStatsOf(*p.client)->registered_bytes;
  constexpr int kN = 60;
  std::vector<std::string> want;
  std::vector<std::weak_ptr<const std::string>> owners;
  uint64_t staged = 0, large = 0;
  for (int i = 0; i < kN; ++i) {
    const size_t size = i % 3 == 0 ? 1000 + i : 65536 + i * 4099;  // to ~300 KiB
    want.push_back(Bytes(size, 900 + i));
    if (size >= 65536) {
      ++large;
    } else {
      staged += size;
    }
    // Let go too early, a buffer shows it: its deleter scribbles over the bytes first, so
    // a resend from it (after an injected fault) fails the ring's crc check.
    std::shared_ptr<const std::string> buf(new std::string(want.back()), [](const std::string* b) {
      std::memset(const_cast<char*>(b->data()), 0xee, b->size());
      delete b;
    });
    owners.push_back(buf);
    const std::string_view body(*buf);
    const std::string oid = "zc." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE(p.conn->WriteRecordShared(d, body, std::move(buf), absl::Seconds(20)).ok())
        << i;
  }
  ASSERT_TRUE(drain.WaitRecords(kN, absl::Seconds(60))) << drain.error();
  auto seen = drain.records();
  for (int i = 0; i < kN; ++i) {
    EXPECT_EQ(seen[i].tid, static_cast<uint64_t>(i + 1));
    EXPECT_TRUE(seen[i].payload == want[i]) << "record " << i;
    EXPECT_TRUE(seen[i].payload_in_ring) << "record " << i << " was copied on the OSD side";
  }
  auto held = [&] {
    int n = 0;
    for (const auto& w : owners) n += !w.expired();
    return n;
  };
  for (int t = 0; t < 500 && held() > 0; ++t) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(held(), 0) << "caller buffers still referenced after every record was acked";
  auto cs = RdmaStatsOf(*p.client);
  EXPECT_EQ(cs->zero_copy_records, large);
  EXPECT_EQ(cs->record_payload_bytes_staged, staged) << "large payloads were copied";
  // The client's CPU copied the staged payloads, and on the soft device (whose WRITE is a
  // memcpy by the poster) every payload once more; a real HCA's DMA is no CPU copy.
  // The OSD's CPU copied none: the bytes were placed in its ring.
  const uint64_t copied_tx = p.client->counters().payload_bytes_copied_tx;
  const uint64_t total = std::accumulate(want.begin(), want.end(), uint64_t{0},
                                         [](uint64_t n, const std::string& w) { return n + w.size(); });
  EXPECT_TRUE(copied_tx == staged || copied_tx == staged + total)
      << copied_tx << " bytes copied, staged " << staged << " of " << total;
  EXPECT_EQ(p.server->counters().payload_bytes_copied_rx, 0u);
  // Retired transports (one per injected fault) stay registered for their linger time.
  for (int t = 0; t < 500 && RdmaStatsOf(*p.client)->registered_bytes != registered_before; ++t) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_EQ(RdmaStatsOf(*p.client)->registered_bytes, registered_before)
      << "payload registrations outlived acks";
  EXPECT_GE(p.client->counters().reconnects, 2u) << "the faults really happened";
}

// Payloads in the messenger's record buffers (AllocRecordBuffer) are written from there at
// any size: no staging copy, no registration per write (the buffers were registered when
// made, and a buffer let go is reused for the next of its size); a buffer the budget could
// not register is plain memory and its writes are staged, still intact.
TEST(RdmaMessenger, RecordBufferPayloadsAreNeitherStagedNorRegisteredPerWrite) {
  Pair p;
  MessengerOptions so = Options(EntityType::kOsd, 0), co = Options(EntityType::kClient, 1);
  UseFixedRing(&so);
  co.ring_bytes = so.ring_bytes;
  co.backend_options["rdma_max_registered_mb"] = "48";
  ASSERT_NO_FATAL_FAILURE(p.Start(so, co));
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing());
  Drainer drain(p.sconn, p.ring, /*sleep=*/true);
  std::vector<std::string> want;
  uint64_t tid = 0;
  auto write_from = [&](const RecordBufferRef& buf, size_t at, size_t size) {
    want.push_back(Bytes(size, 300 + tid));
    std::memcpy(buf->data() + at, want.back().data(), size);
    const std::string oid = "rb." + std::to_string(tid);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = ++tid;
    return p.conn->WriteRecordShared(d, std::string_view(buf->data() + at, size), buf,
                                     absl::Seconds(20));
  };
  // Round 1: 4 KiB and 60 KiB payloads (staged if they were not in a buffer), one of them
  // a slice in the middle of a larger buffer.
  std::weak_ptr<RecordBuffer> round1[2];
  {
    RecordBufferRef small = p.client->AllocRecordBuffer(4096);
    RecordBufferRef big = p.client->AllocRecordBuffer(200000);
    round1[0] = small;
    round1[1] = big;
    ASSERT_TRUE(write_from(small, 0, 4096).ok());
    ASSERT_TRUE(write_from(big, 70000, 60000).ok());
    ASSERT_TRUE(drain.WaitRecords(2, absl::Seconds(20))) << drain.error();
  }
  auto cs = RdmaStatsOf(*p.client);
  EXPECT_EQ(cs->record_buffers_registered, 2u);
  EXPECT_EQ(cs->record_buffer_records, 2u);
  EXPECT_EQ(cs->zero_copy_records, 2u);
  EXPECT_EQ(cs->record_payload_bytes_staged, 0u) << "a record buffer's payload was copied";
  // Round 2, once round 1's buffers are back on the free lists (a reference goes before the
  // buffer's destructor returns it, so wait for the pool's gauge, not for the references):
  // the same sizes reuse them.
  const uint64_t round1_bytes = 4096 + 262144;
  for (int t = 0; t < 500 && RdmaStatsOf(*p.client)->record_buffer_cached_bytes != round1_bytes;
       ++t) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(round1[0].expired() && round1[1].expired()) << "buffers held after their acks";
  ASSERT_EQ(RdmaStatsOf(*p.client)->record_buffer_cached_bytes, round1_bytes)
      << "round 1's buffers did not go back on the free lists";
  {
    RecordBufferRef again = p.client->AllocRecordBuffer(4000);  // the 4 KiB size
    RecordBufferRef big = p.client->AllocRecordBuffer(150000);  // the 256 KiB size
    ASSERT_TRUE(write_from(again, 0, 4000).ok());
    ASSERT_TRUE(write_from(big, 0, 150000).ok());
  }
  ASSERT_TRUE(drain.WaitRecords(4, absl::Seconds(20))) << drain.error();
  cs = RdmaStatsOf(*p.client);
  EXPECT_EQ(cs->record_buffers_registered, 2u) << "a buffer of a size let go was registered anew";
  EXPECT_EQ(cs->record_buffer_records, 4u);
  EXPECT_EQ(cs->record_payload_bytes_staged, 0u);
  // A buffer over what is left of the budget is plain memory: staged, counted, intact.
  RecordBufferRef plain = p.client->AllocRecordBuffer(size_t{64} << 20);
  ASSERT_NE(plain, nullptr);
  ASSERT_TRUE(write_from(plain, 123, 100000).ok());
  ASSERT_TRUE(drain.WaitRecords(5, absl::Seconds(20))) << drain.error();
  cs = RdmaStatsOf(*p.client);
  EXPECT_EQ(cs->record_buffers_unregistered, 1u);
  EXPECT_EQ(cs->record_buffer_records, 4u);
  EXPECT_EQ(cs->record_payload_bytes_staged, 100000u);
  auto seen = drain.records();
  ASSERT_EQ(seen.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(seen[i].tid, i + 1);
    EXPECT_TRUE(seen[i].payload == want[i]) << "record " << i;
    EXPECT_TRUE(seen[i].payload_in_ring) << "record " << i;
  }
}

// A client whose RDMA WRITE lands outside the ring it was given (here: its 5th record is
// aimed just past the ring's end) is cut off: the HCA refuses the write (the ring is
// untouched), the OSD side learns it from QP_ACCESS_ERR and ends that session for good --
// counted, with the reason -- whatever its policy, and keeps serving another client.
void OutOfRingWriterIsCutOff(bool lossy, bool late_event = false) {
  // late_event: the soft HCA queues QP_ACCESS_ERR 30 ms after the flushed completions, as
  // HCAs that raise it from a kernel work queue do; the faulted link's QP must still be
  // there to be matched (a destroyed QP's events are gone).
  Pair p;
  MessengerOptions bad = Options(EntityType::kClient, 1);
  bad.backend_options["rdma_inject_out_of_ring_write"] = "5";
  MessengerOptions so = Options(EntityType::kOsd, 0);
  if (late_event) so.backend_options["rdma_soft_async_event_delay_us"] = "30000";
  ASSERT_NO_FATAL_FAILURE(p.Start(so, bad));
  if (lossy) p.server->SetPolicy(EntityType::kClient, Policy::Lossy());
  Recorder good_d;
  auto good = Messenger::Create(Options(EntityType::kClient, 2), &good_d);
  ASSERT_TRUE(good.ok()) << good.status();
  ConnectOptions co;
  co.want_ring = true;
  co.policy = lossy ? Policy::Lossy() : Policy::Lossless();
  auto bad_conn = p.client->Connect(p.addr, co);
  ASSERT_TRUE(bad_conn.ok());
  ASSERT_TRUE(p.server_d.WaitRings(1));
  co.policy = Policy::Lossless();
  auto good_conn = (*good)->Connect(p.addr, co);
  ASSERT_TRUE(good_conn.ok());
  ASSERT_TRUE(p.server_d.WaitRings(2));
  auto [bad_sconn, bad_ring] = p.server_d.ring(0);
  auto [good_sconn, good_ring] = p.server_d.ring(1);
  Drainer bad_drain(bad_sconn, bad_ring, /*sleep=*/true);
  Drainer good_drain(good_sconn, good_ring, /*sleep=*/true);

  std::vector<std::string> payloads;
  for (int i = 0; i < 8; ++i) {
    payloads.push_back(Bytes(3000 + i, 500 + i));
    const std::string oid = "bad." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    (void)(*bad_conn)->WriteRecord(d, payloads.back(), absl::Seconds(2));
  }
  const char* device = std::getenv("MSGR_RDMA_DEVICE");
  const bool rxe = device != nullptr && std::string(device).rfind("rxe", 0) == 0;
  if (rxe) {
    // Linux rxe raises no QP_ACCESS_ERR (device_test): the stray write is refused all the
    // same, but the OSD side only sees a failed link. Lossless: the session resumes and the
    // record is rewritten where it belongs (the injection is one shot); lossy: it ends as
    // after any fault.
    if (lossy) {
      ASSERT_TRUE(p.server_d.WaitResets(1));
    } else {
      ASSERT_TRUE(bad_drain.WaitRecords(8)) << bad_drain.error();
      auto got = bad_drain.records();
      ASSERT_EQ(got.size(), 8u);
      for (int i = 0; i < 8; ++i) EXPECT_TRUE(got[i].payload == payloads[i]) << i;
      EXPECT_GE(p.client->counters().reconnects, 1u);
    }
    EXPECT_EQ(RdmaStatsOf(*p.server)->peer_access_violations, 0u);
  } else if (late_event && lossy) {
    // The flush ended the lossy session first; the late event still names the culprit.
    ASSERT_TRUE(p.server_d.WaitResets(1));
    for (int t = 0; t < 200 && RdmaStatsOf(*p.server)->peer_access_violations == 0; ++t) {
      absl::SleepFor(absl::Milliseconds(5));
    }
    EXPECT_EQ(RdmaStatsOf(*p.server)->peer_access_violations, 1u);
  } else {
    ASSERT_TRUE(p.server_d.WaitResets(1));
    const absl::Status why = p.server_d.resets()[0];
    EXPECT_TRUE(absl::IsPermissionDenied(why)) << why;
    EXPECT_NE(why.message().find("outside the memory it was given"), std::string::npos) << why;
    EXPECT_NE(why.message().find("client.1"), std::string::npos) << why;
    auto stats = RdmaStatsOf(*p.server);
    ASSERT_TRUE(stats.has_value());
    EXPECT_EQ(stats->peer_access_violations, 1u);
    EXPECT_EQ(p.server->counters().protocol_errors, 1u);
    // What reached the ring before the stray write is intact; nothing after it was taken
    // (with a late event the session may have resumed meanwhile and taken later records,
    // rewritten correctly: still intact, in order).
    ASSERT_TRUE(bad_drain.WaitRecords(4)) << bad_drain.error();
    absl::SleepFor(absl::Milliseconds(50));
    const auto got = bad_drain.records();
    if (!late_event) {
      ASSERT_EQ(got.size(), 4u) << "a record after the refused write was delivered";
    }
    for (size_t i = 0; i < got.size(); ++i) {
      EXPECT_EQ(got[i].tid, i + 1);
      EXPECT_TRUE(got[i].payload == payloads[got[i].tid - 1]) << got[i].tid;
    }
    EXPECT_TRUE(bad_drain.error().empty()) << bad_drain.error();
    // Nor is it served again for a while (rdma_cutoff_ban_s): a new session, once it has
    // authenticated, is refused with the reason. (The old connection, lossless, may still
    // be trying to resume: it is marked down first, and any of its refusals before that is
    // not what is checked here.)
    (*bad_conn)->MarkDown();
    const size_t refused_before = p.client_d.refused().size();
    ConnectOptions again;
    again.want_ring = true;
    again.policy = Policy::Lossy();
    auto retry = p.client->Connect(p.addr, again);
    ASSERT_TRUE(retry.ok());
    bool banned = false;
    for (int t = 0; t < 1000 && !banned; ++t) {
      const auto refused = p.client_d.refused();
      for (size_t i = refused_before; i < refused.size(); ++i) {
        banned = banned || (absl::IsPermissionDenied(refused[i]) &&
                            refused[i].message().find("client.1 is not served for another") !=
                                std::string::npos);
      }
      if (!banned) absl::SleepFor(absl::Milliseconds(10));
    }
    EXPECT_TRUE(banned) << "the cut-off client's new session was not refused";
    EXPECT_GE(RdmaStatsOf(*p.server)->cutoff_refusals, 1u);
    EXPECT_EQ(p.server_d.rings(), 2u) << "a banned peer got a ring";
  }

  // The other client is served as before.
  for (int i = 0; i < 50; ++i) {
    const std::string oid = "good." + std::to_string(i);  // d.oid is a view of it
    RecordDesc d;
    d.oid = oid;
    d.tid = i + 1;
    ASSERT_TRUE((*good_conn)->WriteRecord(d, Bytes(4000, i), absl::Seconds(10)).ok()) << i;
  }
  ASSERT_TRUE(good_drain.WaitRecords(50)) << good_drain.error();
  auto seen = good_drain.records();
  for (int i = 0; i < 50; ++i) EXPECT_TRUE(seen[i].payload == Bytes(4000, i)) << i;
  EXPECT_EQ(p.server_d.resets().size(), rxe && !lossy ? 0u : 1u);
  (*good)->Shutdown();
}

TEST(RdmaMessenger, PeerWritingOutsideItsRingIsCutOffAndOthersKeepBeingServed) {
  OutOfRingWriterIsCutOff(/*lossy=*/false);
}

TEST(RdmaMessenger, LossyPeerWritingOutsideItsRingIsCutOffForThatReason) {
  OutOfRingWriterIsCutOff(/*lossy=*/true);
}

TEST(RdmaMessenger, OutOfRingWriterIsCutOffWhenTheEventTrailsTheCompletions) {
  OutOfRingWriterIsCutOff(/*lossy=*/false, /*late_event=*/true);
}

TEST(RdmaMessenger, LossyOutOfRingWriterIsCountedWhenTheEventTrailsTheCompletions) {
  OutOfRingWriterIsCutOff(/*lossy=*/true, /*late_event=*/true);
}

TEST(RdmaMessenger, PeerKilledMidWriteServerKeepsServing) {
  Pair p;
  ASSERT_NO_FATAL_FAILURE(p.Start());
  // The victim writes 50 KB records in a process of its own until it is killed.
  const pid_t child = msgr::testing::SpawnClientChild({"rdma", p.addr, "7", "write", "k3y"});
  ASSERT_GT(child, 0) << "cannot start tests/msg/client_child";
  ASSERT_TRUE(p.server_d.WaitRings(1));
  auto [vconn, vring] = p.server_d.ring(0);
  {
    Drainer victim(vconn, vring, /*sleep=*/false);
    ASSERT_TRUE(victim.WaitRecords(20));
    kill(child, SIGKILL);
    int status = 0;
    waitpid(child, &status, 0);
  }
  // Another client is served normally.
  ASSERT_NO_FATAL_FAILURE(p.ConnectRing(1));
  Drainer drain(p.sconn, p.ring, /*sleep=*/false);
  RecordDesc d;
  d.oid = "survivor";
  for (int i = 0; i < 50; ++i) {
    ASSERT_TRUE(p.conn->WriteRecord(d, Bytes(3000, i), absl::Seconds(5)).ok());
  }
  ASSERT_TRUE(drain.WaitRecords(50)) << drain.error();
  // The server notices the killed child on its own thread.
  for (int i = 0; i < 500 && vconn->is_connected(); ++i) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_FALSE(vconn->is_connected());
}

}  // namespace
}  // namespace msgr::rdma

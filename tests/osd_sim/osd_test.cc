// End-to-end tests of the OSD daemon in one process: an in-process monitor, an Osd, and a
// raw messenger client that writes ring records and reads objects back. Parameterized by
// messenger backend so that every backend carries the same OSD traffic.
#include "osd_sim/osd.h"
#include "proto/cluster_map.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <condition_variable>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "msg/ring/ring_format.h"
#include "nlohmann/json.hpp"
#include "osd_sim/admin_socket.h"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "proto/osd_protocol.h"
#include "proto/placement.h"
#include "tests/osd_sim/ring_fakes.h"

namespace msgr::osd {
namespace {

std::string TempDir(const std::string& tag) {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/" + tag + ".XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

std::string Pattern(const std::string& oid, size_t len) {
  std::string s(len, '\0');
  uint32_t x = 2166136261u;
  for (char c : oid) x = (x ^ static_cast<uint8_t>(c)) * 16777619u;
  for (size_t i = 0; i < len; ++i) {
    x = x * 1103515245u + 12345u;
    s[i] = static_cast<char>(x >> 16);
  }
  return s;
}

// Collects acks and read replies for the test's client messenger.
class ClientSide : public Dispatcher {
 public:
  void OnRecordsAcked(const ConnectionRef&, absl::Span<const RecordAck> acks) override {
    std::lock_guard<std::mutex> l(mu_);
    for (const RecordAck& a : acks) {
      EXPECT_EQ(acks_.count(a.tid), 0u) << "tid " << a.tid << " acknowledged twice";
      acks_[a.tid] = a.code == absl::StatusCode::kOk
                         ? absl::OkStatus()
                         : absl::Status(a.code, DescribeWriteFailure(a.code));
    }
    cv_.notify_all();
  }
  void OnMessage(const ConnectionRef&, Message m) override {
    std::lock_guard<std::mutex> l(mu_);
    if (IsReply(m.type)) {  // every reply has the read reply's shape
      auto r = DecodeReply(m);
      ASSERT_TRUE(r.ok()) << r.status();
      reads_[r->tid] = *r;
    }
    cv_.notify_all();
  }
  void OnReset(const ConnectionRef&, const absl::Status&) override {}

  absl::Status WaitAck(uint64_t tid) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, std::chrono::seconds(20), [&] { return acks_.count(tid) > 0; })) {
      return absl::DeadlineExceededError(absl::StrCat("no ack for tid ", tid));
    }
    return acks_[tid];
  }
  absl::StatusOr<ReadReply> WaitRead(uint64_t tid) {
    std::unique_lock<std::mutex> l(mu_);
    if (!cv_.wait_for(l, std::chrono::seconds(20), [&] { return reads_.count(tid) > 0; })) {
      return absl::DeadlineExceededError(absl::StrCat("no read reply for tid ", tid));
    }
    return reads_[tid];
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, absl::Status> acks_;
  std::map<uint64_t, ReadReply> reads_;
};

// The OSD's durable_hook for tests: while held, the store's durability callbacks of client
// writes wait here, so those writes stay in flight (drained, not acknowledged) until
// Release() hands them on.
class DurabilityGate {
 public:
  std::function<PersistCallback(PersistCallback)> Hook() {
    return [this](PersistCallback done) -> PersistCallback {
      return [this, done = std::move(done)](absl::Status s) mutable {
        Arrive(std::move(s), std::move(done));
      };
    };
  }
  void Hold() {
    std::lock_guard<std::mutex> l(mu_);
    hold_ = true;
  }
  void Release() {
    std::vector<std::pair<absl::Status, PersistCallback>> held;
    {
      std::lock_guard<std::mutex> l(mu_);
      hold_ = false;
      held.swap(held_);
    }
    for (auto& [s, done] : held) done(std::move(s));
  }

 private:
  void Arrive(absl::Status s, PersistCallback done) {
    {
      std::lock_guard<std::mutex> l(mu_);
      if (hold_) {
        held_.emplace_back(std::move(s), std::move(done));
        return;
      }
    }
    done(std::move(s));
  }
  std::mutex mu_;
  bool hold_ = false;
  std::vector<std::pair<absl::Status, PersistCallback>> held_;
};

class OsdTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    mon::MonServerOptions mo;
    mo.monitor.data_dir = TempDir("mon");
    mo.monitor.grace = absl::Milliseconds(500);
    mo.monitor.heartbeat_interval = absl::Milliseconds(100);
    auto mon = mon::MonServer::Create(mo);
    ASSERT_TRUE(mon.ok()) << mon.status();
    mon_ = std::move(*mon);
    options_.id = 0;
    options_.mon_addr = mon_->addr();
    options_.data_dir = TempDir("osd");
    // Unix socket paths are short (108 bytes): the run dir goes under /tmp, not TEST_TMPDIR.
    char run[] = "/tmp/msgr-osd-test.XXXXXX";
    ASSERT_NE(mkdtemp(run), nullptr);
    options_.run_dir = run;
    options_.ms_types = {GetParam()};
    options_.auth = AuthConfig{AuthConfig::Mode::kSecret, "osd-test-secret"};
    options_.ring_bytes = 1 << 20;
    options_.backend_options["rdma_device"] = "soft";
  }
  void TearDown() override {
    gate_.Release();  // the OSD's pollers wait for held writes when they stop
    conn_.reset();
    client_.reset();
    osd_.reset();
    mon_.reset();
    std::filesystem::remove_all(options_.run_dir);  // under /tmp, not TEST_TMPDIR
  }

  void StartOsd() {
    auto osd = Osd::Start(options_);
    ASSERT_TRUE(osd.ok()) << osd.status();
    osd_ = std::move(*osd);
    WaitActive();
  }

  // Waits (bounded) until the OSD leads at least `pgs` active PGs (0: any) and none is
  // peering: before that its client ops get UNAVAILABLE, which the raw client here does
  // not retry.
  void WaitActive(uint64_t pgs = 0) {
    for (int i = 0; i < 500; ++i) {
      auto d = nlohmann::json::parse(osd_->PerfDumpJson());
      const uint64_t active = d["peering"]["pgs_active"], peering = d["peering"]["pgs_peering"];
      if (peering == 0 && active > 0 && active >= pgs) return;
      absl::SleepFor(absl::Milliseconds(20));
    }
    FAIL() << "the OSD's PGs did not become active: " << osd_->PerfDumpJson();
  }

  // Creates pools until pool id `last` exists (ids are given in order); waits until the
  // OSD serves all of them.
  void CreatePoolsUpTo(uint32_t last) {
    auto mc = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
    ASSERT_TRUE(mc.ok()) << mc.status();
    uint32_t id = 0;
    while (id < last) {
      mon::v1::CreatePoolRequest req;
      req.set_name(absl::StrCat("pool", id + 1));
      auto reply = (*mc)->CreatePool(req);
      ASSERT_TRUE(reply.ok()) << reply.status();
      id = reply->pool().id();
    }
    auto map = (*mc)->GetMap();
    ASSERT_TRUE(map.ok()) << map.status();
    WaitActive(uint64_t{map->pg_num()} * (last + 1));
  }

  EntityName client_name_{EntityType::kClient, 77};  // who ConnectClient() connects as
  void ConnectClient() {
    if (client_) client_->Shutdown();
    conn_.reset();
    MessengerOptions mo;
    mo.type = GetParam();
    mo.name = client_name_;
    mo.auth = options_.auth;
    mo.backend_options = client_backend_options_;
    mo.backend_options["rdma_device"] = "soft";
    auto m = Messenger::Create(mo, &dispatcher_);
    ASSERT_TRUE(m.ok()) << m.status();
    client_ = std::move(*m);
    auto c = client_->Connect(osd_->addrs().at(GetParam()), ConnectOptions{Policy::Lossless(), true});
    ASSERT_TRUE(c.ok()) << c.status();
    conn_ = *c;
  }

  // Stops the client and the OSD, then starts both again (same data directory).
  void RestartOsd() {
    conn_.reset();
    client_->Shutdown();
    client_.reset();
    osd_.reset();
    StartOsd();
    ConnectClient();
  }

  absl::Status Write(const std::string& oid, const std::string& data, uint64_t tid) {
    RecordDesc d;
    d.oid = oid;
    d.tid = tid;
    d.flags = kRecordFlagTruncate | kRecordFlagLast;
    absl::Status s = conn_->WriteRecord(d, data, absl::Seconds(20));
    if (!s.ok()) return s;
    return dispatcher_.WaitAck(tid);
  }

  absl::StatusOr<std::string> Read(const std::string& oid, uint64_t tid) {
    return Ask(Encode(ReadRequest{tid, oid}), tid);
  }
  // Sends a request and returns its reply's body (or its error).
  absl::StatusOr<std::string> Ask(Message request, uint64_t tid) {
    absl::Status s = conn_->Send(std::move(request));
    if (!s.ok()) return s;
    auto r = dispatcher_.WaitRead(tid);
    if (!r.ok()) return r.status();
    if (r->code != absl::StatusCode::kOk) return absl::Status(r->code, r->error);
    return r->data;
  }

  nlohmann::json PerfDump() { return Admin("perf dump"); }
  nlohmann::json Admin(const std::string& command) {
    auto r = AdminSocket::Query(options_.run_dir + "/osd.0.asok", command);
    EXPECT_TRUE(r.ok()) << r.status();
    return nlohmann::json::parse(r.ok() ? *r : "{}");
  }
  // `command`'s reply once `ready` holds for it, or the last one after 5 s.
  nlohmann::json AdminWhen(const std::string& command,
                           const std::function<bool(const nlohmann::json&)>& ready) {
    nlohmann::json d;
    for (int i = 0; i < 250; ++i) {
      d = Admin(command);
      if (ready(d)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return d;
  }

  // Counters that change after the event a test waited for (the pollers' reach perf dump
  // every 10 ms and before a poller sleeps): the dump once `ready` holds for it, or the
  // last one after 5 s.
  nlohmann::json PerfDumpWhen(const std::function<bool(const nlohmann::json&)>& ready) {
    nlohmann::json d;
    for (int i = 0; i < 250; ++i) {
      d = PerfDump();
      if (ready(d)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return d;
  }

  DurabilityGate gate_;  // outlives osd_: the store may call into it until the OSD is gone
  std::unique_ptr<mon::MonServer> mon_;
  OsdOptions options_;
  std::map<std::string, std::string> client_backend_options_;
  std::unique_ptr<Osd> osd_;
  ClientSide dispatcher_;
  std::unique_ptr<Messenger> client_;
  ConnectionRef conn_;
};

// The admin socket's "compact": an object overwritten across several small segments has
// its dead segments freed, the last version reads back, and the reply says what went.
TEST_P(OsdTest, AdminCompactFreesDeadSegmentsAndKeepsTheLastVersion) {
  options_.durability = store::Durability::kDurable;
  options_.segment_bytes = 1 << 20;
  options_.background_compaction = false;  // what is freed, the command frees
  StartOsd();
  ConnectClient();
  std::string last;
  for (uint64_t i = 1; i <= 48; ++i) {  // 3 MiB of 64 KiB versions: 2+ sealed segments
    last = Pattern(absl::StrCat("hot-", i), 64 << 10);
    ASSERT_TRUE(Write("hot", last, i).ok()) << i;
  }
  const nlohmann::json reply = Admin("compact");
  EXPECT_EQ(reply["status"], "ok") << reply;
  EXPECT_GE(reply["segments_freed"].get<uint64_t>(), 2u) << reply;
  EXPECT_GE(reply["bytes_reclaimed"].get<uint64_t>(), uint64_t{2} << 20) << reply;
  EXPECT_LT(reply["dead_bytes"].get<uint64_t>(), uint64_t{1} << 20) << reply;
  EXPECT_EQ(PerfDump()["store"]["segments_freed"], reply["segments_freed"]);
  auto data = Read("hot", 100);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(*data == last) << "compaction lost the last version";
}

// The object CLI's requests: ranged reads, stat, delete (durable: it survives a restart)
// and listing in pages, over the messenger like any read.
TEST_P(OsdTest, ServesRangesStatDeleteAndPagedListings) {
  options_.durability = store::Durability::kDurable;
  StartOsd();
  ConnectClient();
  const std::string big = Pattern("big", 300000);
  ASSERT_TRUE(Write("big", big, 1).ok());
  for (int i = 0; i < 5; ++i) {
    ASSERT_TRUE(Write(absl::StrCat("small/", i), Pattern("s", 10 + i), 10 + i).ok());
  }
  auto range = Ask(Encode(ReadRequest{100, "big", 123456, 70000}), 100);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_TRUE(*range == big.substr(123456, 70000));
  auto tail = Ask(Encode(ReadRequest{101, "big", 299990, 1000}), 101);
  ASSERT_TRUE(tail.ok()) << tail.status();
  EXPECT_EQ(tail->size(), 10u) << "cut at the object's end";

  auto stat = Ask(Encode(ObjectRequest{kStat, 102, "big"}), 102);
  ASSERT_TRUE(stat.ok()) << stat.status();
  EXPECT_EQ(DecodeStatBody(*stat)->size, 300000u);
  EXPECT_EQ(Ask(Encode(ObjectRequest{kStat, 103, "nope"}), 103).status().code(),
            absl::StatusCode::kNotFound);

  std::vector<std::string> names;
  std::string after;
  for (uint64_t tid = 200;; ++tid) {  // pages of two
    auto body = Ask(Encode(ListRequest{tid, "small/", after, 2}), tid);
    ASSERT_TRUE(body.ok()) << body.status();
    auto page = DecodeListBody(*body);
    ASSERT_TRUE(page.ok()) << page.status();
    EXPECT_LE(page->entries.size(), 2u);
    for (const ListEntry& e : page->entries) names.push_back(e.oid);
    if (!page->more) break;
    after = names.back();
  }
  EXPECT_EQ(names, (std::vector<std::string>{"small/0", "small/1", "small/2", "small/3",
                                             "small/4"}));

  ASSERT_TRUE(Ask(Encode(ObjectRequest{kDelete, 300, "small/2"}), 300).ok());
  EXPECT_EQ(Ask(Encode(ObjectRequest{kDelete, 301, "small/2"}), 301).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(PerfDump()["osd"]["deletes"], 1);
  RestartOsd();  // the delete was acknowledged: it is durable
  EXPECT_EQ(Read("small/2", 302).status().code(), absl::StatusCode::kNotFound);
  auto all = Ask(Encode(ListRequest{303, "", "", 1000}), 303);
  ASSERT_TRUE(all.ok()) << all.status();
  EXPECT_EQ(DecodeListBody(*all)->entries.size(), 5u) << "big and four small";
}

// Pools on the wire: a write's record oid is the pool-qualified name, requests carry the
// pool id. The same oid in two pools is two objects; a listing covers one pool (the
// default pool's skips the other pools' names, across pages); a default-pool oid that
// would alias another pool's object, and a malformed qualified name, are refused.
TEST_P(OsdTest, PoolsKeepTheirObjectsApart) {
  StartOsd();
  CreatePoolsUpTo(5);
  ConnectClient();
  uint64_t tid = 1;
  for (const char* oid : {"a", "b", "c"}) ASSERT_TRUE(Write(oid, Pattern(oid, 100), tid++).ok());
  for (int i = 0; i < 5; ++i) {
    const std::string oid = i == 0 ? "a" : absl::StrCat("p5/", i);
    ASSERT_TRUE(Write(placement::PoolObjectName(5, oid), Pattern(oid, 200), tid++).ok()) << oid;
  }
  auto a0 = Ask(Encode(ReadRequest{tid, "a"}), tid);
  ++tid;
  auto a5 = Ask(Encode(ReadRequest{tid, "a", 0, kToEnd, 5}), tid);
  ++tid;
  ASSERT_TRUE(a0.ok() && a5.ok()) << a0.status() << " / " << a5.status();
  EXPECT_EQ(a0->size(), 100u);
  EXPECT_EQ(a5->size(), 200u);
  EXPECT_EQ(Ask(Encode(ObjectRequest{kStat, tid, "b", 5}), tid).status().code(),
            absl::StatusCode::kNotFound);
  ++tid;

  auto list = [&](uint32_t pool) {
    std::vector<std::string> names;
    std::string after;
    for (;; ++tid) {  // pages of two
      auto body = Ask(Encode(ListRequest{tid, "", after, 2, pool}), tid);
      EXPECT_TRUE(body.ok()) << body.status();
      if (!body.ok()) break;
      auto page = DecodeListBody(*body);
      for (const ListEntry& e : page->entries) names.push_back(e.oid);
      if (!page->more || page->entries.empty()) break;
      after = names.back();
    }
    ++tid;
    return names;
  };
  EXPECT_EQ(list(0), (std::vector<std::string>{"a", "b", "c"}));
  // One page that reaches past pool 5's names into the default pool's lists each of
  // those once (a scrub's pages of 64 found them twice).
  auto whole = Ask(Encode(ListRequest{tid, "", "", 7, 0}), tid);
  ++tid;
  ASSERT_TRUE(whole.ok()) << whole.status();
  auto whole_page = DecodeListBody(*whole);
  ASSERT_TRUE(whole_page.ok()) << whole_page.status();
  std::vector<std::string> once;
  for (const ListEntry& e : whole_page->entries) once.push_back(e.oid);
  EXPECT_EQ(once, (std::vector<std::string>{"a", "b", "c"}));
  EXPECT_FALSE(whole_page->more);
  EXPECT_EQ(list(5), (std::vector<std::string>{"a", "p5/1", "p5/2", "p5/3", "p5/4"}));
  EXPECT_TRUE(list(6).empty());
  // A prefix that is an object's whole name lists it, in any pool.
  auto exact = Ask(Encode(ListRequest{tid, "p5/1", "", 10, 5}), tid);
  ++tid;
  ASSERT_TRUE(exact.ok()) << exact.status();
  ASSERT_EQ(DecodeListBody(*exact)->entries.size(), 1u);
  EXPECT_EQ(DecodeListBody(*exact)->entries[0].oid, "p5/1");

  ASSERT_TRUE(Ask(Encode(ObjectRequest{kDelete, tid, "a", 5}), tid).ok());
  ++tid;
  EXPECT_TRUE(Read("a", tid++).ok()) << "the default pool's a is another object";

  const std::string aliased = placement::PoolObjectName(5, "p5/1");
  EXPECT_EQ(Ask(Encode(ObjectRequest{kStat, tid, aliased}), tid).status().code(),
            absl::StatusCode::kInvalidArgument);
  ++tid;
  EXPECT_FALSE(Write(std::string("\x01x\x01y"), "z", tid++).ok()) << "malformed pool name";
}

// Threads of this process named `name` (/proc/self/task/*/comm).
int ThreadsNamed(const std::string& name) {
  int n = 0;
  for (const auto& t : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(t.path() / "comm");
    std::string s;
    if (std::getline(comm, s) && s == name) ++n;
  }
  return n;
}

TEST_P(OsdTest, TcpMessengersRunAsManySocketThreadsAsAsked) {
  if (GetParam() != "tcp") GTEST_SKIP() << "--ms-tcp-threads sizes tcp messengers only";
  const int before = ThreadsNamed("ms-tcp-io");
  StartOsd();
  // The default: no socket thread, the poller runs the messenger (run to completion).
  EXPECT_EQ(ThreadsNamed("ms-tcp-io") - before, 0);
  ConnectClient();
  // Its time on the messenger is counted apart (the transport role of the OSD's CPU),
  // sampled: one call in 8 on average, so a few dozen writes make it move.
  for (uint64_t tid = 1; tid <= 40; ++tid) {
    ASSERT_TRUE(Write("t", "no socket thread", tid).ok());
  }
  const nlohmann::json dump = PerfDumpWhen([](const nlohmann::json& d) {
    return d["pollers"][0]["messenger_ns"].get<uint64_t>() > 0;
  });
  EXPECT_GT(dump["pollers"][0]["messenger_ns"].get<uint64_t>(), 0u) << dump["pollers"];
  osd_.reset();
  options_.ms_tcp_threads = 3;
  const int with_client = ThreadsNamed("ms-tcp-io");  // the test's client has its own
  StartOsd();
  EXPECT_EQ(ThreadsNamed("ms-tcp-io") - with_client, 3);
  ConnectClient();
  ASSERT_TRUE(Write("t", "three threads", 41).ok());
  EXPECT_EQ(PerfDump()["pollers"][0]["messenger_ns"].get<uint64_t>(), 0u);
}

TEST_P(OsdTest, WritesAreAckedDurableAndReadBack) {
  StartOsd();
  ConnectClient();
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{100000}}) {
    const std::string oid = absl::StrCat("obj-", size);
    ASSERT_TRUE(Write(oid, Pattern(oid, size), size + 1).ok());
  }
  for (size_t size : {size_t{0}, size_t{1}, size_t{4096}, size_t{100000}}) {
    const std::string oid = absl::StrCat("obj-", size);
    auto data = Read(oid, 1000 + size);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(*data, Pattern(oid, size)) << oid;
  }
  auto missing = Read("never-written", 5000);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  const auto j = PerfDumpWhen([](const nlohmann::json& d) { return d["osd"]["ops"] == 4; });
  EXPECT_EQ(j["osd"]["ops"], 4);
  EXPECT_EQ(j["osd"]["bytes"], 0 + 1 + 4096 + 100000);
  EXPECT_GE(j["store"]["flushes"].get<int>(), 1);
  EXPECT_GE(j["osd"]["ring_high_water_bytes"].get<int>(), 4096);
  if (GetParam() == std::string("rdma")) {
    // The writes came as ring records (one-sided writes), the reads as messages; the
    // credits went back as RDMA writes.
    EXPECT_EQ(j["messenger"]["rdma"]["records_received"], 4) << j["messenger"];
    EXPECT_EQ(j["messenger"]["rdma"]["msgs_received"], 5) << j["messenger"];
    const auto& r = j["messenger"]["rdma"]["rdma"];
    EXPECT_GT(r["ring_credit_writes"].get<int>(), 0) << r;
    EXPECT_GT(r["registered_bytes"].get<int64_t>(), 0) << r;
    EXPECT_LE(r["registered_bytes"].get<int64_t>(), r["registered_max_bytes"].get<int64_t>()) << r;
    EXPECT_EQ(r["registration_refusals"], 0) << r;
    EXPECT_EQ(r["peer_access_violations"], 0) << r;
  } else {
    EXPECT_FALSE(j["messenger"]["tcp"].contains("rdma"));
  }
}

// perf dump is the registry: every counter every component registered is in it, at the
// path it was registered under, and the counters that no longer move read the same.
TEST_P(OsdTest, EveryRegisteredCounterIsInPerfDump) {
  StartOsd();
  ConnectClient();
  ASSERT_TRUE(Write("one", Pattern("one", 5000), 1).ok());
  const auto j = PerfDumpWhen([](const nlohmann::json& d) { return d["osd"]["ops"] == 1; });
  ASSERT_EQ(j["osd"]["ops"], 1) << j;
  int checked = 0;
  int histograms = 0;
  std::set<std::string> groups;
  osd_->counter_registry().ForEach([&](const CounterSource& src,
                                       const std::vector<CounterGroup>& gs) {
    const nlohmann::json* at = &j;
    for (absl::string_view part : absl::StrSplit(src.path, '.')) {
      ASSERT_TRUE(at->contains(std::string(part))) << src.path << " not in perf dump";
      at = &(*at)[std::string(part)];
    }
    if (src.index >= 0) {
      ASSERT_TRUE(at->is_array() && at->size() > static_cast<size_t>(src.index)) << src.path;
      at = &(*at)[src.index];
    }
    for (size_t g = 0; g < gs.size(); ++g) {
      groups.insert(gs[g].name);
      const nlohmann::json& obj = g == 0 ? *at : (*at)[gs[g].name];
      for (const CounterValue& v : gs[g].values) {
        EXPECT_TRUE(obj.contains(v.desc->name)) << src.path << " " << gs[g].name << "."
                                                << v.desc->name << " not in perf dump";
        EXPECT_NE(std::string(v.desc->description), "") << v.desc->name;
        ++checked;
      }
      for (const HistogramValue& h : gs[g].histograms) {
        ASSERT_TRUE(obj.contains(h.desc->name)) << src.path << " " << h.desc->name;
        EXPECT_TRUE(obj[h.desc->name].contains("p99_us")) << obj[h.desc->name];
        ++histograms;
      }
    }
  });
  // The pollers' op latency (one record acknowledged) and the store's flush latency.
  EXPECT_GE(histograms, 2);
  uint64_t ops_timed = 0;
  for (const auto& p : j["pollers"]) ops_timed += p["op_latency"]["count"].get<uint64_t>();
  EXPECT_EQ(ops_timed, 1u) << j["pollers"];
  // The OSD, one poller, the store, the messenger (and rdma's own group).
  EXPECT_TRUE(groups.count("osd") && groups.count("poller") && groups.count("store") &&
              groups.count("messenger"));
  EXPECT_EQ(groups.count("rdma"), GetParam() == std::string("rdma") ? 1u : 0u);
  EXPECT_GT(checked, 60);
  EXPECT_EQ(j["store"]["appends"], 1);
  EXPECT_EQ(j["store"]["append_bytes"], 5000);
  EXPECT_EQ(j["messenger"][GetParam()]["records_received"], 1);
}

TEST_P(OsdTest, ManyWritesWrapTheRingAndAllReadBack) {
  StartOsd();
  ConnectClient();
  // 1 MiB ring, 64 x 60 KiB: wraps several times; credits must flow back.
  for (uint64_t i = 0; i < 64; ++i) {
    const std::string oid = absl::StrCat("wrap-", i);
    RecordDesc d{oid, i + 1, 0, kRecordFlagTruncate | kRecordFlagLast};
    ASSERT_TRUE(conn_->WriteRecord(d, Pattern(oid, 60000), absl::Seconds(20)).ok());
  }
  for (uint64_t i = 0; i < 64; ++i) ASSERT_TRUE(dispatcher_.WaitAck(i + 1).ok()) << i;
  for (uint64_t i = 0; i < 64; i += 7) {
    const std::string oid = absl::StrCat("wrap-", i);
    auto data = Read(oid, 10000 + i);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(*data, Pattern(oid, 60000));
  }
}

// True when `dir`'s filesystem accepts O_DIRECT (tmpfs does not).
bool DirectIoWorks(const std::string& dir) {
  const std::string path = dir + "/direct-probe";
  const int fd = open(path.c_str(), O_CREAT | O_WRONLY | O_DIRECT, 0600);
  if (fd < 0) return false;
  close(fd);
  unlink(path.c_str());
  return true;
}

TEST_P(OsdTest, LargeRingRecordsGoToTheStoreWithODirectStraightFromTheRing) {
  StartOsd();
  ConnectClient();
  // Ring payloads of >= 64 KiB start 4 KiB-aligned in ring memory; the store writes those
  // of >= 128 KiB whose length is a multiple of 4 KiB with O_DIRECT from there.
  const size_t max = MaxRecordPayload(options_.ring_bytes);  // 1 MiB ring: 512 KiB - 8 KiB
  ASSERT_EQ(max % 4096, 0u);
  struct Case {
    size_t size;
    bool direct;
  };
  const Case cases[] = {{256 << 10, true}, {max, true}, {(256 << 10) + 100, false},
                        {100000, false}, {4096, false}, {256 << 10, true}};
  uint64_t tid = 1, want_direct = 0;
  for (const Case& c : cases) {
    const std::string oid = absl::StrCat("direct-", tid);
    ASSERT_TRUE(Write(oid, Pattern(oid, c.size), tid).ok()) << c.size;
    want_direct += c.direct;
    ++tid;
  }
  for (uint64_t t = 1; t < tid; ++t) {
    const std::string oid = absl::StrCat("direct-", t);
    auto data = Read(oid, 1000 + t);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_TRUE(*data == Pattern(oid, cases[t - 1].size)) << oid;
  }
  const auto j = PerfDump();
  if (j["store"]["direct_appends"] == 0 && !DirectIoWorks(options_.data_dir)) {
    GTEST_SKIP() << "the test directory's filesystem refuses O_DIRECT";
  }
  EXPECT_EQ(j["store"]["direct_appends"], want_direct);
  EXPECT_EQ(j["store"]["direct_fallbacks"], 0) << "O_DIRECT refused ring memory";
  EXPECT_EQ(j["store"]["appends"], tid - 1);
}

TEST_P(OsdTest, ManyLargeReadsInFlightDoNotStallTheOsd) {
  // 300 x 400 KB replies exceed the OSD's per-connection send window (64 MiB): replies
  // must wait for the client's acks without blocking the thread that processes them.
  StartOsd();
  ConnectClient();
  for (uint64_t i = 0; i < 4; ++i) {
    const std::string oid = absl::StrCat("big-", i);
    ASSERT_TRUE(Write(oid, Pattern(oid, 400000), i + 1).ok());
  }
  for (uint64_t t = 0; t < 300; ++t) {
    ASSERT_TRUE(conn_->Send(Encode(ReadRequest{100 + t, absl::StrCat("big-", t % 4)})).ok());
  }
  for (uint64_t t = 0; t < 300; ++t) {
    auto r = dispatcher_.WaitRead(100 + t);
    ASSERT_TRUE(r.ok()) << r.status();
    ASSERT_EQ(r->data.size(), 400000u);
  }
  ASSERT_TRUE(Write("after-reads", "still serving", 99).ok());
}

TEST_P(OsdTest, AcknowledgedWritesSurviveRestart) {
  StartOsd();
  ConnectClient();
  for (uint64_t i = 0; i < 20; ++i) {
    const std::string oid = absl::StrCat("persist-", i);
    ASSERT_TRUE(Write(oid, Pattern(oid, 3000 + i), i + 1).ok());
  }
  RestartOsd();
  for (uint64_t i = 0; i < 20; ++i) {
    const std::string oid = absl::StrCat("persist-", i);
    auto data = Read(oid, 100 + i);
    ASSERT_TRUE(data.ok()) << data.status();
    EXPECT_EQ(*data, Pattern(oid, 3000 + i));
  }
}

// A write of several records (larger than one ring record) is applied whole or not at
// all: its parts stay invisible until the last one; a client that goes away part-way
// leaves the previous version (in the store and after a restart); a part whose first
// part the OSD never saw is refused with ABORTED (the client re-sends the whole write).
TEST_P(OsdTest, WriteOfSeveralRecordsIsAppliedWholeOrNotAtAll) {
  StartOsd();
  ConnectClient();
  const std::string v1 = Pattern("v1", 5000), v2 = Pattern("v2", 3 * 4000);
  ASSERT_TRUE(Write("big", v1, 1).ok());
  auto part = [&](const std::string& data, uint64_t tid, int i, int n) {
    RecordDesc d;
    d.oid = "big";
    d.tid = tid;
    d.object_offset = static_cast<uint64_t>(i) * 4000;
    d.flags = (i == 0 ? kRecordFlagTruncate : 0) | (i + 1 == n ? kRecordFlagLast : 0);
    absl::Status s = conn_->WriteRecord(d, std::string_view(data).substr(i * 4000, 4000),
                                        absl::Seconds(20));
    return s.ok() ? dispatcher_.WaitAck(tid) : s;
  };
  ASSERT_TRUE(part(v2, 10, 0, 3).ok());
  ASSERT_TRUE(part(v2, 11, 1, 3).ok());
  EXPECT_EQ(*Read("big", 100), v1) << "two of three parts durable: still the old version";
  ASSERT_TRUE(part(v2, 12, 2, 3).ok());
  EXPECT_EQ(*Read("big", 101), v2);

  // The next write's client goes away after its first part.
  const std::string v3 = Pattern("v3", 3 * 4000);
  ASSERT_TRUE(part(v3, 20, 0, 3).ok());
  ConnectClient();  // the old session ends: the OSD drops the unfinished write
  const int aborted = PerfDumpWhen([](const nlohmann::json& d) {
                        return d["store"]["writes_aborted"] != 0;
                      })["store"]["writes_aborted"].get<int>();
  EXPECT_EQ(aborted, 1);
  EXPECT_EQ(*Read("big", 102), v2);
  // The new session never had tid 30's first part.
  EXPECT_EQ(part(v3, 31, 1, 3).code(), absl::StatusCode::kAborted);
  EXPECT_EQ(*Read("big", 103), v2);

  // And across a restart of the OSD with a first part in its log and no last part (the
  // session's end drops it first here; the store's recovery tests cover a crash).
  ASSERT_TRUE(part(v3, 40, 0, 3).ok());
  RestartOsd();
  EXPECT_EQ(*Read("big", 104), v2);
}

TEST_P(OsdTest, FullStoreFailsTheWriteClearlyAndKeepsServing) {
  options_.capacity_bytes = 256 * 1024;
  StartOsd();
  ConnectClient();
  ASSERT_TRUE(Write("small", Pattern("small", 10000), 1).ok());
  absl::Status big = Write("big", Pattern("big", 400000), 2);
  EXPECT_EQ(big.code(), absl::StatusCode::kResourceExhausted) << big;
  EXPECT_NE(big.message().find("full"), std::string::npos) << big;
  auto data = Read("small", 3);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, Pattern("small", 10000));
  EXPECT_TRUE(Write("small2", Pattern("small2", 1000), 4).ok()) << "OSD keeps serving";
  EXPECT_EQ(PerfDumpWhen([](const nlohmann::json& d) {
              return d["osd"]["write_errors"] == 1;
            })["osd"]["write_errors"],
            1);
}

TEST_P(OsdTest, GarbageOnThePortDoesNotDisturbOtherClients) {
  StartOsd();
  ConnectClient();
  ASSERT_TRUE(Write("before", "x", 1).ok());
  // A raw TCP peer sends junk to the OSD's listening (or side-channel) port.
  const std::string addr = osd_->addrs().at(GetParam());
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(addr.substr(addr.rfind(':') + 1), &port));
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string junk(4096, '\x5a');
  ASSERT_GT(write(fd, junk.data(), junk.size()), 0);
  close(fd);
  ASSERT_TRUE(Write("after", Pattern("after", 5000), 2).ok());
  auto data = Read("after", 3);
  ASSERT_TRUE(data.ok());
  EXPECT_EQ(*data, Pattern("after", 5000));
}

// A client whose RDMA WRITE lands outside its ring (the 3rd record is aimed past the end)
// is cut off by the OSD -- perf dump counts it -- and the OSD keeps serving the others.
TEST_P(OsdTest, ClientWritingOutsideItsRingIsCutOffAndOthersAreServed) {
  if (GetParam() != std::string("rdma")) {
    GTEST_SKIP() << "an out-of-ring RDMA write needs the rdma backend (tcp has no rings to miss)";
  }
  StartOsd();
  ClientSide bad_d;
  MessengerOptions mo;
  mo.type = "rdma";
  mo.name = EntityName{EntityType::kClient, 78};
  mo.auth = options_.auth;
  mo.backend_options["rdma_device"] = "soft";
  mo.backend_options["rdma_inject_out_of_ring_write"] = "3";
  auto bad = Messenger::Create(mo, &bad_d);
  ASSERT_TRUE(bad.ok()) << bad.status();
  auto bc = (*bad)->Connect(osd_->addrs().at("rdma"), ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(bc.ok()) << bc.status();
  for (uint64_t t = 1; t <= 3; ++t) {
    const std::string oid = absl::StrCat("stray-", t);
    RecordDesc d{oid, t, 0, kRecordFlagTruncate | kRecordFlagLast};
    (void)(*bc)->WriteRecord(d, Pattern(oid, 3000), absl::Seconds(5));
  }
  const int violations =
      PerfDumpWhen([](const nlohmann::json& d) {
        return d["messenger"]["rdma"]["rdma"]["peer_access_violations"] != 0;
      })["messenger"]["rdma"]["rdma"]["peer_access_violations"].get<int>();
  EXPECT_EQ(violations, 1) << "the OSD did not cut off the client that wrote outside its ring";
  (*bad)->Shutdown();
  ConnectClient();
  for (uint64_t t = 1; t <= 5; ++t) {
    const std::string oid = absl::StrCat("good-", t);
    ASSERT_TRUE(Write(oid, Pattern(oid, 20000), t).ok()) << oid;
  }
  auto data = Read("good-3", 100);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_EQ(*data, Pattern("good-3", 20000));
  // OnReset (which counts it) runs after the violation was counted, on another thread.
  EXPECT_GE(PerfDumpWhen([](const nlohmann::json& d) {
              return d["osd"]["connection_resets"].get<int>() >= 1;
            })["osd"]["connection_resets"].get<int>(),
            1);
}

// A connection that starts a new session gets a new ring, and the OSD may hand it to
// another poller than the old one (fewest rings wins). The old ring must then leave its
// poller, or that poller keeps consuming a ring nobody writes to any more and releases its
// space into the new session's credits.
TEST_P(OsdTest, ReplacedRingLeavesThePollerThatHadIt) {
  options_.pollers = 2;
  StartOsd();
  auto rings_per_poller = [&] {
    const nlohmann::json dump = PerfDump();
    std::vector<int> n;
    for (const auto& p : dump["pollers"]) n.push_back(p["rings"].get<int>());
    return n;
  };
  // Ring changes reach a poller's count when its thread applies them: wait for `done`.
  auto wait_until = [&](const std::function<bool(const std::vector<int>&)>& done) {
    std::vector<int> got;
    for (int i = 0; i < 250; ++i) {
      got = rings_per_poller();
      if (done(got)) break;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return got;
  };
  auto conn = std::make_shared<fakes::FakeConnection>();
  osd_->OnRingAttached(conn, std::make_shared<fakes::TestRing>());
  const std::vector<int> first = wait_until(
      [](const std::vector<int>& n) { return n.size() == 2 && n[0] + n[1] == 1; });
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(first[0] + first[1], 1) << "the first ring went to no poller";
  osd_->OnRingAttached(conn, std::make_shared<fakes::TestRing>());
  const std::vector<int> second{first[1], first[0]};  // on the other poller, which had none
  EXPECT_EQ(wait_until([&](const std::vector<int>& n) { return n == second; }), second)
      << "the replaced ring is still on the poller that had it (rings per poller)";
}

// An rdma session's ring starts small and grows when its client needs more (a record
// that does not fit, a full ring), on a reconnect with nothing in flight; the new ring goes
// on with the session's seqs, so a write of several records split across the two rings is
// applied whole; an idle client's ring shrinks back (PROTOCOL.md "Ring sizes").
// A client that opens a new session (it gave up on the old one) supersedes it: the old
// session is closed and its ring leaves the pollers, so a record still in flight on it
// (a socket in TCP retransmission) can never be applied after the new session's writes.
// Another client's session is untouched.
TEST_P(OsdTest, ANewSessionOfAClientClosesItsOlderOne) {
  StartOsd();
  auto old_conn = std::make_shared<fakes::FakeConnection>(/*client_id=*/5);
  auto other = std::make_shared<fakes::FakeConnection>(/*client_id=*/6);
  osd_->OnRingAttached(old_conn, std::make_shared<fakes::TestRing>());
  osd_->OnRingAttached(other, std::make_shared<fakes::TestRing>());
  osd_->OnRingAttached(old_conn, std::make_shared<fakes::TestRing>());  // a resize: same session
  EXPECT_FALSE(old_conn->marked_down);
  auto new_conn = std::make_shared<fakes::FakeConnection>(/*client_id=*/5);
  osd_->OnRingAttached(new_conn, std::make_shared<fakes::TestRing>());
  EXPECT_TRUE(old_conn->marked_down) << "the superseded session is still open";
  EXPECT_FALSE(new_conn->marked_down);
  EXPECT_FALSE(other->marked_down) << "another client's session was closed";
  EXPECT_EQ(nlohmann::json::parse(osd_->PerfDumpJson())["osd"]["sessions_superseded"], 1);
  uint64_t rings = 0;
  for (int i = 0; i < 250; ++i) {  // poller ring counts are published every 10 ms
    rings = 0;
    const nlohmann::json dump = nlohmann::json::parse(osd_->PerfDumpJson());
    for (const auto& p : dump["pollers"]) rings += p["rings"].get<uint64_t>();
    if (rings == 2) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(rings, 2u) << "the new session's and the other client's";
}

// A replica takes writes, deletes and pushes of a PG only from the PG's primary in its map:
// an OSD that was paused and still acts on an older map is refused (here osd.7, which
// leads nothing: osd.0 is the only OSD).
TEST_P(OsdTest, WritesDeletesAndPushesFromAnOsdThatIsNotThePrimaryAreRefused) {
  StartOsd();
  ConnectClient();
  ASSERT_TRUE(Write("kept", Pattern("kept", 100), 1).ok());
  client_name_ = EntityName{EntityType::kOsd, 7};
  ConnectClient();
  const absl::Status w = Write("from-osd7", Pattern("x", 100), 2);
  EXPECT_EQ(w.code(), absl::StatusCode::kUnavailable) << w;
  auto del = Ask(Encode(ObjectRequest{kDelete, 3, "kept"}), 3);
  EXPECT_EQ(del.status().code(), absl::StatusCode::kUnavailable) << del.status();
  PgRequest push;
  push.type = kPgPush;
  push.tid = 4;
  push.oid = "kept";
  push.data = "overwritten";
  auto pushed = Ask(Encode(push), 4);
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kUnavailable) << pushed.status();
  EXPECT_NE(pushed.status().message().find("not the primary"), std::string::npos)
      << pushed.status();
  // Reads are served to peers (a sync reads), and nothing was changed.
  auto got = Read("kept", 5);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, Pattern("kept", 100));
  EXPECT_EQ(Read("from-osd7", 6).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(OsdTest, RdmaRingGrowsWithTheLoadAndShrinksWhenIdle) {
  if (GetParam() != std::string("rdma")) {
    GTEST_SKIP() << "ring resizing is the rdma backend's (tcp rings are plain OSD memory)";
  }
  options_.ring_bytes = 8 << 20;
  options_.backend_options["rdma_ring_min_kb"] = "256";
  client_backend_options_["rdma_ring_shrink_idle_s"] = "1";
  StartOsd();
  ConnectClient();
  for (int i = 0; i < 500 && conn_->max_record_payload() == 0; ++i) {
    absl::SleepFor(absl::Milliseconds(5));
  }
  const size_t small_max = conn_->max_record_payload();
  ASSERT_EQ(small_max, MaxRecordPayload(256 << 10)) << "the ring starts at rdma_ring_min_kb";

  // A write of three records: the first in the small ring, the second larger than that
  // ring takes, so the ring grows between them.
  const std::string v = Pattern("split", 4000 + (1 << 20) + 4000);
  auto part = [&](uint64_t tid, size_t offset, size_t len, uint16_t flags) {
    RecordDesc d{"split", tid, offset, flags};
    absl::Status s =
        conn_->WriteRecord(d, std::string_view(v).substr(offset, len), absl::Seconds(20));
    return s.ok() ? dispatcher_.WaitAck(tid) : s;
  };
  ASSERT_TRUE(part(1, 0, 4000, kRecordFlagTruncate).ok());
  ASSERT_TRUE(part(2, 4000, 1 << 20, 0).ok());
  EXPECT_GE(conn_->max_record_payload(), size_t{1} << 20) << "the ring did not grow";
  ASSERT_TRUE(part(3, 4000 + (1 << 20), 4000, kRecordFlagLast).ok());
  auto data = Read("split", 100);
  ASSERT_TRUE(data.ok()) << data.status();
  EXPECT_TRUE(*data == v) << "the write split across two rings was not applied whole";

  // Many records in flight fill the ring: it grows to the OSD's limit, every write lands.
  for (uint64_t i = 0; i < 48; ++i) {
    const std::string oid = absl::StrCat("burst-", i);
    RecordDesc d{oid, 1000 + i, 0, kRecordFlagTruncate | kRecordFlagLast};
    ASSERT_TRUE(conn_->WriteRecord(d, Pattern(oid, 300000), absl::Seconds(20)).ok()) << i;
  }
  for (uint64_t i = 0; i < 48; ++i) ASSERT_TRUE(dispatcher_.WaitAck(1000 + i).ok()) << i;
  for (uint64_t i = 0; i < 48; i += 5) {
    const std::string oid = absl::StrCat("burst-", i);
    auto got = Read(oid, 2000 + i);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == Pattern(oid, 300000)) << oid;
  }
  uint64_t client_resizes = 0;
  for (const CounterGroup& g : client_->perf_counters()) {
    for (const CounterValue& v : g.values) {
      if (g.name == "rdma" && std::string(v.desc->name) == "ring_resizes") client_resizes = v.value;
    }
  }
  EXPECT_GE(client_resizes, 1u);
  const nlohmann::json dump = PerfDump();
  EXPECT_EQ(dump["messenger"]["rdma"]["rdma"]["ring_resizes"].get<uint64_t>(), client_resizes)
      << "the OSD made as many resizes as the client asked for and got";
  EXPECT_EQ(dump["pollers"][0]["orphan_parts"], 0);

  // Idle for longer than rdma_ring_shrink_idle_s: back to the initial size. The connector
  // looks every few seconds, and a grow that could not drain during the burst (a loaded
  // machine) holds resizes off for kRingResizeBackoff (10 s): allow for both.
  size_t max = conn_->max_record_payload();
  for (int i = 0; i < 300 && max != small_max; ++i) {
    absl::SleepFor(absl::Milliseconds(100));
    max = conn_->max_record_payload();
  }
  EXPECT_EQ(max, small_max) << "an idle ring did not shrink";
  ASSERT_TRUE(Write("after-shrink", Pattern("after-shrink", 5000), 3000).ok());
  EXPECT_EQ(*Read("after-shrink", 3001), Pattern("after-shrink", 5000));
  // Every ring the session had but the last is gone from the poller.
  const int rings = PerfDumpWhen([](const nlohmann::json& d) {
                      return d["pollers"][0]["rings"] == 1;
                    })["pollers"][0]["rings"].get<int>();
  EXPECT_EQ(rings, 1);
}

// Where an OSD listens is what the map says: a public address on IPv6 for clients (both
// backends: the rdma side channel takes a free port on the same host), a tcp listener on the
// cluster address that accepts OSD peers, and the host name as the failure domain.
TEST_P(OsdTest, PublicAndClusterAddressesAreServedAndInTheMap) {
  options_.public_addr = "[::1]:0";
  options_.cluster_addr = "127.0.0.1:0";
  options_.host_name = "rack1-host3";
  StartOsd();
  const std::string pub = osd_->addrs().at(GetParam());
  EXPECT_EQ(pub.rfind("[::1]:", 0), 0u) << pub;
  ConnectClient();
  ASSERT_TRUE(Write("over-v6", Pattern("over-v6", 5000), 1).ok());
  auto back = Read("over-v6", 2);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, Pattern("over-v6", 5000));

  auto mon = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
  ASSERT_TRUE(mon.ok()) << mon.status();
  auto map = (*mon)->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->osds_size(), 1);
  const auto& info = map->osds(0);
  EXPECT_EQ(info.host(), "rack1-host3");
  const std::string cluster = osd_->addrs().at("cluster");
  EXPECT_EQ(info.cluster_addr(), cluster);
  EXPECT_EQ(cluster.rfind("127.0.0.1:", 0), 0u) << cluster;
  EXPECT_EQ(GetParam() == "rdma" ? info.rdma_addr() : info.addr(), pub);

  // An OSD peer's session on the cluster address is accepted.
  MessengerOptions po;
  po.type = "tcp";
  po.name = EntityName{EntityType::kOsd, 9};
  po.auth = options_.auth;
  ClientSide peer_dispatcher;
  auto peer = Messenger::Create(po, &peer_dispatcher);
  ASSERT_TRUE(peer.ok()) << peer.status();
  auto pc = (*peer)->Connect(cluster, ConnectOptions{Policy::Lossless(), false});
  ASSERT_TRUE(pc.ok()) << pc.status();
  const nlohmann::json s = AdminWhen("dump_sessions", [](const nlohmann::json& j) {
    for (const auto& x : j["sessions"]) {
      if (x["peer"] == "osd.9" && x["state"] == "connected") return true;
    }
    return false;
  });
  bool found = false;
  for (const auto& x : s["sessions"]) found |= x["peer"] == "osd.9" && x["state"] == "connected";
  EXPECT_TRUE(found) << s;
  (*peer)->Shutdown();
}

// --ms-cluster-type rdma with a cluster address: an rdma messenger listens there, the map
// advertises it as cluster_rdma_addr, and an OSD peer's rdma session lands on it.
TEST_P(OsdTest, AnRdmaClusterMessengerOnTheClusterAddressIsInTheMap) {
  options_.cluster_addr = "127.0.0.1:0";
  options_.cluster_ms_type = "rdma";
  StartOsd();
  const std::string cluster = osd_->addrs().at("cluster");
  auto mon = mon::MonClient::Create(mon_->addr(), absl::Seconds(5));
  ASSERT_TRUE(mon.ok()) << mon.status();
  auto map = (*mon)->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->osds_size(), 1);
  EXPECT_EQ(map->osds(0).cluster_rdma_addr(), cluster);
  EXPECT_EQ(placement::ToPlacementMap(*map, "rdma").Find(0)->cluster_addr, cluster);

  MessengerOptions po;
  po.type = "rdma";
  po.name = EntityName{EntityType::kOsd, 9};
  po.auth = options_.auth;
  po.backend_options["rdma_device"] = "soft";
  ClientSide peer_dispatcher;
  auto peer = Messenger::Create(po, &peer_dispatcher);
  ASSERT_TRUE(peer.ok()) << peer.status();
  auto pc = (*peer)->Connect(cluster, ConnectOptions{Policy::Lossless(), true});
  ASSERT_TRUE(pc.ok()) << pc.status();
  auto peer_on_rdma = [](const nlohmann::json& j) {
    for (const auto& x : j["sessions"]) {
      if (x["peer"] == "osd.9" && x["backend"] == "rdma" && x["state"] == "connected") return true;
    }
    return false;
  };
  EXPECT_TRUE(peer_on_rdma(AdminWhen("dump_sessions", peer_on_rdma)));
  (*peer)->Shutdown();
}

TEST_P(OsdTest, AWildcardOrNamedPublicAddressIsRefusedSayingWhatToGive) {
  for (const char* bad : {"0.0.0.0:0", "[::]:0", "localhost:0", "127.0.0.1"}) {
    options_.public_addr = bad;
    auto osd = Osd::Start(options_);
    ASSERT_FALSE(osd.ok()) << bad;
    EXPECT_EQ(osd.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  options_.public_addr = "0.0.0.0:0";
  auto osd = Osd::Start(options_);
  EXPECT_NE(osd.status().message().find("--public-network CIDR"), std::string::npos)
      << osd.status();
}

// dump_sessions lists the client's session with its ring; a write the store holds keeps
// its record in the ring (fill > 0) and shows in dump_ops_in_flight with a growing age
// until it is acknowledged; the session leaves the list when the client goes.
TEST_P(OsdTest, AdminSocketDumpsSessionsAndOpsInFlight) {
  options_.backend_options["rdma_ring_min_kb"] = "1024";  // rdma rings start at ring_bytes
  options_.durable_hook = gate_.Hook();
  StartOsd();
  ConnectClient();
  ASSERT_TRUE(Write("first", Pattern("first", 3000), 1).ok());

  nlohmann::json s = Admin("dump_sessions");
  ASSERT_EQ(s["num_sessions"], 1) << s;
  const nlohmann::json session = s["sessions"][0];
  EXPECT_EQ(session["peer"], "client.77") << session;
  EXPECT_EQ(session["backend"], GetParam()) << session;
  EXPECT_EQ(session["direction"], "in") << session;
  EXPECT_EQ(session["state"], "connected") << session;
  EXPECT_EQ(session["ring_bytes"], options_.ring_bytes) << session;
  EXPECT_EQ(session["ring_used_bytes"], 0) << "the acked write's space was released";
  EXPECT_EQ(session["records_received"], 1) << session;
  EXPECT_EQ(session["instance"].get<std::string>().size(), 16u) << session;
  EXPECT_EQ(Admin("dump_ops_in_flight")["num_ops"], 0);

  gate_.Hold();
  const std::string held = Pattern("held", 20000);
  RecordDesc d{"held-object", 2, 0, kRecordFlagTruncate | kRecordFlagLast};
  ASSERT_TRUE(conn_->WriteRecord(d, held, absl::Seconds(20)).ok());
  const nlohmann::json ops1 =
      AdminWhen("dump_ops_in_flight", [](const nlohmann::json& j) { return j["num_ops"] == 1; });
  ASSERT_EQ(ops1["num_ops"], 1) << ops1;
  const nlohmann::json op = ops1["ops"][0];
  EXPECT_EQ(op["type"], "write") << op;
  EXPECT_EQ(op["oid"], "held-object") << op;
  EXPECT_EQ(op["tid"], 2) << op;
  EXPECT_EQ(op["client"], "client.77") << op;
  EXPECT_EQ(op["waiting_for"].get<std::string>().rfind("store", 0), 0u) << op;
  EXPECT_FALSE(op["slow"].get<bool>()) << "30 s complaint time by default";
  EXPECT_EQ(ops1["slow_ops"], 0);
  const nlohmann::json filled = Admin("dump_sessions")["sessions"][0];
  EXPECT_GE(filled["ring_used_bytes"].get<uint64_t>(), held.size()) << filled;
  EXPECT_GT(filled["ring_fill"].get<double>(), 0.0) << filled;
  absl::SleepFor(absl::Milliseconds(100));
  const nlohmann::json ops2 = Admin("dump_ops_in_flight");
  ASSERT_EQ(ops2["num_ops"], 1) << ops2;
  EXPECT_GE(ops2["ops"][0]["age_s"].get<double>(), op["age_s"].get<double>() + 0.09)
      << "the held write's age does not grow";
  EXPECT_EQ(PerfDumpWhen([](const nlohmann::json& j) {
              return j["osd"]["ops_in_flight"] == 1;
            })["osd"]["ops_in_flight"],
            1);

  gate_.Release();
  ASSERT_TRUE(dispatcher_.WaitAck(2).ok());
  EXPECT_EQ(AdminWhen("dump_ops_in_flight",
                      [](const nlohmann::json& j) { return j["num_ops"] == 0; })["num_ops"],
            0);
  EXPECT_EQ(Admin("dump_sessions")["sessions"][0]["ring_used_bytes"], 0);
  EXPECT_EQ(*Read("held-object", 3), held);

  client_->Shutdown();  // goodbye: the OSD ends the session at once
  const nlohmann::json gone = AdminWhen(
      "dump_sessions", [](const nlohmann::json& j) { return j["num_sessions"] == 0; });
  EXPECT_EQ(gone["num_sessions"], 0) << gone;
  const nlohmann::json help = Admin("help");
  EXPECT_NE(help.dump().find("dump_ops_in_flight"), std::string::npos) << help;
  EXPECT_NE(help.dump().find("dump_sessions"), std::string::npos) << help;
}

// A write held longer than the complaint time is flagged slow, counted in perf dump's
// slow_ops gauge, and both clear once it is acknowledged.
TEST_P(OsdTest, OpOlderThanTheComplaintTimeIsFlaggedSlow) {
  options_.op_complaint_time = absl::Milliseconds(300);
  options_.durable_hook = gate_.Hook();
  StartOsd();
  ConnectClient();
  gate_.Hold();
  RecordDesc d{"slow-object", 1, 0, kRecordFlagTruncate | kRecordFlagLast};
  ASSERT_TRUE(conn_->WriteRecord(d, Pattern("slow", 5000), absl::Seconds(20)).ok());
  const nlohmann::json young =
      AdminWhen("dump_ops_in_flight", [](const nlohmann::json& j) { return j["num_ops"] == 1; });
  ASSERT_EQ(young["num_ops"], 1) << young;
  EXPECT_EQ(young["complaint_time_s"].get<double>(), 0.3);
  if (young["ops"][0]["age_s"].get<double>() < 0.25) {
    EXPECT_FALSE(young["ops"][0]["slow"].get<bool>()) << young;
  }
  const nlohmann::json old = AdminWhen("dump_ops_in_flight", [](const nlohmann::json& j) {
    return j["slow_ops"] == 1;
  });
  ASSERT_EQ(old["slow_ops"], 1) << old;
  EXPECT_TRUE(old["ops"][0]["slow"].get<bool>()) << old;
  EXPECT_GE(old["ops"][0]["age_s"].get<double>(), 0.3) << old;
  EXPECT_EQ(PerfDumpWhen([](const nlohmann::json& j) {
              return j["osd"]["slow_ops"] == 1;
            })["osd"]["slow_ops"],
            1);

  gate_.Release();
  ASSERT_TRUE(dispatcher_.WaitAck(1).ok());
  EXPECT_EQ(AdminWhen("dump_ops_in_flight",
                      [](const nlohmann::json& j) { return j["num_ops"] == 0; })["slow_ops"],
            0);
  EXPECT_EQ(PerfDumpWhen([](const nlohmann::json& j) {
              return j["osd"]["slow_ops"] == 0;
            })["osd"]["slow_ops"],
            0);
}

TEST_P(OsdTest, WrongKeyIsRefused) {
  StartOsd();
  options_.auth.secret = "not-the-cluster-secret";
  ConnectClient();
  RecordDesc d{"denied", 1, 0, kRecordFlagTruncate | kRecordFlagLast};
  absl::Status s = conn_->WriteRecord(d, "data", absl::Seconds(2));
  EXPECT_FALSE(s.ok()) << "a client without the cluster secret must not write";
  EXPECT_EQ(PerfDump()["osd"]["ops"], 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, OsdTest, ::testing::Values("tcp", "rdma"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace msgr::osd

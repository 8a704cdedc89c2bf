// MonitorService over real gRPC on 127.0.0.1:0: boot, heartbeats, down-marking seen by
// watchers, operator out/in, down->out, WatchMap cancellation and shutdown.
#include "osd_sim/mon/monitor.h"

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/osd_sim/mon/mon_test_util.h"

namespace msgr::mon {
namespace {

using testing::Boot;
using testing::BootReq;
using testing::FastOptions;
using testing::FindOsd;
using testing::GetMap;
using testing::MakeTempDir;

// The map once `done` holds for it, or the last one after 10 s: the monitor's ticker marks
// OSDs down and out on its own thread, a tick after the time has come.
v1::ClusterMap MapWhen(v1::Monitor::Stub* stub,
                       const std::function<bool(const v1::ClusterMap&)>& done) {
  const absl::Time until = absl::Now() + absl::Seconds(10);
  v1::ClusterMap map = GetMap(stub);
  while (!done(map) && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(20));
    map = GetMap(stub);
  }
  return map;
}

bool IsDown(const v1::ClusterMap& map, uint32_t id) {
  const v1::OsdInfo* o = FindOsd(map, id);
  return o != nullptr && !o->up();
}

class MonitorTest : public ::testing::Test {
 protected:
  void Start(MonServerOptions opts) {
    auto server = MonServer::Create(std::move(opts));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
    stub_ = testing::Connect(server_->addr());
  }
  void SetUp() override { dir_ = MakeTempDir(); }

  std::string dir_;
  std::unique_ptr<MonServer> server_;
  std::unique_ptr<v1::Monitor::Stub> stub_;
};

TEST_F(MonitorTest, BootFillsTheMap) {
  Start(FastOptions(dir_));
  EXPECT_EQ(server_->addr().rfind("127.0.0.1:", 0), 0u) << server_->addr();
  v1::ClusterMap empty = GetMap(stub_.get());
  EXPECT_EQ(empty.epoch(), 1u);
  EXPECT_EQ(empty.pg_num(), 64u);
  EXPECT_FALSE(empty.fsid().empty());
  EXPECT_EQ(empty.osds_size(), 0);

  v1::BootOsdRequest req = BootReq(3, "127.0.0.1:7003", 2.5);
  req.add_ms_types("rdma");
  req.set_rdma_addr("127.0.0.1:8003");
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());
  EXPECT_EQ(reply.epoch(), 2u);
  EXPECT_EQ(reply.heartbeat_interval_ms(), 100u);

  v1::ClusterMap map = GetMap(stub_.get());
  EXPECT_EQ(map.epoch(), 2u);
  EXPECT_EQ(map.fsid(), empty.fsid());
  ASSERT_EQ(map.osds_size(), 1);
  const v1::OsdInfo& o = map.osds(0);
  EXPECT_EQ(o.id(), 3u);
  EXPECT_EQ(o.addr(), "127.0.0.1:7003");
  EXPECT_TRUE(o.up());
  EXPECT_TRUE(o.in());
  EXPECT_DOUBLE_EQ(o.weight(), 2.5);
  ASSERT_EQ(o.ms_types_size(), 2);
  EXPECT_EQ(o.ms_types(1), "rdma");
  EXPECT_EQ(o.rdma_addr(), "127.0.0.1:8003");
  EXPECT_EQ(o.up_from(), 2u);
}

TEST_F(MonitorTest, RebootKeepsIdTakesNewAddrAndKeepsWeight) {
  Start(FastOptions(dir_));
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(0, "127.0.0.1:7000", 3.0), &reply).ok());
  ASSERT_TRUE(Boot(stub_.get(), BootReq(1, "127.0.0.1:7001"), &reply).ok());
  ASSERT_TRUE(Boot(stub_.get(), BootReq(0, "127.0.0.1:7100"), &reply).ok());
  EXPECT_EQ(reply.epoch(), 4u);
  v1::ClusterMap map = GetMap(stub_.get());
  ASSERT_EQ(map.osds_size(), 2);
  const v1::OsdInfo* o = FindOsd(map, 0);
  ASSERT_NE(o, nullptr);
  EXPECT_EQ(o->addr(), "127.0.0.1:7100");
  EXPECT_DOUBLE_EQ(o->weight(), 3.0);  // weight 0 in the request keeps the old one
  EXPECT_EQ(o->up_from(), 4u);
  EXPECT_DOUBLE_EQ(FindOsd(map, 1)->weight(), 1.0);  // default
}

TEST_F(MonitorTest, BootRejectsBadRequests) {
  Start(FastOptions(dir_));
  v1::BootOsdReply reply;
  grpc::Status s = Boot(stub_.get(), BootReq(1, ""), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  s = Boot(stub_.get(), BootReq(1, "127.0.0.1:1", -1), &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(GetMap(stub_.get()).epoch(), 1u);  // nothing changed
}

TEST_F(MonitorTest, HeartbeatsKeepAnOsdUpAndSilenceMarksItDown) {
  Start(FastOptions(dir_));
  grpc::ClientContext c0;
  v1::HeartbeatRequest hb;
  hb.set_id(5);
  v1::HeartbeatReply hr;
  ASSERT_TRUE(stub_->Heartbeat(&c0, hb, &hr).ok());
  EXPECT_FALSE(hr.known());  // never booted

  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(5, "127.0.0.1:7005"), &reply).ok());
  const absl::Time until = absl::Now() + absl::Milliseconds(700);  // > 2x grace
  while (absl::Now() < until) {
    grpc::ClientContext c;
    ASSERT_TRUE(stub_->Heartbeat(&c, hb, &hr).ok());
    EXPECT_TRUE(hr.known());
    absl::SleepFor(absl::Milliseconds(50));
  }
  v1::ClusterMap map = GetMap(stub_.get());
  EXPECT_TRUE(FindOsd(map, 5)->up());
  EXPECT_EQ(map.epoch(), reply.epoch());  // heartbeats do not make epochs

  // Silence: marked down once the grace has passed.
  map = MapWhen(stub_.get(), [](const v1::ClusterMap& m) { return IsDown(m, 5); });
  EXPECT_FALSE(FindOsd(map, 5)->up());
  EXPECT_TRUE(FindOsd(map, 5)->in());  // down but in: keeps its PGs
  EXPECT_EQ(map.epoch(), reply.epoch() + 1);
  grpc::ClientContext c1;
  ASSERT_TRUE(stub_->Heartbeat(&c1, hb, &hr).ok());
  EXPECT_FALSE(hr.known());  // must boot again
}

// Every watcher sees the down-marking within one heartbeat interval after the grace.
TEST_F(MonitorTest, WatchersSeeDownWithinOneInterval) {
  Start(FastOptions(dir_));
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(7, "127.0.0.1:7007"), &reply).ok());
  const absl::Time booted = absl::Now();
  constexpr int kWatchers = 3;
  std::vector<absl::Duration> seen(kWatchers, absl::InfiniteDuration());
  std::vector<std::thread> threads;
  for (int i = 0; i < kWatchers; ++i) {
    threads.emplace_back([&, i] {
      grpc::ClientContext ctx;
      ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
      auto reader = stub_->WatchMap(&ctx, v1::WatchMapRequest());
      v1::ClusterMap m;
      while (reader->Read(&m)) {
        const v1::OsdInfo* o = FindOsd(m, 7);
        if (o != nullptr && !o->up()) {
          seen[i] = absl::Now() - booted;
          ctx.TryCancel();
          break;
        }
      }
      reader->Finish();
    });
  }
  for (auto& t : threads) t.join();
  for (int i = 0; i < kWatchers; ++i) {
    EXPECT_GE(seen[i], absl::Milliseconds(300)) << "watcher " << i;
    // grace + one interval, plus scheduling slack for sanitizer builds on 2 cores.
    EXPECT_LE(seen[i], absl::Milliseconds(300 + 100 + 150)) << "watcher " << i;
  }
}

TEST_F(MonitorTest, MarkOutInBumpEpochsAndUnknownIsNotFound) {
  Start(FastOptions(dir_));
  v1::BootOsdReply boot;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(2, "127.0.0.1:7002"), &boot).ok());
  v1::MarkRequest req;
  req.set_id(2);
  v1::MarkReply rep;
  {
    grpc::ClientContext c;
    ASSERT_TRUE(stub_->MarkOut(&c, req, &rep).ok());
    EXPECT_EQ(rep.epoch(), boot.epoch() + 1);
    EXPECT_FALSE(FindOsd(GetMap(stub_.get()), 2)->in());
  }
  {
    grpc::ClientContext c;  // already out: no change, no new epoch
    ASSERT_TRUE(stub_->MarkOut(&c, req, &rep).ok());
    EXPECT_EQ(rep.epoch(), boot.epoch() + 1);
  }
  {
    grpc::ClientContext c;
    ASSERT_TRUE(stub_->MarkIn(&c, req, &rep).ok());
    EXPECT_EQ(rep.epoch(), boot.epoch() + 2);
    EXPECT_TRUE(FindOsd(GetMap(stub_.get()), 2)->in());
  }
  req.set_id(42);
  for (bool out : {true, false}) {
    grpc::ClientContext c;
    grpc::Status s = out ? stub_->MarkOut(&c, req, &rep) : stub_->MarkIn(&c, req, &rep);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
    EXPECT_NE(s.error_message().find("osd.42 does not exist"), std::string::npos)
        << s.error_message();
  }
  EXPECT_EQ(GetMap(stub_.get()).epoch(), boot.epoch() + 2);
}

TEST_F(MonitorTest, DownOutIntervalMarksOutAndBootMarksBackIn) {
  MonServerOptions opts = FastOptions(dir_);
  opts.monitor.down_out_interval = absl::Milliseconds(200);
  Start(opts);
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(1, "127.0.0.1:7001"), &reply).ok());
  ASSERT_TRUE(Boot(stub_.get(), BootReq(2, "127.0.0.1:7002"), &reply).ok());
  {
    grpc::ClientContext c;  // the operator takes osd.2 out: that decision sticks
    v1::MarkRequest req;
    req.set_id(2);
    v1::MarkReply rep;
    ASSERT_TRUE(stub_->MarkOut(&c, req, &rep).ok());
  }
  // Both fall silent: down after the grace; osd.1 out after down_out_interval more.
  v1::ClusterMap map = MapWhen(stub_.get(), [](const v1::ClusterMap& m) {
    const v1::OsdInfo* o = FindOsd(m, 1);
    return o != nullptr && o->auto_out() && IsDown(m, 2);
  });
  EXPECT_FALSE(FindOsd(map, 1)->up());
  EXPECT_FALSE(FindOsd(map, 1)->in());
  EXPECT_TRUE(FindOsd(map, 1)->auto_out());
  // By the end of this sleep osd.2 has been down longer than down_out_interval (and a few
  // ticks): out already, it must not have been made auto-out.
  absl::SleepFor(absl::Milliseconds(200 + 100));
  EXPECT_FALSE(FindOsd(GetMap(stub_.get()), 2)->auto_out());

  ASSERT_TRUE(Boot(stub_.get(), BootReq(1, "127.0.0.1:7001"), &reply).ok());
  ASSERT_TRUE(Boot(stub_.get(), BootReq(2, "127.0.0.1:7002"), &reply).ok());
  map = GetMap(stub_.get());
  EXPECT_TRUE(FindOsd(map, 1)->in());   // auto-out: back in on boot
  EXPECT_FALSE(FindOsd(map, 2)->in());  // operator-out: stays out
}

TEST_F(MonitorTest, WatchStartsWithCurrentMapThenFollowsEpochs) {
  Start(FastOptions(dir_));
  grpc::ClientContext ctx;
  auto reader = stub_->WatchMap(&ctx, v1::WatchMapRequest());
  v1::ClusterMap m;
  ASSERT_TRUE(reader->Read(&m));
  EXPECT_EQ(m.epoch(), 1u);
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(4, "127.0.0.1:7004"), &reply).ok());
  ASSERT_TRUE(reader->Read(&m));
  EXPECT_EQ(m.epoch(), 2u);
  EXPECT_NE(FindOsd(m, 4), nullptr);
  // A client that cancels gets CANCELLED promptly.
  const absl::Time t0 = absl::Now();
  ctx.TryCancel();
  while (reader->Read(&m)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
}

TEST_F(MonitorTest, AfterEpochSkipsMapsAlreadySeen) {
  Start(FastOptions(dir_));
  grpc::ClientContext ctx;
  v1::WatchMapRequest req;
  req.set_after_epoch(1);
  auto reader = stub_->WatchMap(&ctx, req);
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub_.get(), BootReq(4, "127.0.0.1:7004"), &reply).ok());
  v1::ClusterMap m;
  ASSERT_TRUE(reader->Read(&m));
  EXPECT_EQ(m.epoch(), 2u);  // epoch 1 was not resent
  ctx.TryCancel();
  reader->Finish();
}

TEST_F(MonitorTest, ShutdownEndsWatchStreamsPromptly) {
  Start(FastOptions(dir_));
  grpc::ClientContext ctx;
  auto reader = stub_->WatchMap(&ctx, v1::WatchMapRequest());
  v1::ClusterMap m;
  ASSERT_TRUE(reader->Read(&m));
  const absl::Time t0 = absl::Now();
  server_->Shutdown();
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1));
  EXPECT_FALSE(reader->Read(&m));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::UNAVAILABLE);
}

grpc::Status CreatePool(v1::Monitor::Stub* stub, const std::string& name, uint32_t size,
                        uint32_t min_size, uint32_t pg_num, v1::CreatePoolReply* reply) {
  grpc::ClientContext c;
  v1::CreatePoolRequest req;
  req.set_name(name);
  req.set_size(size);
  req.set_min_size(min_size);
  req.set_pg_num(pg_num);
  return stub->CreatePool(&c, req, reply);
}

TEST_F(MonitorTest, CreatePoolAddsPoolsWithNewIdsAndRefusesBadOnes) {
  Start(FastOptions(dir_));
  const uint64_t epoch = GetMap(stub_.get()).epoch();
  v1::CreatePoolReply rep;
  ASSERT_TRUE(CreatePool(stub_.get(), "two", 2, 0, 0, &rep).ok());
  EXPECT_EQ(rep.epoch(), epoch + 1);
  EXPECT_EQ(rep.pool().id(), 1u);
  EXPECT_EQ(rep.pool().size(), 2u);
  EXPECT_EQ(rep.pool().min_size(), 1u);  // 2 - 2/2
  EXPECT_EQ(rep.pool().pg_num(), GetMap(stub_.get()).pg_num());
  ASSERT_TRUE(CreatePool(stub_.get(), "three", 3, 3, 8, &rep).ok());
  EXPECT_EQ(rep.pool().id(), 2u);
  EXPECT_EQ(rep.pool().min_size(), 3u);
  EXPECT_EQ(rep.pool().pg_num(), 8u);
  v1::ClusterMap map = GetMap(stub_.get());
  EXPECT_EQ(map.epoch(), epoch + 2);
  ASSERT_EQ(map.pools_size(), 2);
  EXPECT_EQ(map.pools(1).name(), "three");
  EXPECT_EQ(map.pool_size(), 1u);  // the default pool is unchanged

  struct Bad {
    std::string name;
    uint32_t size, min_size;
    grpc::StatusCode code;
    std::string says;
  };
  for (const Bad& b : std::vector<Bad>{
           {"two", 1, 0, grpc::StatusCode::ALREADY_EXISTS, "pool 'two' already exists"},
           {"default", 1, 0, grpc::StatusCode::ALREADY_EXISTS, "pool 'default' already exists"},
           {"x", 2, 3, grpc::StatusCode::INVALID_ARGUMENT, "min_size 3 is more than the pool's size 2"},
           {"x", 17, 0, grpc::StatusCode::INVALID_ARGUMENT, "pool size 17 is above the limit"},
           {"", 1, 0, grpc::StatusCode::INVALID_ARGUMENT, "bad pool name ''"},
           {"a b", 1, 0, grpc::StatusCode::INVALID_ARGUMENT, "bad pool name 'a b'"}}) {
    grpc::Status s = CreatePool(stub_.get(), b.name, b.size, b.min_size, 0, &rep);
    EXPECT_EQ(s.error_code(), b.code) << b.name << ": " << s.error_message();
    EXPECT_NE(s.error_message().find(b.says), std::string::npos) << s.error_message();
  }
  EXPECT_EQ(GetMap(stub_.get()).epoch(), epoch + 2);  // refusals change nothing
}

grpc::Status Blocklist(v1::Monitor::Stub* stub, const std::string& entity, uint64_t instance,
                       uint64_t expire_s, bool remove, v1::BlocklistReply* reply) {
  grpc::ClientContext ctx;
  v1::BlocklistRequest req;
  req.set_entity(entity);
  req.set_instance(instance);
  req.set_expire_s(expire_s);
  req.set_remove(remove);
  return stub->Blocklist(&ctx, req, reply);
}

TEST_F(MonitorTest, BlocklistAddsRemovesExpiresAndRefusesWhatItCannotFence) {
  Start(FastOptions(dir_));
  const uint64_t epoch = GetMap(stub_.get()).epoch();
  v1::BlocklistReply rep;
  ASSERT_TRUE(Blocklist(stub_.get(), "client.7", 0xabc, 0, false, &rep).ok());
  EXPECT_EQ(rep.epoch(), epoch + 1);
  EXPECT_EQ(rep.entry().entity(), "client.7");
  EXPECT_EQ(rep.entry().instance(), 0xabcu);
  EXPECT_EQ(rep.entry().epoch(), epoch + 1);
  const int64_t in_an_hour = absl::ToUnixMillis(absl::Now() + absl::Hours(1));
  EXPECT_NEAR(static_cast<double>(rep.entry().expires_unix_ms()), static_cast<double>(in_an_hour),
              60e3) << "the default expiry is one hour";
  // The same entity and instance again: one entry, a new epoch.
  ASSERT_TRUE(Blocklist(stub_.get(), "client.7", 0xabc, 600, false, &rep).ok());
  ASSERT_TRUE(Blocklist(stub_.get(), "osd.3", 0, 1, false, &rep).ok());
  v1::ClusterMap map = GetMap(stub_.get());
  EXPECT_EQ(map.epoch(), epoch + 3);
  ASSERT_EQ(map.blocklist_size(), 2);
  EXPECT_EQ(map.blocklist(0).entity(), "client.7");
  EXPECT_EQ(map.blocklist(1).entity(), "osd.3");
  // osd.3's one-second entry is dropped by the monitor's tick (a new epoch).
  map = MapWhen(stub_.get(), [](const v1::ClusterMap& m) { return m.blocklist_size() == 1; });
  ASSERT_EQ(map.blocklist_size(), 1);
  EXPECT_EQ(map.blocklist(0).entity(), "client.7");
  const uint64_t after_expiry = map.epoch();
  EXPECT_GT(after_expiry, epoch + 3);

  for (const char* bad : {"client.", "client.x", "mon.1", "nobody.1", "osd.-1", ""}) {
    grpc::Status s = Blocklist(stub_.get(), bad, 0, 0, false, &rep);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << bad;
    EXPECT_NE(s.error_message().find("client.N or an osd.N"), std::string::npos) << s.error_message();
  }
  grpc::Status s = Blocklist(stub_.get(), "client.7", 0, 0, true, &rep);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND) << "only instance 0xabc is listed";
  EXPECT_EQ(GetMap(stub_.get()).epoch(), after_expiry) << "refusals change nothing";
  ASSERT_TRUE(Blocklist(stub_.get(), "client.7", 0xabc, 0, true, &rep).ok());
  EXPECT_EQ(GetMap(stub_.get()).blocklist_size(), 0);
}

TEST_F(MonitorTest, AnOsdBootingAsANewProcessHasItsOldOneBlocklisted) {
  Start(FastOptions(dir_));
  v1::BootOsdReply reply;
  v1::BootOsdRequest req = BootReq(2, "127.0.0.1:7002");
  req.set_instance(111);
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());  // the same process again: nothing
  EXPECT_EQ(GetMap(stub_.get()).blocklist_size(), 0);
  EXPECT_EQ(FindOsd(GetMap(stub_.get()), 2)->instance(), 111u);
  req.set_instance(222);
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());
  v1::ClusterMap map = GetMap(stub_.get());
  ASSERT_EQ(map.blocklist_size(), 1);
  EXPECT_EQ(map.blocklist(0).entity(), "osd.2");
  EXPECT_EQ(map.blocklist(0).instance(), 111u);
  EXPECT_EQ(map.blocklist(0).reason(), "osd.2 restarted");
  EXPECT_EQ(FindOsd(map, 2)->instance(), 222u);

  // Heartbeats report the epoch the OSD applied; GetMap shows it for up OSDs.
  grpc::ClientContext ctx;
  v1::HeartbeatRequest hb;
  hb.set_id(2);
  hb.set_applied_epoch(map.epoch());
  v1::HeartbeatReply hr;
  ASSERT_TRUE(stub_->Heartbeat(&ctx, hb, &hr).ok());
  map = GetMap(stub_.get());
  ASSERT_EQ(map.osd_applied_epochs().count(2), 1u);
  EXPECT_EQ(map.osd_applied_epochs().at(2), hb.applied_epoch());
}

grpc::Status Heartbeat(v1::Monitor::Stub* stub, uint32_t id, uint64_t instance,
                       v1::HeartbeatReply* reply) {
  grpc::ClientContext ctx;
  v1::HeartbeatRequest hb;
  hb.set_id(id);
  hb.set_instance(instance);
  return stub->Heartbeat(&ctx, hb, reply);
}

// An OSD process that was stopped (or cut off) while a new process booted as its id: its
// heartbeats must not keep the id up, and it may not boot again and take the id back.
TEST_F(MonitorTest, TheOldProcessOfAReplacedOsdIsRefused) {
  Start(FastOptions(dir_));
  v1::BootOsdReply reply;
  v1::BootOsdRequest req = BootReq(2, "127.0.0.1:7002");
  req.set_instance(0x111);
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());
  req.set_instance(0x222);
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());  // 0x111 blocklisted
  const uint64_t up_from = FindOsd(GetMap(stub_.get()), 2)->up_from();

  v1::HeartbeatReply hr;
  grpc::Status s = Heartbeat(stub_.get(), 2, 0x111, &hr);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("osd.2 instance 111 was replaced: instance 222 booted as "
                                   "osd.2 at map epoch " + std::to_string(up_from)),
            std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("must stop"), std::string::npos) << s.error_message();
  EXPECT_EQ(server_->service().Counters().stale_instances_refused, 1u);
  ASSERT_TRUE(Heartbeat(stub_.get(), 2, 0x222, &hr).ok());
  EXPECT_TRUE(hr.known());
  ASSERT_TRUE(Heartbeat(stub_.get(), 2, 0, &hr).ok()) << "a heartbeat without an instance "
                                                          "(an older OSD) is not checked";

  // Only the old process heartbeats: osd.2 is marked down after the grace all the same.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (!IsDown(GetMap(stub_.get()), 2) && absl::Now() < until) {
    EXPECT_EQ(Heartbeat(stub_.get(), 2, 0x111, &hr).error_code(),
              grpc::StatusCode::FAILED_PRECONDITION);
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_TRUE(IsDown(GetMap(stub_.get()), 2)) << "the old process's heartbeats kept osd.2 up";
  EXPECT_EQ(Heartbeat(stub_.get(), 2, 0x111, &hr).error_code(),
            grpc::StatusCode::FAILED_PRECONDITION) << "down: still refused, not told to boot";

  // It may not boot again: the map stays as it was.
  const uint64_t epoch = GetMap(stub_.get()).epoch();
  req.set_instance(0x111);
  s = Boot(stub_.get(), req, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_NE(s.error_message().find("osd.2 (instance 111) is fenced: blocklisted at map epoch"),
            std::string::npos) << s.error_message();
  EXPECT_NE(s.error_message().find("may not boot again"), std::string::npos) << s.error_message();
  v1::ClusterMap map = GetMap(stub_.get());
  EXPECT_EQ(map.epoch(), epoch);
  EXPECT_EQ(FindOsd(map, 2)->instance(), 0x222u);
  EXPECT_FALSE(FindOsd(map, 2)->up());

  // A new process boots, the one it replaces is blocklisted as well.
  req.set_instance(0x333);
  ASSERT_TRUE(Boot(stub_.get(), req, &reply).ok());
  map = GetMap(stub_.get());
  EXPECT_TRUE(FindOsd(map, 2)->up());
  EXPECT_EQ(FindOsd(map, 2)->instance(), 0x333u);
  ASSERT_EQ(map.blocklist_size(), 2);
  EXPECT_EQ(map.blocklist(1).instance(), 0x222u);
}

TEST(MonitorOptionsTest, BadOptionsAreRejected) {
  MonitorOptions o;
  EXPECT_EQ(MonitorService::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
  o.data_dir = MakeTempDir();
  o.grace = absl::Milliseconds(100);
  o.heartbeat_interval = absl::Milliseconds(200);
  auto s = MonitorService::Create(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find("grace"), std::string::npos);
}

}  // namespace
}  // namespace msgr::mon

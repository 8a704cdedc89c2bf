// The monitor's state across restarts: the map comes back as it was (epoch, in/out, up,
// weights, addresses, fsid, pools); an OSD that was up stays up while it heartbeats the new
// incarnation and is marked down when it does not within the grace; the map file is
// replaced atomically.
#include <fcntl.h>
#include <unistd.h>

#include <fstream>

#include "gtest/gtest.h"
#include "osd_sim/mon/map_store.h"
#include "tests/osd_sim/mon/mon_test_util.h"

namespace msgr::mon {
namespace {

using testing::Boot;
using testing::BootReq;
using testing::FastOptions;
using testing::FindOsd;
using testing::GetMap;
using testing::MakeTempDir;

void WriteRaw(const std::string& path, const std::string& text) {
  std::ofstream f(path, std::ios::trunc);
  f << text;
}

bool Exists(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// A grace no test run outlasts: what the map says does not race the heartbeat check.
MonServerOptions NoTimeoutOptions(const std::string& dir) {
  MonServerOptions o = FastOptions(dir);
  o.monitor.grace = absl::Seconds(600);
  return o;
}

bool SendHeartbeat(v1::Monitor::Stub* stub, uint32_t id) {
  grpc::ClientContext c;
  v1::HeartbeatRequest hb;
  hb.set_id(id);
  v1::HeartbeatReply hr;
  EXPECT_TRUE(stub->Heartbeat(&c, hb, &hr).ok());
  return hr.known();
}

TEST(PersistenceTest, RestartKeepsMapAndEpochMovesForward) {
  const std::string dir = MakeTempDir();
  uint64_t epoch_before = 0;
  std::string fsid;
  int port = 0;
  {
    auto server = MonServer::Create(NoTimeoutOptions(dir));
    ASSERT_TRUE(server.ok()) << server.status();
    port = (*server)->port();
    auto stub = testing::Connect((*server)->addr());
    v1::BootOsdReply reply;
    ASSERT_TRUE(Boot(stub.get(), BootReq(0, "127.0.0.1:7000", 2.0), &reply).ok());
    ASSERT_TRUE(Boot(stub.get(), BootReq(1, "127.0.0.1:7001", 0.5), &reply).ok());
    grpc::ClientContext c;
    v1::MarkRequest req;
    req.set_id(1);
    v1::MarkReply rep;
    ASSERT_TRUE(stub->MarkOut(&c, req, &rep).ok());
    grpc::ClientContext pc;
    v1::CreatePoolRequest preq;
    preq.set_name("images");
    preq.set_size(2);
    v1::CreatePoolReply prep;
    ASSERT_TRUE(stub->CreatePool(&pc, preq, &prep).ok());
    v1::ClusterMap map = GetMap(stub.get());
    epoch_before = map.epoch();
    fsid = map.fsid();
  }
  // Restart on the same port (a client reconnecting finds it where it was).
  MonServerOptions opts = NoTimeoutOptions(dir);
  opts.addr = "127.0.0.1:" + std::to_string(port);
  opts.monitor.pg_num = 256;  // ignored: the existing cluster keeps its pg_num
  auto server = MonServer::Create(opts);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::Connect((*server)->addr());
  v1::ClusterMap map = GetMap(stub.get());
  EXPECT_EQ(map.epoch(), epoch_before);  // nothing changed: no new epoch
  EXPECT_EQ(map.fsid(), fsid);
  EXPECT_EQ(map.pg_num(), 64u);
  ASSERT_EQ(map.osds_size(), 2);
  const v1::OsdInfo* o0 = FindOsd(map, 0);
  const v1::OsdInfo* o1 = FindOsd(map, 1);
  EXPECT_TRUE(o0->up());  // no re-boot needed (a grace to heartbeat, tested below)
  EXPECT_TRUE(o1->up());
  EXPECT_TRUE(o0->in());
  EXPECT_FALSE(o1->in());
  EXPECT_DOUBLE_EQ(o0->weight(), 2.0);
  EXPECT_DOUBLE_EQ(o1->weight(), 0.5);
  EXPECT_EQ(o0->addr(), "127.0.0.1:7000");
  // Pools survive the restart, and a later pool takes a new id.
  ASSERT_EQ(map.pools_size(), 1);
  EXPECT_EQ(map.pools(0).name(), "images");
  EXPECT_EQ(map.pools(0).id(), 1u);
  EXPECT_EQ(map.pools(0).size(), 2u);
  {
    grpc::ClientContext pc;
    v1::CreatePoolRequest preq;
    preq.set_name("images");
    v1::CreatePoolReply prep;
    EXPECT_EQ(stub->CreatePool(&pc, preq, &prep).error_code(), grpc::StatusCode::ALREADY_EXISTS);
  }
  {
    grpc::ClientContext pc;
    v1::CreatePoolRequest preq;
    preq.set_name("logs");
    v1::CreatePoolReply prep;
    ASSERT_TRUE(stub->CreatePool(&pc, preq, &prep).ok());
    EXPECT_EQ(prep.pool().id(), 2u);
    map = GetMap(stub.get());
  }

  // A heartbeat of an OSD up before the restart is known to the new incarnation; a boot
  // (a new address) still makes a new epoch.
  EXPECT_TRUE(SendHeartbeat(stub.get(), 0));
  EXPECT_EQ(GetMap(stub.get()).epoch(), map.epoch());
  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub.get(), BootReq(0, "127.0.0.1:7100"), &reply).ok());
  EXPECT_EQ(reply.epoch(), map.epoch() + 1);
  EXPECT_EQ(FindOsd(GetMap(stub.get()), 0)->addr(), "127.0.0.1:7100");
}

// After a restart each OSD that was up has one grace to heartbeat: the one that does stays
// up (no boot, same up_from), the silent one is marked down, and neither is marked out
// before down_out_interval has passed since the restart.
TEST(PersistenceTest, RestartGivesUpOsdsAGraceAndMarksTheSilentDown) {
  const std::string dir = MakeTempDir();
  uint64_t up_from0 = 0;
  {
    auto server = MonServer::Create(NoTimeoutOptions(dir));
    ASSERT_TRUE(server.ok()) << server.status();
    auto stub = testing::Connect((*server)->addr());
    v1::BootOsdReply reply;
    ASSERT_TRUE(Boot(stub.get(), BootReq(0, "127.0.0.1:7000"), &reply).ok());
    ASSERT_TRUE(Boot(stub.get(), BootReq(1, "127.0.0.1:7001"), &reply).ok());
    up_from0 = FindOsd(GetMap(stub.get()), 0)->up_from();
  }
  MonServerOptions opts = FastOptions(dir);
  opts.monitor.grace = absl::Seconds(2);  // osd.0's first heartbeat need not race it
  opts.monitor.down_out_interval = absl::Seconds(600);
  auto server = MonServer::Create(opts);
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::Connect((*server)->addr());
  const uint64_t epoch0 = GetMap(stub.get()).epoch();
  const absl::Time until = absl::Now() + absl::Seconds(10);
  v1::ClusterMap map;
  do {  // osd.0 heartbeats every 50 ms; osd.1 is silent
    EXPECT_TRUE(SendHeartbeat(stub.get(), 0));
    absl::SleepFor(absl::Milliseconds(50));
    map = GetMap(stub.get());
  } while (FindOsd(map, 1)->up() && absl::Now() < until);
  const v1::OsdInfo* o0 = FindOsd(map, 0);
  const v1::OsdInfo* o1 = FindOsd(map, 1);
  EXPECT_FALSE(o1->up());
  EXPECT_TRUE(o1->in());
  EXPECT_TRUE(o0->up());
  EXPECT_EQ(o0->up_from(), up_from0);
  EXPECT_EQ(map.epoch(), epoch0 + 1);  // one change: osd.1 down
}

TEST(PersistenceTest, RestartsKeepTheEpochAndWhatClientsSawIsOnDisk) {
  const std::string dir = MakeTempDir();
  uint64_t first = 0;
  for (int i = 0; i < 3; ++i) {
    auto server = MonServer::Create(FastOptions(dir));
    ASSERT_TRUE(server.ok()) << server.status();
    uint64_t e = (*server)->service().CurrentMap().epoch();
    if (i == 0) first = e;
    EXPECT_EQ(e, first);
  }
  auto loaded = LoadMap(dir);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->epoch(), first);
}

TEST(PersistenceTest, StaleTempFileDoesNotBreakStartup) {
  const std::string dir = MakeTempDir();
  // A crash before the first rename: only a half-written temp file exists.
  WriteRaw(MapPath(dir) + ".tmp", "epoch: 9\nosds { id: 1 addr: \"half");
  {
    auto server = MonServer::Create(FastOptions(dir));
    ASSERT_TRUE(server.ok()) << server.status();
    EXPECT_EQ((*server)->service().CurrentMap().epoch(), 1u);  // a new cluster
    auto stub = testing::Connect((*server)->addr());
    v1::BootOsdReply reply;
    ASSERT_TRUE(Boot(stub.get(), BootReq(3, "127.0.0.1:7003"), &reply).ok());
  }
  EXPECT_FALSE(Exists(MapPath(dir) + ".tmp"));  // renamed away by a complete save
  // A crash during a later save: the real file stays authoritative.
  WriteRaw(MapPath(dir) + ".tmp", "garbage {{{");
  auto server = MonServer::Create(FastOptions(dir));
  ASSERT_TRUE(server.ok()) << server.status();
  v1::ClusterMap map = (*server)->service().CurrentMap();
  EXPECT_EQ(map.epoch(), 2u);  // osd.3's boot, as saved
  ASSERT_NE(FindOsd(map, 3), nullptr);
}

TEST(PersistenceTest, CorruptMapFileIsAClearError) {
  const std::string dir = MakeTempDir();
  WriteRaw(MapPath(dir), "this is not a cluster map {");
  auto server = MonServer::Create(FastOptions(dir));
  ASSERT_FALSE(server.ok());
  EXPECT_EQ(server.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(server.status().message().find(MapPath(dir)), std::string::npos)
      << server.status();
}

TEST(PersistenceTest, SecondMonOnSamePortFails) {
  auto a = MonServer::Create(FastOptions(MakeTempDir()));
  ASSERT_TRUE(a.ok()) << a.status();
  MonServerOptions opts = FastOptions(MakeTempDir());
  opts.addr = (*a)->addr();
  auto b = MonServer::Create(opts);
  EXPECT_EQ(b.status().code(), absl::StatusCode::kUnavailable) << b.status();
}

}  // namespace
}  // namespace msgr::mon

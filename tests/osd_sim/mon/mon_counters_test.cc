// The monitor's counters move with what it does: map gauges, RPCs served, errors,
// watch streams, OSDs marked down.
#include <thread>

#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "osd_sim/mon/monitor.h"
#include "tests/osd_sim/mon/mon_test_util.h"

namespace msgr::mon {
namespace {

using testing::Boot;
using testing::BootReq;
using testing::FastOptions;
using testing::GetMap;
using testing::MakeTempDir;

TEST(MonCountersTest, MapGaugesAndRpcs) {
  auto server = MonServer::Create(FastOptions(MakeTempDir()));
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = testing::Connect((*server)->addr());
  MonitorService& mon = (*server)->service();
  EXPECT_EQ(mon.Counters().osds, 0u);

  v1::BootOsdReply reply;
  ASSERT_TRUE(Boot(stub.get(), BootReq(0, "127.0.0.1:1"), &reply).ok());
  ASSERT_TRUE(Boot(stub.get(), BootReq(1, "127.0.0.1:2"), &reply).ok());
  EXPECT_FALSE(Boot(stub.get(), BootReq(2, ""), &reply).ok());  // no address: refused
  GetMap(stub.get());
  {
    grpc::ClientContext ctx;
    v1::MarkRequest req;
    req.set_id(1);
    v1::MarkReply r;
    ASSERT_TRUE(stub->MarkOut(&ctx, req, &r).ok());
  }
  MonCounters c = mon.Counters();
  EXPECT_EQ(c.map_epoch, GetMap(stub.get()).epoch());
  EXPECT_EQ(c.osds, 2u);
  EXPECT_EQ(c.osds_up, 2u);
  EXPECT_EQ(c.osds_in, 1u);
  EXPECT_EQ(c.boot_rpcs, 3u);
  EXPECT_EQ(c.rpc_errors, 1u);
  EXPECT_EQ(c.get_map_rpcs, 1u);
  EXPECT_EQ(c.mark_rpcs, 1u);

  // A watch stream is counted while it is open.
  {
    grpc::ClientContext ctx;
    v1::WatchMapRequest req;
    auto reader = stub->WatchMap(&ctx, req);
    v1::ClusterMap m;
    ASSERT_TRUE(reader->Read(&m));
    EXPECT_EQ(mon.Counters().watch_streams, 1u);
    EXPECT_EQ(mon.Counters().watch_map_rpcs, 1u);
    ctx.TryCancel();
    reader->Finish();
  }
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while (mon.Counters().watch_streams != 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
  EXPECT_EQ(mon.Counters().watch_streams, 0u);

  // No heartbeats: both are marked down after the grace period.
  while ((mon.Counters().osds_up != 0) && absl::Now() < until) absl::SleepFor(absl::Milliseconds(20));
  c = mon.Counters();
  EXPECT_EQ(c.osds_up, 0u);
  EXPECT_EQ(c.osds_marked_down, 2u);
}

}  // namespace
}  // namespace msgr::mon

// MonClient against an in-process MonServer: RPCs, the unreachable-mon error, heartbeats
// that a restarted mon keeps up, and a watch that reconnects after a mon restart.
#include "osd_sim/mon/mon_client.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "tests/osd_sim/mon/mon_test_util.h"
#include "tests/osd_sim/mon/pki_test_util.h"

namespace msgr::mon {
namespace {

using testing::BootReq;
using testing::FastOptions;
using testing::FindOsd;
using testing::MakeTempDir;

// Collects maps delivered by MonClient::Watch.
class MapLog {
 public:
  void Add(const v1::ClusterMap& m) {
    absl::MutexLock l(&mu_);
    maps_.push_back(m);
    added_.SignalAll();
  }
  // Waits until a delivered map satisfies `pred`; returns it (or nullopt on timeout).
  template <typename Pred>
  std::optional<v1::ClusterMap> WaitFor(Pred pred, absl::Duration timeout) {
    const absl::Time until = absl::Now() + timeout;
    absl::MutexLock l(&mu_);
    for (;;) {
      for (const v1::ClusterMap& m : maps_) {
        if (pred(m)) return m;
      }
      if (added_.WaitWithDeadline(&mu_, until)) return std::nullopt;  // timed out
    }
  }
  std::vector<uint64_t> Epochs() {
    absl::MutexLock l(&mu_);
    std::vector<uint64_t> e;
    for (const auto& m : maps_) e.push_back(m.epoch());
    return e;
  }

 private:
  absl::Mutex mu_;
  absl::CondVar added_;
  std::vector<v1::ClusterMap> maps_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<MonServer> StartMon(const std::string& dir, int port = 0,
                                    const ControlAuth& auth = ControlAuth::Insecure()) {
  MonServerOptions opts = FastOptions(dir);
  opts.addr = "127.0.0.1:" + std::to_string(port);
  opts.auth = auth;
  auto server = MonServer::Create(opts);
  EXPECT_TRUE(server.ok()) << server.status();
  return server.ok() ? std::move(*server) : nullptr;
}

TEST(MonClientTest, RpcsWork) {
  auto mon = StartMon(MakeTempDir());
  ASSERT_NE(mon, nullptr);
  auto client = MonClient::Create(mon->addr(), absl::Seconds(2));
  ASSERT_TRUE(client.ok()) << client.status();
  auto boot = (*client)->BootOsd(BootReq(1, "127.0.0.1:7001"));
  ASSERT_TRUE(boot.ok()) << boot.status();
  EXPECT_EQ(boot->heartbeat_interval_ms(), 100u);
  auto out = (*client)->MarkOut(1);
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(*out, boot->epoch() + 1);
  auto map = (*client)->GetMap();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(map->epoch(), *out);
  EXPECT_FALSE(FindOsd(*map, 1)->in());
  auto in = (*client)->MarkIn(1);
  ASSERT_TRUE(in.ok());
  EXPECT_EQ(*in, *out + 1);
  auto missing = (*client)->MarkOut(99);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("osd.99"), std::string::npos);
}

TEST(MonClientTest, UnreachableMonFailsWithinTimeout) {
  // A bound but not listening socket: connections to it are refused.
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0);
  socklen_t len = sizeof(sa);
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len), 0);
  const std::string addr = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));

  const absl::Time t0 = absl::Now();
  auto client = MonClient::Create(addr, absl::Milliseconds(500));
  const absl::Duration took = absl::Now() - t0;
  ::close(fd);
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("monitor at " + addr + " unreachable after 500ms"),
            std::string::npos)
      << client.status();
  EXPECT_GE(took, absl::Milliseconds(450));
  EXPECT_LT(took, absl::Milliseconds(1500));
}

// The restart tests run over plain gRPC and over mutual TLS. (A TLS channel that failed its
// calls fast once never finished a handshake after a monitor restart in separate processes;
// in one process the server's threads poll the client's sockets too, so that is covered by
// tests/tools/cluster_test.sh, which restarts a real monitor.)
class MonRestartTest : public ::testing::TestWithParam<bool> {
 protected:
  void SetUp() override {
    if (GetParam()) pki_ = testing::MakeClusterPki({"mon", "osd.4", "osd.2"});
  }
  ControlAuth Auth(const char* entity) {
    return GetParam() ? testing::LoadAuth(pki_, entity) : ControlAuth::Insecure();
  }
  std::string pki_;
};

TEST_P(MonRestartTest, HeartbeatsBootAndRebootAfterMonRestart) {
  const std::string dir = MakeTempDir();
  auto mon = StartMon(dir, 0, Auth("mon"));
  ASSERT_NE(mon, nullptr);
  const int port = mon->port();
  auto client = MonClient::Create(mon->addr(), absl::Seconds(2), Auth("osd.4"));
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->StartHeartbeats(BootReq(4, "127.0.0.1:7004")).ok());
  EXPECT_EQ((*client)->StartHeartbeats(BootReq(4, "x:1")).code(),
            absl::StatusCode::kFailedPrecondition);

  // Never booted: the first heartbeat says known=false and the thread boots it.
  auto up = [&](MonServer* m) {
    const v1::OsdInfo* o = nullptr;
    v1::ClusterMap map = m->service().CurrentMap();
    o = FindOsd(map, 4);
    return o != nullptr && o->up();
  };
  absl::Time until = absl::Now() + absl::Seconds(2);
  while (!up(mon.get()) && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_TRUE(up(mon.get()));
  while ((*client)->heartbeat_boots() < 1 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  // Heartbeats keep it up well past the 300 ms grace.
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_TRUE(up(mon.get()));
  EXPECT_EQ((*client)->heartbeat_boots(), 1u);

  mon->Shutdown();
  mon.reset();
  mon = StartMon(dir, port, Auth("mon"));
  ASSERT_NE(mon, nullptr);
  // The new incarnation keeps osd.4 up and knows its heartbeats (over the reconnected
  // channel): it does not boot again and stays up well past the 300 ms grace.
  until = absl::Now() + absl::Seconds(3);
  while (mon->service().Counters().heartbeat_rpcs < 3 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(mon->service().Counters().heartbeat_rpcs, 3u);
  absl::SleepFor(absl::Milliseconds(700));
  EXPECT_TRUE(up(mon.get()));
  EXPECT_EQ((*client)->heartbeat_boots(), 1u);
}

TEST_P(MonRestartTest, WatchReconnectsAfterMonRestart) {
  const std::string dir = MakeTempDir();
  auto mon = StartMon(dir, 0, Auth("mon"));
  ASSERT_NE(mon, nullptr);
  const int port = mon->port();
  auto client = MonClient::Create(mon->addr(), absl::Seconds(2), Auth("osd.2"));
  ASSERT_TRUE(client.ok()) << client.status();
  MapLog log;
  ASSERT_TRUE((*client)->Watch([&](const v1::ClusterMap& m) { log.Add(m); }).ok());
  auto booted = (*client)->BootOsd(BootReq(2, "127.0.0.1:7002"));
  ASSERT_TRUE(booted.ok());
  ASSERT_TRUE(log.WaitFor([&](const v1::ClusterMap& m) { return m.epoch() == booted->epoch(); },
                          absl::Seconds(2)));

  mon->Shutdown();
  mon.reset();
  absl::SleepFor(absl::Milliseconds(300));  // the watch sees the mon gone and backs off
  mon = StartMon(dir, port, Auth("mon"));
  ASSERT_NE(mon, nullptr);
  EXPECT_EQ(mon->service().CurrentMap().epoch(), booted->epoch());  // the map as it was
  // osd.2 sends no heartbeats here: the new incarnation marks it down after its grace, and
  // the watch, reconnected, sees that epoch.
  auto seen = log.WaitFor(
      [&](const v1::ClusterMap& m) { return m.epoch() > booted->epoch(); }, absl::Seconds(3));
  ASSERT_TRUE(seen.has_value());
  EXPECT_FALSE(FindOsd(*seen, 2)->up());

  // And it keeps following new epochs on the new connection.
  auto again = (*client)->BootOsd(BootReq(2, "127.0.0.1:7102"));
  ASSERT_TRUE(again.ok());
  seen = log.WaitFor([&](const v1::ClusterMap& m) { return m.epoch() == again->epoch(); },
                     absl::Seconds(2));
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(FindOsd(*seen, 2)->addr(), "127.0.0.1:7102");
  std::vector<uint64_t> epochs = log.Epochs();
  EXPECT_TRUE(std::is_sorted(epochs.begin(), epochs.end()));
}

INSTANTIATE_TEST_SUITE_P(PlainAndTls, MonRestartTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "mtls" : "plain";
                         });

// The heartbeat thread of an OSD process that another process of its id replaced: the
// monitor refuses it, the thread reports it once and stops (so it cannot keep the id up).
TEST(MonClientTest, AReplacedProcessIsToldAndStopsHeartbeating) {
  auto mon = StartMon(MakeTempDir());
  ASSERT_NE(mon, nullptr);
  auto old_process = MonClient::Create(mon->addr(), absl::Seconds(2));
  auto new_process = MonClient::Create(mon->addr(), absl::Seconds(2));
  ASSERT_TRUE(old_process.ok() && new_process.ok());
  v1::BootOsdRequest boot = BootReq(3, "127.0.0.1:7003");
  boot.set_instance(0xa1);
  absl::Mutex mu;
  std::vector<absl::Status> told;
  ASSERT_TRUE((*old_process)
                  ->StartHeartbeats(boot, nullptr,
                                    [&](const absl::Status& why) {
                                      absl::MutexLock l(&mu);
                                      told.push_back(why);
                                    })
                  .ok());
  // Its first heartbeat boots it (never booted); then a new process boots as osd.3.
  const absl::Time until = absl::Now() + absl::Seconds(10);
  while ((*old_process)->heartbeat_boots() == 0 && absl::Now() < until) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ((*old_process)->heartbeat_boots(), 1u);
  boot.set_instance(0xb2);
  ASSERT_TRUE((*new_process)->BootOsd(boot).ok());

  auto told_count = [&] {
    absl::MutexLock l(&mu);
    return told.size();
  };
  while (told_count() == 0 && absl::Now() < until) absl::SleepFor(absl::Milliseconds(10));
  ASSERT_EQ(told_count(), 1u) << "the old process was not told it was replaced";
  {
    absl::MutexLock l(&mu);
    EXPECT_EQ(told[0].code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_NE(told[0].message().find("osd.3 instance a1 was replaced: instance b2"),
              std::string::npos) << told[0];
  }
  // Stopped: no more heartbeats reach the monitor, nor boots, nor a second report.
  const uint64_t refused = mon->service().Counters().stale_instances_refused;
  const uint64_t heartbeats = mon->service().Counters().heartbeat_rpcs;
  absl::SleepFor(absl::Milliseconds(500));  // 5 heartbeat intervals
  EXPECT_EQ(mon->service().Counters().heartbeat_rpcs, heartbeats);
  EXPECT_EQ(mon->service().Counters().stale_instances_refused, refused);
  EXPECT_EQ((*old_process)->heartbeat_boots(), 1u);
  EXPECT_EQ(told_count(), 1u);
  auto map = (*new_process)->GetMap();
  ASSERT_TRUE(map.ok());
  EXPECT_EQ(FindOsd(*map, 3)->instance(), 0xb2u);
}

TEST(MonClientTest, DestructorStopsPromptlyWhileMonIsDown) {
  auto mon = StartMon(MakeTempDir());
  ASSERT_NE(mon, nullptr);
  auto client = MonClient::Create(mon->addr(), absl::Seconds(2));
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->Watch([](const v1::ClusterMap&) {}).ok());
  ASSERT_TRUE((*client)->StartHeartbeats(BootReq(1, "127.0.0.1:7001")).ok());
  absl::SleepFor(absl::Milliseconds(100));
  mon->Shutdown();
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time t0 = absl::Now();
  client->reset();
  EXPECT_LT(absl::Now() - t0, absl::Milliseconds(500));
}

}  // namespace
}  // namespace msgr::mon

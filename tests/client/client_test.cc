// The client library against an in-process monitor and fake OSDs (tests/client/
// fake_backend.h): map fetch and watch, out/in and down/up followed live, and clear
// errors for an unreachable monitor or an unavailable backend.
#include "client/client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <set>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "proto/cluster_map.h"
#include "gtest/gtest.h"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "tests/client/fake_backend.h"
#include "tests/client/mon_env.h"

namespace msgr::client {
namespace {

using testing::FakeCluster;

// A loopback TCP socket; with listen() it accepts connections but never speaks.
class Socket {
 public:
  explicit Socket(bool listen_too) : fd_(socket(AF_INET, SOCK_STREAM, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    if (listen_too) {
      EXPECT_EQ(listen(fd_, 16), 0);
    }
  }
  ~Socket() { close(fd_); }
  std::string addr() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_;
  int port_ = 0;
};

ClientOptions Options(const std::string& mon) {
  ClientOptions o;
  o.mon_addr = mon;
  o.ms_type = "fake";
  o.mon_timeout = absl::Seconds(1);
  o.op_timeout = absl::Seconds(10);
  return o;
}

TEST(ClientSetupTest, UnreachableMonitorGivesAClearErrorWithinTheTimeout) {
  FakeCluster::Get().Reset();
  for (bool listening : {false, true}) {  // refused, then accepted-but-silent
    Socket s(listening);
    absl::Time start = absl::Now();
    auto c = Client::Create(Options(s.addr()));
    absl::Duration took = absl::Now() - start;
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
    EXPECT_NE(c.status().message().find(absl::StrCat("monitor at ", s.addr(), " unreachable")),
              std::string::npos)
        << c.status();
    EXPECT_LT(took, absl::Seconds(3)) << "listening=" << listening;
  }
}

TEST(ClientSetupTest, UnavailableBackendAndBadOptionsSaySo) {
  ClientOptions o = Options("127.0.0.1:1");
  o.ms_type = "warp";
  auto c = Client::Create(o);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("warp"), std::string::npos) << c.status();
  o = Options("");
  EXPECT_EQ(Client::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

class ClientClusterTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(env_.ok()); }
  static std::string Addr(int id) { return testing::MonEnv::Addr(id); }
  template <typename F>
  void WaitFor(F f) { ASSERT_TRUE(testing::MonEnv::WaitFor(f)); }

  testing::MonEnv env_{3};
};

TEST_F(ClientClusterTest, WritesReadBackAndFollowOutAndIn) {
  auto c = Client::Create(env_.Options());
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  std::string oid = env_.OidOn(2);
  ASSERT_TRUE(client.Write(oid, std::string(10000, 'a')).ok());
  EXPECT_EQ(FakeCluster::Get().Object(Addr(2), oid), std::string(10000, 'a'));
  EXPECT_EQ(*client.Read(oid), std::string(10000, 'a'));

  auto epoch = env_.admin().MarkOut(2);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  WaitFor([&] { return client.map_epoch() >= *epoch; });
  ASSERT_TRUE(client.Write(oid, std::string(100, 'b')).ok());
  int moved_to = placement::ToPlacementMap(*env_.admin().GetMap(), "fake").OsdOf(oid);
  ASSERT_NE(moved_to, 2);
  EXPECT_EQ(FakeCluster::Get().Object(Addr(moved_to), oid), std::string(100, 'b'));
  EXPECT_EQ(FakeCluster::Get().Object(Addr(2), oid), std::string(10000, 'a'));  // no backfill

  epoch = env_.admin().MarkIn(2);
  WaitFor([&] { return client.map_epoch() >= *epoch; });
  EXPECT_EQ(*client.Read(oid), std::string(10000, 'a'));  // back on osd.2 (see README)
}

// The object CLI's calls: ranged reads, stat, delete, and a listing merged from every OSD
// in id order (each OSD holds some of the objects).
TEST_F(ClientClusterTest, RangesStatDeleteAndListAcrossOsds) {
  auto c = Client::Create(env_.Options());
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  std::set<int> osds;
  for (int i = 0; i < 30; ++i) {
    const std::string oid = absl::StrCat("obj/", 100 + i);
    ASSERT_TRUE(client.Write(oid, std::string(i + 1, 'a' + i % 26)).ok());
    osds.insert(env_.Map().OsdOf(oid));
  }
  ASSERT_TRUE(client.Write("other", "x").ok());
  ASSERT_EQ(osds.size(), 3u) << "the objects must spread over every OSD for this test";
  auto range = client.Read("obj/129", 10, 5);
  ASSERT_TRUE(range.ok()) << range.status();
  EXPECT_EQ(*range, std::string(5, 'a' + 29 % 26));
  EXPECT_EQ(*client.Stat("obj/129"), 30u);
  EXPECT_EQ(client.Stat("nope").status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(client.Delete("obj/105").ok());
  EXPECT_EQ(client.Delete("obj/105").code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(client.Read("obj/105").status().code(), absl::StatusCode::kNotFound);
  auto list = client.List("obj/");
  ASSERT_TRUE(list.ok()) << list.status();
  ASSERT_EQ(list->size(), 29u);
  for (size_t i = 1; i < list->size(); ++i) EXPECT_LT((*list)[i - 1].oid, (*list)[i].oid);
  EXPECT_EQ(list->front().oid, "obj/100");
  EXPECT_EQ(list->front().size, 1u);
  EXPECT_EQ(client.List("")->size(), 30u);
}

TEST_F(ClientClusterTest, WriteToADownOsdWaitsUntilItBootsAgain) {
  auto c = Client::Create(env_.Options());
  ASSERT_TRUE(c.ok()) << c.status();
  Client& client = **c;
  std::string oid = env_.OidOn(1);
  FakeCluster::Get().SetAlive(Addr(1), false);  // crashed
  env_.SilenceOsd(1);  // and silent: the monitor marks it down
  WaitFor([&] { return env_.UpCount() == 2; });
  absl::Notification done;
  absl::Status result;
  client.AsyncWrite(oid, std::make_shared<const std::string>("payload"), [&](absl::Status s) {
    result = s;
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(500)));
  FakeCluster::Get().SetAlive(Addr(1), true);
  env_.StartOsd(1);  // boots again: new up_from, the client re-sends
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(FakeCluster::Get().Object(Addr(1), oid), "payload");
}

}  // namespace
}  // namespace msgr::client

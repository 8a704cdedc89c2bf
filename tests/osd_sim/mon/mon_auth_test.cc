// The monitor's control plane over mutual TLS, over real sockets on 127.0.0.1, with a PKI
// made by tools/lib/pki.sh: roles (admin marks out, client.bench may not, osd.K boots only
// as K), refusals counted, and the handshake errors an operator sees for a client without
// TLS or with another cluster's certificate.
#include <cstdlib>
#include <string>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "gtest/gtest.h"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "tests/osd_sim/mon/mon_test_util.h"
#include "tests/osd_sim/mon/pki_test_util.h"

namespace msgr::mon {
namespace {

using testing::BootReq;
using testing::FastOptions;
using testing::LoadAuth;
using testing::MakeClusterPki;
using testing::MakeTempDir;

constexpr absl::Duration kTimeout = absl::Seconds(3);

class MonAuthTest : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = MakeClusterPki({"mon", "client.admin", "client.bench", "osd.1"});
    MonServerOptions opts = FastOptions(MakeTempDir());
    opts.auth = LoadAuth(cluster_, "mon");
    auto server = MonServer::Create(opts);
    ASSERT_TRUE(server.ok()) << server.status();
    mon_ = std::move(*server);
    ASSERT_TRUE(mon_->secure());
  }

  std::unique_ptr<MonClient> Connect(const std::string& entity) {
    auto client = MonClient::Create(mon_->addr(), kTimeout, LoadAuth(cluster_, entity));
    EXPECT_TRUE(client.ok()) << client.status();
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string cluster_;
  std::unique_ptr<MonServer> mon_;
};

TEST_F(MonAuthTest, AdminMarksOut) {
  auto osd = Connect("osd.1");
  ASSERT_NE(osd, nullptr);
  ASSERT_TRUE(osd->BootOsd(BootReq(1, "127.0.0.1:7001")).ok());
  auto admin = Connect("client.admin");
  ASSERT_NE(admin, nullptr);
  auto epoch = admin->MarkOut(1);
  ASSERT_TRUE(epoch.ok()) << epoch.status();
  auto map = admin->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_NE(testing::FindOsd(*map, 1), nullptr);
  EXPECT_FALSE(testing::FindOsd(*map, 1)->in());
  EXPECT_EQ(mon_->service().Counters().auth_refused, 0u);
}

TEST_F(MonAuthTest, BenchClientMayNotMarkOut) {
  auto osd = Connect("osd.1");
  ASSERT_NE(osd, nullptr);
  ASSERT_TRUE(osd->BootOsd(BootReq(1, "127.0.0.1:7001")).ok());
  auto bench = Connect("client.bench");
  ASSERT_NE(bench, nullptr);
  const uint64_t refused = mon_->service().Counters().auth_refused;

  auto out = bench->MarkOut(1);
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kPermissionDenied) << out.status();
  EXPECT_TRUE(absl::StrContains(out.status().message(),
                                "client.bench may not mark OSDs out: needs client.admin"))
      << out.status();
  EXPECT_EQ(mon_->service().Counters().auth_refused, refused + 1);
  // Nothing changed, and the bench client may still read the map.
  auto map = bench->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(testing::FindOsd(*map, 1)->in());

  // The monitor still serves the next caller.
  auto admin = Connect("client.admin");
  ASSERT_NE(admin, nullptr);
  EXPECT_TRUE(admin->MarkOut(1).ok());
  EXPECT_EQ(mon_->service().Counters().auth_refused, refused + 1);
}

TEST_F(MonAuthTest, OnlyAdminCreatesPools) {
  auto bench = Connect("client.bench");
  ASSERT_NE(bench, nullptr);
  v1::CreatePoolRequest req;
  req.set_name("images");
  req.set_size(2);
  auto refused = bench->CreatePool(req);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kPermissionDenied) << refused.status();
  EXPECT_TRUE(absl::StrContains(refused.status().message(),
                                "client.bench may not create pools: needs client.admin"))
      << refused.status();
  auto admin = Connect("client.admin");
  ASSERT_NE(admin, nullptr);
  auto created = admin->CreatePool(req);
  ASSERT_TRUE(created.ok()) << created.status();
  EXPECT_EQ(created->pool().name(), "images");
  auto map = bench->GetMap();
  ASSERT_TRUE(map.ok()) << map.status();
  ASSERT_EQ(map->pools_size(), 1);
  EXPECT_EQ(map->pools(0).size(), 2u);
}

TEST_F(MonAuthTest, OsdBootsOnlyAsItself) {
  auto osd = Connect("osd.1");
  ASSERT_NE(osd, nullptr);
  auto as2 = osd->BootOsd(BootReq(2, "127.0.0.1:7002"));
  ASSERT_FALSE(as2.ok());
  EXPECT_EQ(as2.status().code(), absl::StatusCode::kPermissionDenied) << as2.status();
  EXPECT_TRUE(absl::StrContains(as2.status().message(), "osd.1 may not boot osd.2"))
      << as2.status();
  EXPECT_EQ(mon_->service().Counters().auth_refused, 1u);
  auto as1 = osd->BootOsd(BootReq(1, "127.0.0.1:7001"));
  ASSERT_TRUE(as1.ok()) << as1.status();
  v1::ClusterMap map = mon_->service().CurrentMap();
  EXPECT_NE(testing::FindOsd(map, 1), nullptr);
  EXPECT_EQ(testing::FindOsd(map, 2), nullptr);
}

TEST_F(MonAuthTest, ReadersWatchTheMap) {
  auto bench = Connect("client.bench");
  ASSERT_NE(bench, nullptr);
  absl::Mutex mu;
  uint64_t seen = 0;
  ASSERT_TRUE(bench->Watch([&](const v1::ClusterMap& m) {
    absl::MutexLock l(&mu);
    seen = m.epoch();
  }).ok());
  auto osd = Connect("osd.1");
  ASSERT_NE(osd, nullptr);
  auto boot = osd->BootOsd(BootReq(1, "127.0.0.1:7001"));
  ASSERT_TRUE(boot.ok()) << boot.status();
  const absl::Time until = absl::Now() + absl::Seconds(5);
  uint64_t got = 0;
  while (absl::Now() < until) {
    {
      absl::MutexLock l(&mu);
      got = seen;
    }
    if (got >= boot->epoch()) break;
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_GE(got, boot->epoch()) << "the watch of client.bench never saw the boot";
}

TEST_F(MonAuthTest, InsecureClientGetsClearErrorWithinTimeout) {
  const absl::Duration timeout = absl::Milliseconds(500);
  const absl::Time start = absl::Now();
  auto client = MonClient::Create(mon_->addr(), timeout);
  const absl::Duration took = absl::Now() - start;
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(client.status().message(),
                                "monitor at " + mon_->addr() +
                                    " closed the connection before answering: it probably "
                                    "requires mutual TLS; connect with --auth secret"))
      << client.status();
  // The timeout plus the one fail-fast probe, with room for a loaded machine.
  EXPECT_LT(took, timeout + absl::Seconds(1));
}

TEST_F(MonAuthTest, CertificateOfAnotherCaRefused) {
  // The client trusts only its own CA: it refuses the monitor's certificate.
  std::string other = MakeClusterPki({"client.admin"});
  auto client = MonClient::Create(mon_->addr(), absl::Milliseconds(500),
                                  LoadAuth(other, "client.admin"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(
      client.status().message(),
      "monitor at " + mon_->addr() + " refused the TLS handshake: is the certificate from "
      "this cluster's CA (" + other + "/pki/ca.crt)?"))
      << client.status();
  EXPECT_TRUE(absl::StrContains(client.status().message(), "certificate verify failed"))
      << client.status();
}

TEST_F(MonAuthTest, MonitorRefusesCertificateOfAnotherCa) {
  // The client trusts this cluster's CA too (a CA bundle), so it accepts the monitor, but
  // its own certificate is from another CA: the monitor refuses it.
  std::string other = MakeClusterPki({"client.admin"});
  const std::string cmd = "cat " + cluster_ + "/pki/ca.crt >> " + other + "/pki/ca.crt";
  ASSERT_EQ(std::system(cmd.c_str()), 0);
  auto client = MonClient::Create(mon_->addr(), absl::Milliseconds(500),
                                  LoadAuth(other, "client.admin"));
  ASSERT_FALSE(client.ok());
  EXPECT_EQ(client.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_TRUE(absl::StrContains(client.status().message(), "refused the TLS handshake"))
      << client.status();
  EXPECT_EQ(mon_->service().CurrentMap().osds_size(), 0);
  // Still serving this cluster's clients.
  auto admin = Connect("client.admin");
  ASSERT_NE(admin, nullptr);
  EXPECT_TRUE(admin->GetMap().ok());
}

TEST_F(MonAuthTest, SecureClientToInsecureMon) {
  auto plain = MonServer::Create(FastOptions(MakeTempDir()));
  ASSERT_TRUE(plain.ok()) << plain.status();
  auto client = MonClient::Create((*plain)->addr(), absl::Milliseconds(500),
                                  LoadAuth(cluster_, "client.admin"));
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::StrContains(client.status().message(),
                                "refused the TLS handshake: it does not speak TLS"))
      << client.status();
}

// Without TLS the monitor enforces nothing, as before: anyone may mark out.
TEST(MonInsecureTest, EverythingAllowed) {
  auto mon = MonServer::Create(FastOptions(MakeTempDir()));
  ASSERT_TRUE(mon.ok()) << mon.status();
  EXPECT_FALSE((*mon)->secure());
  auto client = MonClient::Create((*mon)->addr(), kTimeout);
  ASSERT_TRUE(client.ok()) << client.status();
  ASSERT_TRUE((*client)->BootOsd(BootReq(2, "127.0.0.1:7002")).ok());
  EXPECT_TRUE((*client)->MarkOut(2).ok());
  EXPECT_EQ((*mon)->service().Counters().auth_refused, 0u);
}

}  // namespace
}  // namespace msgr::mon

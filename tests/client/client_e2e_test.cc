// The client library end to end over a real messenger backend: an in-process monitor and
// three in-process OSD daemons (durable store in TEST_TMPDIR). Writes of every size read
// back byte-identical; an OSD stopped in the middle of a write run and started again
// (new address, new incarnation) loses nothing that was acknowledged, and every op
// completes exactly once. Parameterized by backend; a backend not linked is skipped.
#include <array>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "client/bench/pattern.h"
#include "client/client.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "osd_sim/osd.h"
#include "tests/osd_sim/wait_active.h"

namespace msgr::client {
namespace {

using bench::MakePattern;
using bench::VerifyPattern;

constexpr int kOsds = 3;

std::string TempDir(const std::string& tag, bool short_path = false) {
  const char* base = std::getenv("TEST_TMPDIR");
  // Unix socket paths are short (108 bytes): run dirs go under /tmp.
  std::string t = (short_path || !base ? std::string("/tmp") : std::string(base)) + "/" + tag +
                  ".XXXXXX";
  EXPECT_NE(mkdtemp(t.data()), nullptr);
  return t;
}

class ClientE2eTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    {
      MessengerOptions probe;
      probe.type = GetParam();
      probe.auth = AuthConfig::None();
      probe.backend_options["rdma_device"] = "soft";
      NullDispatcher d;
      auto m = Messenger::Create(probe, &d);
      if (!m.ok()) GTEST_SKIP() << "backend " << GetParam() << ": " << m.status();
    }
    mon::MonServerOptions mo;
    mo.monitor.data_dir = TempDir("mon");
    mo.monitor.grace = absl::Milliseconds(600);
    mo.monitor.heartbeat_interval = absl::Milliseconds(100);
    mo.monitor.pg_num = 64;
    auto mon = mon::MonServer::Create(mo);
    ASSERT_TRUE(mon.ok()) << mon.status();
    mon_ = std::move(*mon);
    for (int i = 0; i < kOsds; ++i) {
      osd::OsdOptions o;
      o.id = i;
      o.mon_addr = mon_->addr();
      o.data_dir = TempDir(absl::StrCat("osd", i));
      o.run_dir = TempDir("msgr-e2e", /*short_path=*/true);
      o.ms_types = {GetParam()};
      o.durability = store::Durability::kDurable;
      o.ring_bytes = 256 << 10;  // small: 300 KB objects need several records
      o.auth = auth_;
      o.backend_options["rdma_device"] = "soft";
      o.map_hook = [this, i](uint64_t epoch) { seen_epoch_[i] = epoch; };
      osd_options_.push_back(o);
      StartOsd(i);
    }
    WaitActive();
  }

  // Waits until the OSDs lead every PG, none peering (tests/osd_sim/wait_active.h).
  void WaitActive() {
    const absl::Status s =
        osd::testing::WaitPgsActive(mon_->addr(), osds_, seen_epoch_.data(), 64);
    if (!s.ok()) FAIL() << s;
  }
  void TearDown() override {
    osds_.clear();
    if (mon_) mon_->Shutdown();
    // The run dirs are under /tmp, not TEST_TMPDIR, which Bazel would clean up.
    for (const auto& o : osd_options_) std::filesystem::remove_all(o.run_dir);
  }

  void StartOsd(int i) {
    osds_.resize(kOsds);
    auto o = osd::Osd::Start(osd_options_[i]);
    ASSERT_TRUE(o.ok()) << o.status();
    osds_[i] = std::move(*o);
  }

  std::unique_ptr<Client> MakeClient() {
    ClientOptions co;
    co.mon_addr = mon_->addr();
    co.ms_type = GetParam();
    co.auth = auth_;
    co.op_timeout = absl::Seconds(30);
    co.max_in_flight = 64;
    co.backend_options["rdma_device"] = "soft";
    auto c = Client::Create(co);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? std::move(*c) : nullptr;
  }

  struct NullDispatcher : Dispatcher {
    void OnMessage(const ConnectionRef&, Message) override {}
    void OnReset(const ConnectionRef&, const absl::Status&) override {}
  };

  AuthConfig auth_{AuthConfig::Mode::kSecret, "client-e2e-secret"};
  std::unique_ptr<mon::MonServer> mon_;
  std::vector<osd::OsdOptions> osd_options_;
  std::array<std::atomic<uint64_t>, kOsds> seen_epoch_{};  // newest map each OSD was handed
  std::vector<std::unique_ptr<osd::Osd>> osds_;
};

TEST_P(ClientE2eTest, ObjectsOfEverySizeReadBackByteIdentical) {
  auto c = MakeClient();
  ASSERT_NE(c, nullptr);
  std::vector<std::pair<std::string, size_t>> objs;
  for (size_t size : {size_t{1}, size_t{4096}, size_t{65536}, size_t{300000}}) {
    for (int i = 0; i < 20; ++i) objs.emplace_back(absl::StrCat("e2e_", size, "_", i), size);
  }
  std::atomic<int> pending{static_cast<int>(objs.size())};
  std::atomic<int> failed{0};
  absl::Notification all;
  for (auto& [oid, size] : objs) {
    c->AsyncWrite(oid, std::make_shared<const std::string>(MakePattern(oid, size)),
                  [&](absl::Status s) {
                    if (!s.ok()) {
                      ADD_FAILURE() << s;
                      failed++;
                    }
                    if (--pending == 0) all.Notify();
                  });
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(60)));
  EXPECT_EQ(failed.load(), 0);
  for (auto& [oid, size] : objs) {
    auto data = c->Read(oid);
    ASSERT_TRUE(data.ok()) << oid << ": " << data.status();
    EXPECT_EQ(data->size(), size);
    EXPECT_TRUE(VerifyPattern(oid, *data).ok()) << oid;
  }
  EXPECT_EQ(c->Read("e2e_never_written").status().code(), absl::StatusCode::kNotFound);
  EXPECT_GT(c->counters().records_sent, objs.size());  // 300 KB objects: several records
}

// A client that shuts down ends its OSD sessions at once: every OSD frees the ring it held
// for it (without the goodbye the OSDs would keep them for session_reconnect_timeout).
TEST_P(ClientE2eTest, ClientShutdownFreesItsRingsOnEveryOsd) {
  auto rings = [&] {
    uint64_t n = 0;
    for (const auto& o : osds_) {
      const nlohmann::json dump = nlohmann::json::parse(o->PerfDumpJson());
      for (const auto& p : dump["pollers"]) n += p["rings"].get<uint64_t>();
    }
    return n;
  };
  // The OSDs' sessions with each other (peering) have rings too: count the client's.
  const uint64_t osd_rings = rings();
  auto c = MakeClient();
  ASSERT_NE(c, nullptr);
  for (int i = 0; i < 30; ++i) {  // enough objects to reach all three OSDs
    const std::string oid = absl::StrCat("bye.", i);
    ASSERT_TRUE(c->Write(oid, std::make_shared<const std::string>(MakePattern(oid, 4096))).ok());
  }
  // Poller ring counts are published every 10 ms.
  for (int t = 0; t < 200 && rings() < osd_rings + kOsds; ++t) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_EQ(rings(), osd_rings + kOsds) << "one ring per OSD for this client";
  c->Shutdown();
  for (int t = 0; t < 300 && rings() > osd_rings; ++t) absl::SleepFor(absl::Milliseconds(10));
  EXPECT_EQ(rings(), osd_rings) << "an OSD still holds the ring of a client that shut down";
}

TEST_P(ClientE2eTest, OsdStoppedMidRunLosesNothingAcknowledged) {
  auto c = MakeClient();
  ASSERT_NE(c, nullptr);
  constexpr int kInFlight = 8;
  constexpr size_t kSize = 16384;
  std::mutex mu;
  std::map<std::string, int> completions;  // oid -> callbacks run
  std::vector<std::string> acked;
  std::vector<std::string> errors;
  std::atomic<bool> stop{false};
  std::atomic<int> in_flight{0};
  std::thread writer([&] {
    for (int n = 0; !stop; ++n) {
      while (in_flight.load() >= kInFlight) absl::SleepFor(absl::Microseconds(200));
      std::string oid = absl::StrCat("midrun_", n);
      in_flight++;
      c->AsyncWrite(oid, std::make_shared<const std::string>(MakePattern(oid, kSize)),
                    [&, oid](absl::Status s) {
                      std::lock_guard<std::mutex> l(mu);
                      ++completions[oid];
                      (s.ok() ? acked : errors).push_back(s.ok() ? oid : s.ToString());
                      in_flight--;
                    });
    }
  });
  absl::SleepFor(absl::Milliseconds(700));
  osds_[1].reset();  // osd.1 goes away mid-run: its ops wait (down but in)
  absl::SleepFor(absl::Milliseconds(1500));
  size_t acked_while_down;
  {
    std::lock_guard<std::mutex> l(mu);
    acked_while_down = acked.size();
  }
  StartOsd(1);  // back with its data, a new address and a new incarnation
  absl::SleepFor(absl::Milliseconds(1500));
  stop = true;
  writer.join();
  for (int i = 0; i < 600 && in_flight.load() > 0; ++i) absl::SleepFor(absl::Milliseconds(50));
  ASSERT_EQ(in_flight.load(), 0) << "ops still pending 30 s after the OSD came back";

  std::lock_guard<std::mutex> l(mu);
  EXPECT_TRUE(errors.empty()) << errors.size() << " failed, first: " << errors.front();
  for (auto& [oid, n] : completions) EXPECT_EQ(n, 1) << oid << " completed " << n << " times";
  EXPECT_GT(acked.size(), acked_while_down) << "writes to osd.1 resumed after its restart";
  EXPECT_GE(c->counters().resends, 1u);
  for (const std::string& oid : acked) {
    auto data = c->Read(oid);
    ASSERT_TRUE(data.ok()) << oid << ": " << data.status();
    EXPECT_TRUE(VerifyPattern(oid, *data).ok()) << oid;
    EXPECT_EQ(data->size(), kSize);
  }
}

// An application that chains its writes -- the next one issued from the previous one's
// callback, as async code does -- on many chains at once. Over rdma a callback can run on a
// writer's thread, inside the delivery of acks that another write gathered: its own write
// must neither wait for that writer's locks nor deliver acks itself (it hung in both).
TEST_P(ClientE2eTest, WritesChainedFromCallbacksAllComplete) {
  auto c = MakeClient();
  ASSERT_NE(c, nullptr);
  constexpr int kChains = 16;
  constexpr int kPerChain = 40;
  constexpr size_t kSize = 4096;
  std::atomic<int> callbacks{0};
  std::atomic<int> failed{0};
  std::atomic<int> chains_left{kChains};
  absl::Notification all;
  auto oid_of = [](int chain, int k) { return absl::StrCat("chain.", chain, ".", k); };
  std::function<void(int, int)> write_next = [&](int chain, int k) {
    const std::string oid = oid_of(chain, k);
    c->AsyncWrite(oid, std::make_shared<const std::string>(MakePattern(oid, kSize)),
                  [&, chain, k](absl::Status s) {
                    ++callbacks;
                    if (!s.ok()) {
                      ADD_FAILURE() << oid_of(chain, k) << ": " << s;
                      ++failed;
                    }
                    if (k + 1 < kPerChain) {
                      write_next(chain, k + 1);  // from inside the callback
                    } else if (--chains_left == 0) {
                      all.Notify();
                    }
                  });
  };
  for (int chain = 0; chain < kChains; ++chain) write_next(chain, 0);
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(60)))
      << chains_left.load() << " chains did not finish; " << callbacks.load() << " of "
      << kChains * kPerChain << " writes completed";
  EXPECT_EQ(callbacks.load(), kChains * kPerChain);
  EXPECT_EQ(failed.load(), 0);
  for (int chain = 0; chain < kChains; ++chain) {
    const std::string oid = oid_of(chain, kPerChain - 1);
    auto data = c->Read(oid);
    ASSERT_TRUE(data.ok()) << oid << ": " << data.status();
    EXPECT_TRUE(VerifyPattern(oid, *data).ok()) << oid;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, ClientE2eTest, ::testing::Values("tcp", "rdma"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace msgr::client

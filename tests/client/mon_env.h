// Test environment: an in-process monitor (real MonServer) and N fake OSDs (tests/client/
// fake_backend.h) that booted with it and keep heartbeating, so clients see a real map
// and real map changes while data goes to in-memory fakes.
#ifndef MSGR_TESTS_CLIENT_MON_ENV_H_
#define MSGR_TESTS_CLIENT_MON_ENV_H_

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/client.h"
#include "proto/cluster_map.h"
#include "gtest/gtest.h"
#include "osd_sim/mon/mon_client.h"
#include "osd_sim/mon/mon_server.h"
#include "tests/client/fake_backend.h"

namespace msgr::client::testing {

class MonEnv {
 public:
  // Starts the monitor and `osds` fake OSDs and waits until all are up.
  // Check ok() (gtest assertions inside a constructor cannot abort the test).
  explicit MonEnv(int osds, size_t max_record_payload = 4096) : heartbeats_(osds) {
    FakeCluster::Get().Reset(max_record_payload);
    const char* base = std::getenv("TEST_TMPDIR");
    std::string dir = std::string(base ? base : "/tmp") + "/mon.XXXXXX";
    if (mkdtemp(dir.data()) == nullptr) return;
    mon::MonServerOptions mo;
    mo.monitor.data_dir = dir;
    mo.monitor.grace = absl::Milliseconds(400);
    mo.monitor.heartbeat_interval = absl::Milliseconds(100);
    mo.monitor.pg_num = 32;
    auto m = mon::MonServer::Create(mo);
    if (!m.ok()) return;
    mon_ = std::move(*m);
    auto admin = mon::MonClient::Create(mon_->addr(), absl::Seconds(2));
    if (!admin.ok()) return;
    admin_ = std::move(*admin);
    for (int i = 0; i < osds; ++i) StartOsd(i);
    ok_ = WaitFor([&] { return UpCount() == osds; });
  }
  ~MonEnv() {
    for (auto& h : heartbeats_) h.reset();
    admin_.reset();
    if (mon_) mon_->Shutdown();
  }

  bool ok() const { return ok_; }
  const std::string& mon_addr() const { return mon_->addr(); }
  mon::MonClient& admin() { return *admin_; }
  static std::string Addr(int id) { return absl::StrCat("fake:", id); }

  // Boots (or re-boots) fake OSD `id` and starts its heartbeats.
  void StartOsd(int id) {
    FakeCluster::Get().AddOsd(Addr(id));
    auto h = mon::MonClient::Create(mon_->addr(), absl::Seconds(2));
    ASSERT_TRUE(h.ok()) << h.status();
    mon::v1::BootOsdRequest boot;
    boot.set_id(id);
    boot.set_addr(Addr(id));
    boot.add_ms_types("fake");
    ASSERT_TRUE((*h)->StartHeartbeats(boot).ok());
    heartbeats_[id] = std::move(*h);
  }
  // Stops heartbeats of OSD `id`: the monitor marks it down after the grace period.
  void SilenceOsd(int id) { heartbeats_[id].reset(); }

  int UpCount() {
    auto m = admin_->GetMap();
    int n = 0;
    if (m.ok()) {
      for (auto& o : m->osds()) n += o.up() ? 1 : 0;
    }
    return n;
  }
  PlacementMap Map() { return placement::ToPlacementMap(*admin_->GetMap(), "fake"); }
  // An oid whose primary is `osd` in the monitor's current map.
  std::string OidOn(int osd, const std::string& prefix = "obj_") {
    PlacementMap pm = Map();
    for (int i = 0;; ++i) {
      std::string oid = absl::StrCat(prefix, i);
      if (pm.OsdOf(oid) == osd) return oid;
    }
  }
  ClientOptions Options() const {
    ClientOptions o;
    o.mon_addr = mon_->addr();
    o.ms_type = "fake";
    o.mon_timeout = absl::Seconds(2);
    o.op_timeout = absl::Seconds(10);
    return o;
  }

  template <typename F>
  static bool WaitFor(F f, absl::Duration limit = absl::Seconds(10)) {
    absl::Time until = absl::Now() + limit;
    while (!f()) {
      if (absl::Now() >= until) return false;
      absl::SleepFor(absl::Milliseconds(20));
    }
    return true;
  }

 private:
  bool ok_ = false;
  std::unique_ptr<mon::MonServer> mon_;
  std::unique_ptr<mon::MonClient> admin_;
  std::vector<std::unique_ptr<mon::MonClient>> heartbeats_;
};

}  // namespace msgr::client::testing

#endif  // MSGR_TESTS_CLIENT_MON_ENV_H_

// The bench end to end over an in-process monitor and fake OSDs: a counted run with
// --json/--acked-log/--verify, then the verify subcommand on the acked log, and a
// corrupted object found by verify (exit 1); the figures from OSD perf dumps over a
// --cluster-dir whose admin socket this test serves, and n/a when one cannot be had.
#include "client/bench/bench_cli.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <mutex>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "client/bench/pattern.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "osd_sim/admin_socket.h"
#include "tests/client/bench/fake_perf_dump.h"
#include "tests/client/fake_backend.h"
#include "tests/client/mon_env.h"

namespace msgr::bench {
namespace {

using client::testing::FakeCluster;
using client::testing::MonEnv;

absl::StatusOr<AuthConfig> NoKeyrings(const std::string& path) {
  return absl::NotFoundError("cannot read " + path);
}

std::string TmpFile(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base ? base : "/tmp", "/", name);
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

nlohmann::json Load(const std::string& path) {
  std::ifstream in(path);
  return nlohmann::json::parse(in);
}

TEST(BenchCliTest, CountedRunWritesJsonAckedLogAndVerifies) {
  MonEnv env(3, /*max_record_payload=*/3000);
  ASSERT_TRUE(env.ok());
  std::string json = TmpFile("run.json"), acked = TmpFile("acked.txt");
  std::ostringstream out, err;
  int rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "10K", "-t", "4",
                      "--seconds", "20", "--count", "200", "--json", json, "--acked-log",
                      acked, "--verify", "--auth", "none", "--prefix", "t1", "--osd-pids",
                      absl::StrCat(getpid())},
                     NoKeyrings, out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  EXPECT_NE(out.str().find("verify: 200 ok, 0 bad (of 200 objects read back)"),
            std::string::npos)
      << out.str();
  EXPECT_NE(out.str().find("Latency p99.9 (us)"), std::string::npos);

  auto lines = Lines(acked);
  ASSERT_EQ(lines.size(), 200u);
  std::string some = lines[17];
  int osd = env.Map().OsdOf(some);
  EXPECT_TRUE(VerifyPattern(some, FakeCluster::Get().Object(MonEnv::Addr(osd), some)).ok());
  EXPECT_EQ(FakeCluster::Get().Object(MonEnv::Addr(osd), some).size(), 10240u);

  nlohmann::json j = Load(json);
  EXPECT_EQ(j["ms_type"], "fake");
  EXPECT_EQ(j["object_size"], 10240);
  EXPECT_EQ(j["concurrency"], 4);
  EXPECT_EQ(j["ops"], 200);
  EXPECT_EQ(j["bytes"], 200 * 10240);
  EXPECT_GT(j["seconds"].get<double>(), 0);
  EXPECT_GT(j["mb_per_s"].get<double>(), 0);
  EXPECT_GT(j["iops"].get<double>(), 0);
  for (const char* k : {"p50", "p99", "p999", "max"}) {
    EXPECT_GT(j["lat_us"][k].get<double>(), 0) << k;
  }
  EXPECT_LE(j["lat_us"]["p50"].get<double>(), j["lat_us"]["p99"].get<double>());
  EXPECT_LE(j["lat_us"]["p999"].get<double>(), j["lat_us"]["max"].get<double>());
  EXPECT_TRUE(j["cpu_s_per_gb"]["client"].is_number());
  EXPECT_TRUE(j["cpu_s_per_gb"]["osds"].is_number());  // our own pid stands in
  EXPECT_GT(j["cpu_us_per_op"]["client"].get<double>(), 0);
  // /proc counts CPU in 10 ms ticks, more than this short run may use: check that the
  // per-op figure is the per-GiB one restated, not that it is above zero.
  const double osds_s = j["cpu_s_per_gb"]["osds"].get<double>() * 200 * 10240 / (1 << 30);
  EXPECT_NEAR(j["cpu_us_per_op"]["osds"].get<double>(), osds_s * 1e6 / 200, 0.5);
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["other"].is_number());  // our unnamed threads
  EXPECT_EQ(j["copies_per_byte"]["client"], 0);  // the fake messenger counts no copies
  // No --cluster-dir, so no perf dumps: those figures are null, and stderr says why.
  EXPECT_TRUE(j["cpu_us_per_op"]["osds_busy"].is_null());
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["crc"].is_null());
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["poller"].is_null());
  EXPECT_TRUE(j["poller_spin_s_per_gb"].is_null());
  EXPECT_TRUE(j["copies_per_byte"]["osd_wire"].is_null());
  EXPECT_TRUE(j["copies_per_byte"]["osd_store"].is_null());
  EXPECT_NE(err.str().find("no --cluster-dir (for its run/osd.*.asok): the figures from OSD "
                           "perf dumps"),
            std::string::npos)
      << err.str();
  EXPECT_NE(out.str().find("CPU-us/op OSDs busy:     n/a"), std::string::npos) << out.str();
  EXPECT_EQ(j["verify"]["checked"], 200);
  EXPECT_EQ(j["verify"]["mismatches"], 0);
  EXPECT_EQ(j["auth"], "none");
  EXPECT_EQ(j["errors"], 0);
  ASSERT_TRUE(j["lat_cdf"].is_array());
  EXPECT_GT(j["lat_cdf"].size(), 10u);
  EXPECT_EQ(j["lat_cdf"].back()[1], 1.0);

  // The verify subcommand over the acked log, then with one object corrupted.
  std::string vjson = TmpFile("verify.json");
  std::ostringstream out2, err2;
  rc = BenchMain({"verify", "--mon", env.mon_addr(), "--ms-type", "fake", "--oids", acked,
                  "--json", vjson},
                 NoKeyrings, out2, err2);
  EXPECT_EQ(rc, 0) << err2.str();
  EXPECT_EQ(Load(vjson)["verify"]["checked"], 200);
  EXPECT_EQ(Load(vjson)["verify"]["mismatches"], 0);

  std::string data = FakeCluster::Get().Object(MonEnv::Addr(osd), some);
  data[100] ^= 0x55;
  FakeCluster::Get().SetObject(MonEnv::Addr(osd), some, data);
  std::ostringstream out3, err3;
  rc = BenchMain({"verify", "--mon", env.mon_addr(), "--ms-type", "fake", "--oids", acked,
                  "--json", vjson},
                 NoKeyrings, out3, err3);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out3.str().find("verify: 199 ok, 1 bad (of 200 objects read back)"), std::string::npos)
      << out3.str();
  EXPECT_NE(out3.str().find(some), std::string::npos) << out3.str();
  EXPECT_EQ(Load(vjson)["verify"]["mismatches"], 1);
}

// --clients N: N client instances, each connected to every OSD before the run (the time
// that took is reported), the ops spread over them; the objects all read back.
TEST(BenchCliTest, SeveralClientsConnectToEveryOsdFirstAndShareTheOps) {
  MonEnv env(3, /*max_record_payload=*/3000);
  ASSERT_TRUE(env.ok());
  std::mutex mu;
  std::map<std::string, int> connects;  // by OSD address
  FakeCluster::Get().SetConnectHook([&](const std::string& addr) {
    {
      std::lock_guard<std::mutex> l(mu);
      ++connects[addr];
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // a slow handshake
  });
  std::string json = TmpFile("clients.json");
  std::ostringstream out, err;
  int rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "4K", "-t", "8",
                      "--clients", "5", "--count", "100", "--seconds", "20", "--json", json,
                      "--verify", "--auth", "none", "--prefix", "cl", "--quiet"},
                     NoKeyrings, out, err);
  FakeCluster::Get().SetConnectHook(nullptr);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  EXPECT_NE(err.str().find("5 clients connected to every OSD in"), std::string::npos)
      << err.str();
  {
    std::lock_guard<std::mutex> l(mu);
    ASSERT_EQ(connects.size(), 3u) << "not every OSD was connected to";
    for (const auto& [addr, n] : connects) EXPECT_EQ(n, 5) << addr << ": one session per client";
  }
  nlohmann::json j = Load(json);
  EXPECT_EQ(j["clients"], 5);
  ASSERT_TRUE(j["connect_s"].is_number());
  // The connect time is measured: every session's (slow) handshake is inside it.
  EXPECT_GE(j["connect_s"].get<double>(), 0.03);
  EXPECT_LT(j["connect_s"].get<double>(), 20.0);
  EXPECT_EQ(j["ops"], 100);
  EXPECT_EQ(j["verify"]["checked"], 100);
  EXPECT_EQ(j["verify"]["mismatches"], 0);
  EXPECT_NE(out.str().find("Clients:                 5"), std::string::npos) << out.str();

  EXPECT_NE(BenchMain({"--mon", env.mon_addr(), "--clients", "0"}, NoKeyrings, out, err), 0);
}

// --mode seq|rand read what a write run left (as rados bench seq|rand): the objects of
// the prefix, listed from every OSD; seq reads each once, rand until --count; the report
// and JSON have the same fields, with mode "seq"/"rand"; a prefix with no objects fails.
TEST(BenchCliTest, SeqAndRandReadWhatAWriteRunLeft) {
  MonEnv env(3, /*max_record_payload=*/3000);
  ASSERT_TRUE(env.ok());
  std::ostringstream out, err;
  ASSERT_EQ(BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "8K", "-t", "4",
                       "--count", "50", "--seconds", "0", "--auth", "none", "--prefix", "rd"},
                      NoKeyrings, out, err),
            0)
      << err.str();
  const std::string seq_json = TmpFile("seq.json"), rand_json = TmpFile("rand.json");
  std::ostringstream out2, err2;
  ASSERT_EQ(BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "--mode", "seq", "-t", "4",
                       "--auth", "none", "--prefix", "rd", "--json", seq_json},
                      NoKeyrings, out2, err2),
            0)
      << err2.str();
  EXPECT_NE(err2.str().find("reading (seq) 50 objects rd*"), std::string::npos) << err2.str();
  EXPECT_NE(out2.str().find("Total reads made:        50"), std::string::npos) << out2.str();
  auto j = Load(seq_json);
  EXPECT_EQ(j["mode"], "seq");
  EXPECT_EQ(j["ops"], 50);
  EXPECT_EQ(j["object_size"], 8192);
  EXPECT_EQ(j["errors"], 0);

  std::ostringstream out3, err3;
  ASSERT_EQ(BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "--mode=rand", "-t", "2",
                       "--count", "120", "--seconds", "0", "--auth", "none", "--prefix", "rd",
                       "--json", rand_json},
                      NoKeyrings, out3, err3),
            0)
      << err3.str();
  auto r = Load(rand_json);
  EXPECT_EQ(r["mode"], "rand");
  EXPECT_EQ(r["ops"], 120) << "rand goes on past the number of objects";

  std::ostringstream out5, err5;
  EXPECT_EQ(BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "--mode", "seq",
                       "--auth", "none", "--prefix", "nothing-here"},
                      NoKeyrings, out5, err5),
            1);
  EXPECT_NE(err5.str().find("no objects whose id starts with 'nothing-here'"), std::string::npos)
      << err5.str();
}

TEST(BenchCliTest, TimedRunPrintsProgressAndFailedOpsExitNonZero) {
  MonEnv env(2);
  ASSERT_TRUE(env.ok());
  std::ostringstream out, err;
  int rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "4K", "-t", "2",
                      "--seconds", "1.5", "--auth", "none", "--prefix", "t2"},
                     NoKeyrings, out, err);
  ASSERT_EQ(rc, 0) << err.str();
  EXPECT_NE(err.str().find("cur lat(us)"), std::string::npos) << err.str();
  EXPECT_NE(err.str().find("\n    1 "), std::string::npos) << err.str();  // second 1 line
  EXPECT_NE(out.str().find("verify: not requested"), std::string::npos);

  // Every OSD dead and silent: ops time out, the run reports errors and exits 1.
  FakeCluster::Get().HoldAcks(MonEnv::Addr(0), true);
  FakeCluster::Get().HoldAcks(MonEnv::Addr(1), true);
  std::ostringstream out2, err2;
  rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "4K", "-t", "2",
                  "--seconds", "0.2", "--op-timeout", "0.3", "--auth", "none", "--quiet"},
                 NoKeyrings, out2, err2);
  EXPECT_EQ(rc, 1);
  EXPECT_NE(out2.str().find("timed out after 300ms"), std::string::npos) << out2.str();
}

// A cluster dir standing in for tools/cluster.sh's: osd.0.pid is this process, and
// run/osd.0.asok an admin socket whose perf dump shows `before` at the first query and
// `after` from then on (the bench queries once before its run and once after), their
// uptime_s running on with the clock from when this was made.
class FakeClusterDir {
 public:
  FakeClusterDir(const testing::FakeOsdCounters& before, const testing::FakeOsdCounters& after) {
    char tmpl[] = "/tmp/msgr-bench-cli.XXXXXX";  // short: a unix socket path
    if (mkdtemp(tmpl) == nullptr) return;
    dir_ = tmpl;
    mkdir((dir_ + "/run").c_str(), 0755);
    std::ofstream(dir_ + "/osd.0.pid") << getpid() << "\n";
    auto sock = osd::AdminSocket::Create(dir_ + "/run/osd.0.asok");
    if (!sock.ok()) return;
    sock_ = std::move(*sock);
    const absl::Time made = absl::Now();
    sock_->Register("perf dump", [this, before, after, made] {
      testing::FakeOsdCounters c = queries_++ == 0 ? before : after;
      c.uptime_s += absl::ToDoubleSeconds(absl::Now() - made);
      return testing::FakePerfDump(c);
    });
    sock_->Start();
  }
  ~FakeClusterDir() {
    sock_.reset();
    unlink((dir_ + "/osd.0.pid").c_str());
    rmdir((dir_ + "/run").c_str());
    rmdir(dir_.c_str());
  }
  bool ok() const { return sock_ != nullptr; }
  const std::string& dir() const { return dir_; }
  int queries() const { return queries_; }

 private:
  std::string dir_;
  std::unique_ptr<osd::AdminSocket> sock_;
  std::atomic<int> queries_{0};
};

TEST(BenchCliTest, FiguresFromTheOsdPerfDumpsOfAClusterDir) {
  MonEnv env(2);
  ASSERT_TRUE(env.ok());
  testing::FakeOsdCounters before, after;
  before.uptime_s = 5;
  before.tcp_copied_rx = 1000;
  before.store_copied = 2000;
  after = before;
  after.tcp_copied_rx += 2 * 100 * 4096;  // 2 copies per byte of 100 4 KiB writes
  after.rdma_copied_rx += 100 * 4096;     // messengers add up
  after.rdma_copied_tx += 4 * 100 * 4096;  // forwarded to two replicas: staged, then sent
  after.store_copied += 100 * 4096 / 2;
  FakeClusterDir cluster(before, after);
  ASSERT_TRUE(cluster.ok());
  std::string json = TmpFile("perf.json");
  std::ostringstream out, err;
  int rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "4K", "-t", "4",
                      "--count", "100", "--seconds", "0", "--json", json, "--auth", "none",
                      "--cluster-dir", cluster.dir(), "--quiet", "--osd-pids",
                      absl::StrCat(getpid(), ",", getppid())},  // ours again, and one more
                     NoKeyrings, out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  EXPECT_EQ(cluster.queries(), 2);
  nlohmann::json j = Load(json);
  ASSERT_EQ(j["bytes"], 100 * 4096);
  EXPECT_EQ(j["osd_processes"], 2);  // counted once each
  EXPECT_EQ(err.str().find("the others were gone"), std::string::npos) << err.str();
  EXPECT_EQ(j["copies_per_byte"]["osd_wire"], 3.0);
  EXPECT_EQ(j["copies_per_byte"]["osd_store"], 0.5);
  EXPECT_EQ(j["copies_per_byte"]["osd_send"], 4.0);
  // This process has no poller threads: crc and spin (0 here) leave its poller role at 0.
  EXPECT_EQ(j["osd_cpu_s_per_gb_by_role"]["crc"], 0.0);
  EXPECT_EQ(j["osd_cpu_s_per_gb_by_role"]["poller"], 0.0);
  EXPECT_EQ(j["poller_spin_s_per_gb"], 0.0);
  EXPECT_EQ(j["cpu_us_per_op"]["osds_busy"], j["cpu_us_per_op"]["osds"]);
  EXPECT_EQ(err.str().find("are n/a"), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("OSD wire 3.000, OSD store 0.500, OSD send 4.000"), std::string::npos) << out.str();
}

TEST(BenchCliTest, AnOsdRestartedDuringTheRunMakesItsFiguresNaNotAFailure) {
  MonEnv env(2);
  ASSERT_TRUE(env.ok());
  testing::FakeOsdCounters before, after;
  before.uptime_s = 50;
  before.store_copied = 1 << 20;
  after.uptime_s = 0;  // a new process behind the same socket, counters from zero
  FakeClusterDir cluster(before, after);
  ASSERT_TRUE(cluster.ok());
  std::string json = TmpFile("restart.json");
  std::ostringstream out, err;
  int rc = BenchMain({"--mon", env.mon_addr(), "--ms-type", "fake", "-b", "4K", "-t", "2",
                      "--count", "20", "--seconds", "0", "--json", json, "--auth", "none",
                      "--cluster-dir", cluster.dir(), "--quiet"},
                     NoKeyrings, out, err);
  ASSERT_EQ(rc, 0) << err.str() << out.str();
  nlohmann::json j = Load(json);
  EXPECT_EQ(j["ops"], 20);
  EXPECT_TRUE(j["copies_per_byte"]["osd_store"].is_null());
  EXPECT_TRUE(j["cpu_us_per_op"]["osds_busy"].is_null());
  EXPECT_TRUE(j["cpu_us_per_op"]["osds"].is_number());
  EXPECT_NE(err.str().find("osd.0 restarted during the run"), std::string::npos) << err.str();
  EXPECT_NE(out.str().find("OSD store n/a"), std::string::npos) << out.str();
}

}  // namespace
}  // namespace msgr::bench

// The bench end to end over an in-process monitor and fake OSDs: a counted run with
// --json/--acked-log/--verify, then the verify subcommand on the acked log, and a
// corrupted object found by verify (exit 1).
#include "client/bench/bench_cli.h"

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bench/pattern.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
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
  EXPECT_NE(out.str().find("verify: checked 200, mismatches 0"), std::string::npos) << out.str();
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
  EXPECT_NE(out3.str().find("verify: checked 200, mismatches 1"), std::string::npos)
      << out3.str();
  EXPECT_NE(out3.str().find(some), std::string::npos) << out3.str();
  EXPECT_EQ(Load(vjson)["verify"]["mismatches"], 1);
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
  EXPECT_NE(out.str().find("verify: checked 0, mismatches 0"), std::string::npos);

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

}  // namespace
}  // namespace msgr::bench

// The bench report's arithmetic on fixed readings: CPU per op, OSD CPU per GiB by thread
// role (crc and spin taken out of the pollers', capped at their CPU), payload copies per
// byte; the JSON fields (old ones kept) and the text summary, with null / n/a for what was
// not measured.
#include "client/bench/bench_report.h"

#include <string>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace msgr::bench {
namespace {

constexpr uint64_t kGiB = 1ull << 30;

double& Role(RoleCpu& cpu, ThreadRole r) { return cpu[static_cast<int>(r)]; }

// 500000 ops, 2 GiB; client 2.5 CPU-s; OSDs 10 CPU-s of which transport 4, poller 5 (crc
// 1, spin 3), store 0.5, other 0.25; 2, 4, 1 and 8 GiB copied by client, OSD wire, OSD store
// and OSD send.
BenchReport Measured() {
  BenchReport r;
  r.ms_type = "tcp";
  r.object_size = 4096;
  r.run.seconds = 2;
  r.run.ops = 500000;
  r.run.bytes = 2 * kGiB;
  r.run.client_cpu_s = 2.5;
  r.run.latency.Record(100000);
  r.osd_cpu_s = 10;
  r.osd_processes = 3;
  RoleCpu cpu{};
  Role(cpu, ThreadRole::kTransport) = 4;
  Role(cpu, ThreadRole::kPoller) = 5;
  Role(cpu, ThreadRole::kStore) = 0.5;
  Role(cpu, ThreadRole::kOther) = 0.25;
  r.osd_role_cpu_s = cpu;
  OsdPerfDelta perf;
  perf.osds = 3;
  perf.crc_ns = 1'000'000'000;
  perf.spin_ns = 3'500'000'000;  // wall clock: more than the CPU spent spinning
  perf.busy_ns = 1'000'000'000;  // so spin = 5 s poller CPU - 1 s crc - 1 s busy = 3 s
  perf.wire_copied_rx = 4 * kGiB;
  perf.store_copied = kGiB;
  perf.send_copied_tx = 8 * kGiB;  // a primary staging and sending to two replicas
  r.osd_perf = perf;
  r.client_copied_tx = 2 * kGiB;
  return r;
}

TEST(BenchReportTest, PerOpPerGiBAndPerByteFigures) {
  const BenchReport r = Measured();
  const CpuPerOp op = CpuMicrosPerOp(r);
  EXPECT_DOUBLE_EQ(*op.client, 5.0);
  EXPECT_DOUBLE_EQ(*op.osds, 20.0);
  EXPECT_DOUBLE_EQ(*op.osds_busy, 14.0);  // (10 - 3) s / 500000

  const OsdCpuByRole role = OsdCpuPerGiBByRole(r);
  EXPECT_DOUBLE_EQ(*role.transport, 2.0);
  EXPECT_DOUBLE_EQ(*role.crc, 0.5);
  EXPECT_DOUBLE_EQ(*role.poller, 2.0);  // (5 - 1) s / 2 GiB
  EXPECT_DOUBLE_EQ(*role.store, 0.25);
  EXPECT_DOUBLE_EQ(*role.other, 0.125);
  EXPECT_DOUBLE_EQ(*role.poller_spin, 1.5);
  auto t = PollerCpuTimes(r);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->capped);

  const CopiesPerByte copies = PayloadCopiesPerByte(r);
  EXPECT_DOUBLE_EQ(*copies.client, 1.0);
  EXPECT_DOUBLE_EQ(*copies.osd_wire, 2.0);
  EXPECT_DOUBLE_EQ(*copies.osd_store, 0.5);
  EXPECT_DOUBLE_EQ(*copies.osd_send, 4.0);
}

TEST(BenchReportTest, WallClockSpinAndCrcAreCappedAtThePollersCpu) {
  BenchReport r = Measured();
  r.osd_perf->busy_ns = 0;  // no pass found work: all the poller CPU less crc is spin
  auto t = PollerCpuTimes(r);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->capped);
  EXPECT_DOUBLE_EQ(t->spin_s, 4.0);
  EXPECT_DOUBLE_EQ(*OsdCpuPerGiBByRole(r).poller_spin, 2.0);
  EXPECT_DOUBLE_EQ(*CpuMicrosPerOp(r).osds_busy, 12.0);  // (10 - 4) s / 500000
  r.osd_perf->busy_ns = 6'000'000'000;  // wall-clock work beyond the CPU: no spin left
  t = PollerCpuTimes(r);
  EXPECT_TRUE(t->capped);
  EXPECT_DOUBLE_EQ(t->spin_s, 0.0);
  r.osd_perf->busy_ns = 0;

  r.osd_perf->crc_ns = 7'000'000'000;
  t = PollerCpuTimes(r);
  EXPECT_DOUBLE_EQ(t->crc_s, 5.0);
  EXPECT_DOUBLE_EQ(t->spin_s, 0.0);
  EXPECT_DOUBLE_EQ(*OsdCpuPerGiBByRole(r).poller, 0.0);

  // Without per-thread readings there is nothing to cap by: the counters as they are.
  r.osd_role_cpu_s.reset();
  t = PollerCpuTimes(r);
  EXPECT_FALSE(t->capped);
  EXPECT_DOUBLE_EQ(t->spin_s, 3.5);
  EXPECT_DOUBLE_EQ(*CpuMicrosPerOp(r).osds_busy, 13.0);  // (10 - 3.5) s / 500000
}

// Pollers that drive their tcp messenger (run to completion) did transport work on their
// threads: pollers[].messenger_ns moves it from the poller role to transport, capped at the
// poller threads' CPU less crc, and it is not spin.
TEST(BenchReportTest, PollersTimeOnTheirMessengerIsTransport) {
  BenchReport r = Measured();
  r.osd_perf->messenger_ns = 2'000'000'000;
  const OsdCpuByRole role = OsdCpuPerGiBByRole(r);
  EXPECT_DOUBLE_EQ(*role.transport, 3.0);    // (4 + 2) s / 2 GiB
  EXPECT_DOUBLE_EQ(*role.crc, 0.5);
  EXPECT_DOUBLE_EQ(*role.poller, 1.0);       // (5 - 1 - 2) s / 2 GiB
  EXPECT_DOUBLE_EQ(*role.poller_spin, 0.5);  // 5 - 1 crc - 2 transport - 1 busy = 1 s
  auto t = PollerCpuTimes(r);
  ASSERT_TRUE(t.has_value());
  EXPECT_FALSE(t->capped);
  EXPECT_DOUBLE_EQ(t->transport_s, 2.0);

  r.osd_perf->messenger_ns = 9'000'000'000;  // sampled beyond the CPU: capped
  t = PollerCpuTimes(r);
  EXPECT_TRUE(t->capped);
  EXPECT_DOUBLE_EQ(t->transport_s, 4.0);  // 5 s poller CPU - 1 s crc
  EXPECT_DOUBLE_EQ(t->spin_s, 0.0);
  EXPECT_DOUBLE_EQ(*OsdCpuPerGiBByRole(r).poller, 0.0);
  EXPECT_DOUBLE_EQ(*OsdCpuPerGiBByRole(r).transport, 4.0);
}

TEST(BenchReportTest, JsonHasTheNewFieldsBesideTheOldOnes) {
  const nlohmann::json j = ToJson(Measured());
  for (const char* k : {"mode", "ms_type", "object_size", "concurrency", "seconds", "ops",
                        "bytes", "mb_per_s", "iops", "lat_us", "cpu_s_per_gb", "osd_processes",
                        "verify", "auth", "errors", "lat_cdf", "pool"}) {
    EXPECT_TRUE(j.contains(k)) << k;
  }
  EXPECT_EQ(j["pool"], "default");
  EXPECT_EQ(j["cpu_s_per_gb"]["client"], 1.25);
  EXPECT_EQ(j["cpu_s_per_gb"]["osds"], 5.0);
  EXPECT_EQ(j["cpu_us_per_op"], (nlohmann::json{{"client", 5.0}, {"osds", 20.0},
                                                 {"osds_busy", 14.0}}));
  EXPECT_EQ(j["osd_cpu_s_per_gb_by_role"],
            (nlohmann::json{{"transport", 2.0}, {"crc", 0.5}, {"poller", 2.0},
                            {"store", 0.25}, {"other", 0.125}}));
  EXPECT_EQ(j["poller_spin_s_per_gb"], 1.5);
  EXPECT_EQ(j["copies_per_byte"],
            (nlohmann::json{{"client", 1.0}, {"osd_wire", 2.0}, {"osd_store", 0.5},
                            {"osd_send", 4.0}}));

  const std::string text = SummaryText(Measured());
  EXPECT_NE(text.find("CPU-us/op OSDs busy:     14.000"), std::string::npos) << text;
  EXPECT_NE(text.find("transport 2.000, crc 0.500, poller 2.000 (spin 1.500), store 0.250, "
                      "other 0.125"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("client 1.000, OSD wire 2.000, OSD store 0.500, OSD send 4.000"), std::string::npos)
      << text;

  BenchReport stolen = Measured();
  stolen.host_cpu = HostCpuShare{62.5, 27.25};
  EXPECT_EQ(ToJson(stolen)["host_cpu"],
            (nlohmann::json{{"busy_pct", 62.5}, {"steal_pct", 27.25}}));
  const std::string stolen_text = SummaryText(stolen);
  EXPECT_NE(stolen_text.find("Host CPU:                busy 62%, stolen by the hypervisor 27%"),
            std::string::npos)
      << stolen_text;
}

TEST(BenchReportTest, UnmeasuredFiguresAreNullAndNa) {
  BenchReport r = Measured();
  r.osd_perf.reset();  // no perf dumps
  nlohmann::json j = ToJson(r);
  EXPECT_EQ(j["cpu_us_per_op"]["osds"], 20.0);
  EXPECT_TRUE(j["cpu_us_per_op"]["osds_busy"].is_null());
  // transport too: part of the pollers' CPU may be theirs (pollers[].messenger_ns).
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["transport"].is_null());
  EXPECT_EQ(j["osd_cpu_s_per_gb_by_role"]["store"], 0.25);
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["crc"].is_null());
  EXPECT_TRUE(j["osd_cpu_s_per_gb_by_role"]["poller"].is_null());
  EXPECT_TRUE(j["poller_spin_s_per_gb"].is_null());
  EXPECT_EQ(j["copies_per_byte"]["client"], 1.0);
  EXPECT_TRUE(j["copies_per_byte"]["osd_wire"].is_null());
  EXPECT_TRUE(j["copies_per_byte"]["osd_store"].is_null());
  const std::string text = SummaryText(r);
  EXPECT_NE(text.find("CPU-us/op OSDs busy:     n/a"), std::string::npos) << text;
  EXPECT_NE(text.find("transport n/a, crc n/a, poller n/a (spin n/a)"), std::string::npos) << text;
  EXPECT_NE(text.find("OSD wire n/a, OSD store n/a, OSD send n/a"), std::string::npos) << text;

  // Nothing written (the verify subcommand): every new figure is null.
  BenchReport v;
  v.mode = "verify";
  j = ToJson(v);
  for (const char* group : {"cpu_us_per_op", "osd_cpu_s_per_gb_by_role", "copies_per_byte"}) {
    ASSERT_TRUE(j[group].is_object()) << group;
    for (const auto& [k, val] : j[group].items()) EXPECT_TRUE(val.is_null()) << group << "." << k;
  }
  EXPECT_TRUE(j["poller_spin_s_per_gb"].is_null());
  EXPECT_TRUE(j["host_cpu"]["busy_pct"].is_null());  // never read
  EXPECT_TRUE(j["host_cpu"]["steal_pct"].is_null());
}

}  // namespace
}  // namespace msgr::bench

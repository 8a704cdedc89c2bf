// Reading the OSD counters the bench needs from perf dumps: the fields summed over
// pollers and messengers, a missing field named, deltas summed over OSDs, and a restarted
// or unreadable OSD making the whole figure unavailable; then over a real admin socket.
#include "client/bench/osd_stats.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "osd_sim/admin_socket.h"
#include "tests/client/bench/fake_perf_dump.h"

namespace msgr::bench {
namespace {

using testing::FakeOsdCounters;
using testing::FakePerfDump;

FakeOsdCounters Counters(int id, double uptime, uint64_t base) {
  FakeOsdCounters c;
  c.id = id;
  c.uptime_s = uptime;
  c.spin_ns = {base, 2 * base};
  c.crc_ns = {base / 10, base / 5};
  c.busy_ns = {base / 2, base / 2};
  c.tcp_copied_rx = 3 * base;
  c.rdma_copied_rx = base;
  c.rdma_copied_tx = 6 * base;
  c.store_copied = 5 * base;
  return c;
}

TEST(OsdStatsTest, ParsesAPerfDumpSummingPollersAndMessengers) {
  auto s = ParsePerfDump(FakePerfDump(Counters(2, 7.5, 1000)));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->id, 2);
  EXPECT_DOUBLE_EQ(s->uptime_s, 7.5);
  EXPECT_EQ(s->spin_ns, 3000u);
  EXPECT_EQ(s->crc_ns, 300u);
  EXPECT_EQ(s->busy_ns, 1000u);
  EXPECT_EQ(s->wire_copied_rx, 4000u);
  EXPECT_EQ(s->send_copied_tx, 6000u);  // tcp's 0 and rdma's
  EXPECT_EQ(s->store_copied, 5000u);
  EXPECT_EQ(s->messenger_ns, 0u);  // no poller drives a messenger (an older OSD's dump)
}

TEST(OsdStatsTest, PollersTimeOnTheMessengerTheyDriveIsSummed) {
  FakeOsdCounters c = Counters(2, 7.5, 1000);
  c.messenger_ns = {40, 2};
  auto s = ParsePerfDump(FakePerfDump(c));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->messenger_ns, 42u);
}

TEST(OsdStatsTest, AMissingFieldIsNamed) {
  const nlohmann::json good = nlohmann::json::parse(FakePerfDump(Counters(0, 1, 10)));
  struct Case {
    const char* what;
    std::function<void(nlohmann::json&)> spoil;
  };
  for (const Case& c : std::vector<Case>{
           {"pollers[].crc_ns", [](nlohmann::json& j) { j["pollers"][1].erase("crc_ns"); }},
           {"pollers[]", [](nlohmann::json& j) { j["pollers"] = nlohmann::json::array(); }},
           {"messenger.rdma.payload_bytes_copied_rx",
            [](nlohmann::json& j) { j["messenger"]["rdma"].erase("payload_bytes_copied_rx"); }},
           {"messenger.tcp.payload_bytes_copied_tx",
            [](nlohmann::json& j) { j["messenger"]["tcp"].erase("payload_bytes_copied_tx"); }},
           {"messenger.<type>", [](nlohmann::json& j) { j.erase("messenger"); }},
           {"store.payload_bytes_copied", [](nlohmann::json& j) { j.erase("store"); }},
           {"osd.id", [](nlohmann::json& j) { j["osd"].erase("uptime_s"); }},
       }) {
    nlohmann::json j = good;
    c.spoil(j);
    auto s = ParsePerfDump(j.dump());
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.what), std::string::npos) << s.status();
  }
  EXPECT_FALSE(ParsePerfDump("").ok());
  EXPECT_FALSE(ParsePerfDump("{\"error\": \"unknown command\"").ok());
  EXPECT_FALSE(ParsePerfDump("[1, 2]").ok());
}

TEST(OsdStatsTest, SumsDeltasOverOsdsAllOrNothing) {
  PerfSamples before = {{"a", *ParsePerfDump(FakePerfDump(Counters(0, 10, 1000)))},
                        {"b", *ParsePerfDump(FakePerfDump(Counters(1, 20, 100)))}};
  PerfSamples after = {{"a", *ParsePerfDump(FakePerfDump(Counters(0, 13, 4000)))},
                       {"b", *ParsePerfDump(FakePerfDump(Counters(1, 23, 200)))}};
  auto d = SumPerfDeltas(before, after);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->osds, 2);
  EXPECT_EQ(d->spin_ns, 3u * 3000 + 3u * 100);
  EXPECT_EQ(d->crc_ns, 300u * 3 + 30u);  // (4000 - 1000) * 3/10 + (200 - 100) * 3/10
  EXPECT_EQ(d->busy_ns, 3000u + 100u);
  EXPECT_EQ(d->wire_copied_rx, 4u * 3000 + 4u * 100);
  EXPECT_EQ(d->send_copied_tx, 6u * 3000 + 6u * 100);
  EXPECT_EQ(d->store_copied, 5u * 3000 + 5u * 100);

  // osd.1 restarted: its uptime (and counters) went back.
  PerfSamples restarted = after;
  restarted["b"] = *ParsePerfDump(FakePerfDump(Counters(1, 2, 50)));
  auto r = SumPerfDeltas(before, restarted);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("osd.1 restarted"), std::string::npos) << r.status();

  // osd.1 restarted early in the run: its uptime at the end exceeds the one at the start,
  // but it started 3 s after the first reading's process did.
  PerfSamples started_later = after;
  before["b"]->started_at_s = 1000;
  started_later["b"]->started_at_s = 1000 + 0.3;  // within the slack: the same process
  EXPECT_TRUE(SumPerfDeltas(before, started_later).ok());
  started_later["b"]->started_at_s = 1000 + 3;
  r = SumPerfDeltas(before, started_later);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("osd.1 restarted"), std::string::npos) << r.status();

  PerfSamples unread = after;
  unread["a"] = absl::UnavailableError("cannot connect to admin socket a");
  EXPECT_EQ(SumPerfDeltas(before, unread).status().message(), "cannot connect to admin socket a");
  unread.erase("a");
  EXPECT_NE(SumPerfDeltas(before, unread).status().message().find("a not read after"),
            std::string::npos);
  EXPECT_FALSE(SumPerfDeltas({}, {}).ok());
}

TEST(OsdStatsTest, ReadsTheAdminSocketsOfAClusterDir) {
  char tmpl[] = "/tmp/msgr-osd-stats.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ASSERT_EQ(mkdir((dir + "/run").c_str(), 0755), 0);
  EXPECT_TRUE(OsdAdminSockets(dir + "/none").empty());
  std::atomic<uint64_t> spin{500};
  auto sock = osd::AdminSocket::Create(dir + "/run/osd.0.asok");
  ASSERT_TRUE(sock.ok()) << sock.status();
  (*sock)->Register("perf dump", [&] {
    FakeOsdCounters c = Counters(0, 1, 0);
    c.spin_ns = {spin.load()};
    c.crc_ns = {0};
    return FakePerfDump(c);
  });
  (*sock)->Start();
  const std::vector<std::string> sockets = OsdAdminSockets(dir);
  ASSERT_EQ(sockets, std::vector<std::string>{dir + "/run/osd.0.asok"});
  PerfSamples before = SamplePerf(sockets);
  spin = 1700;
  PerfSamples after = SamplePerf(sockets);
  ASSERT_TRUE(before.begin()->second.ok()) << before.begin()->second.status();
  // Read at Unix time T with uptime 1 s: started at T - 1.
  const double now_s = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());
  EXPECT_NEAR(before.begin()->second->started_at_s, now_s - 1, 0.5);
  auto d = SumPerfDeltas(before, after);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->spin_ns, 1200u);

  // A socket nobody serves any more: an error naming it, not a crash.
  sock->reset();
  PerfSamples gone = SamplePerf({dir + "/run/osd.0.asok"});
  ASSERT_FALSE(gone.begin()->second.ok());
  EXPECT_NE(gone.begin()->second.status().message().find("osd.0.asok"), std::string::npos)
      << gone.begin()->second.status();
  rmdir((dir + "/run").c_str());
  rmdir(dir.c_str());
}

}  // namespace
}  // namespace msgr::bench

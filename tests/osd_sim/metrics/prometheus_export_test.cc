// The registry -> Prometheus conversion: names, units, labels, and the text a scrape gets.
#include "osd_sim/metrics/prometheus_export.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "prometheus/text_serializer.h"

namespace msgr::metrics {
namespace {

using ::testing::HasSubstr;

#define TEST_POLLER_COUNTERS(X)                                  \
  X(records, kCounter, kNone, "records drained")                 \
  X(spin_ns, kCounter, kNanoseconds, "time spent spinning")      \
  X(rings, kGauge, kNone, "rings drained now")

#define TEST_MESSENGER_COUNTERS(X)                                      \
  X(bytes_sent, kCounter, kBytes, "bytes written")                      \
  X(record_bytes_received, kCounter, kBytes, "payload bytes received")  \
  X(connections_open, kGauge, kNone, "connections open now")

#define TEST_OSD_COUNTERS(X)                                                  \
  X(ops, kCounter, kNone, "client writes stored")                             \
  X(bytes, kCounter, kBytes, "payload bytes of those writes")                 \
  X(ring_high_water_bytes, kGauge, kBytes, "most bytes \\ in one\nring")      \
  X(flush_latency_sum_us, kCounter, kNone, "sum of flush latencies, microseconds")

MSGR_COUNTER_SNAPSHOT(TestPollerCounters, TEST_POLLER_COUNTERS);
MSGR_COUNTER_SNAPSHOT(TestMessengerCounters, TEST_MESSENGER_COUNTERS);
MSGR_COUNTER_SNAPSHOT(TestOsdCounters, TEST_OSD_COUNTERS);

const CounterDesc& Desc(const CounterDesc* descs, size_t n, absl::string_view name) {
  for (size_t i = 0; i < n; ++i) {
    if (descs[i].name == name) return descs[i];
  }
  ADD_FAILURE() << "no counter " << name;
  return descs[0];
}
#define DESC(Struct, name) Desc(Struct::kDescs, std::size(Struct::kDescs), name)

TEST(MetricNameTest, PrefixGroupUnitAndTotal) {
  EXPECT_EQ(MetricName("poller", DESC(TestPollerCounters, "records")), "msgr_poller_records_total");
  EXPECT_EQ(MetricName("poller", DESC(TestPollerCounters, "spin_ns")),
            "msgr_poller_spin_seconds_total");
  EXPECT_EQ(MetricName("poller", DESC(TestPollerCounters, "rings")), "msgr_poller_rings");
  EXPECT_EQ(MetricName("messenger", DESC(TestMessengerCounters, "bytes_sent")),
            "msgr_messenger_sent_bytes_total");
  EXPECT_EQ(MetricName("messenger", DESC(TestMessengerCounters, "record_bytes_received")),
            "msgr_messenger_record_received_bytes_total");
  EXPECT_EQ(MetricName("osd", DESC(TestOsdCounters, "ring_high_water_bytes")),
            "msgr_osd_ring_high_water_bytes");
  EXPECT_EQ(MetricName("osd", DESC(TestOsdCounters, "flush_latency_sum_us")),
            "msgr_osd_flush_latency_sum_seconds_total");
}

TEST(MetricNameTest, OsdClientWritesAreNamedForWhatTheyCount) {
  EXPECT_EQ(MetricName("osd", DESC(TestOsdCounters, "ops")), "msgr_osd_client_writes_total");
  EXPECT_EQ(MetricName("osd", DESC(TestOsdCounters, "bytes")), "msgr_osd_client_write_bytes_total");
  // The rename is the osd group's only: another group's `ops` keeps its name.
  EXPECT_EQ(MetricName("store", DESC(TestOsdCounters, "ops")), "msgr_store_ops_total");
}

TEST(MetricScaleTest, NanosecondsAndMicrosecondsBecomeSeconds) {
  EXPECT_DOUBLE_EQ(MetricScale(DESC(TestPollerCounters, "spin_ns")), 1e-9);
  EXPECT_DOUBLE_EQ(MetricScale(DESC(TestOsdCounters, "flush_latency_sum_us")), 1e-6);
  EXPECT_DOUBLE_EQ(MetricScale(DESC(TestMessengerCounters, "bytes_sent")), 1.0);
  EXPECT_DOUBLE_EQ(MetricScale(DESC(TestPollerCounters, "records")), 1.0);
}

TEST(MetricHelpTest, EscapesBackslashAndNewline) {
  EXPECT_EQ(MetricHelp(DESC(TestOsdCounters, "ring_high_water_bytes")),
            "most bytes \\\\ in one\\nring");
}

// Two pollers, a tcp messenger and the OSD group, as an OSD registers them.
void AddTestSources(CounterRegistry* r) {
  for (int i = 0; i < 2; ++i) {
    r->Add({"pollers", i, [i] {
             TestPollerCounters c;
             c.records = 10 + i;
             c.spin_ns = 1'500'000'000;
             c.rings = 1;
             return std::vector{c.Group("poller")};
           }});
  }
  r->Add({"osd", -1, [] {
           TestOsdCounters c;
           c.ops = 21;
           c.bytes = 21 * 4096;
           c.ring_high_water_bytes = 8192;
           c.flush_latency_sum_us = 2500;
           return std::vector{c.Group("osd")};
         }});
  r->Add({"messenger.tcp", -1, [] {
           TestMessengerCounters c;
           c.bytes_sent = 12345678901;
           c.record_bytes_received = 7;
           c.connections_open = 3;
           return std::vector{c.Group("messenger")};
         }});
}

TEST(RegistryFamiliesTest, OneFamilyPerNameWithSourceLabels) {
  CounterRegistry r;
  AddTestSources(&r);
  auto families = RegistryFamilies(r, {{"osd", "4"}});
  ASSERT_EQ(families.size(), 3u + 4u + 3u);
  EXPECT_EQ(families[0].name, "msgr_poller_records_total");
  EXPECT_EQ(families[0].type, prometheus::MetricType::Counter);
  ASSERT_EQ(families[0].metric.size(), 2u);  // both pollers in one family
  EXPECT_EQ(families[0].metric[1].counter.value, 11);
  ASSERT_EQ(families[0].metric[1].label.size(), 2u);
  EXPECT_EQ(families[0].metric[1].label[0].name, "osd");
  EXPECT_EQ(families[0].metric[1].label[0].value, "4");
  EXPECT_EQ(families[0].metric[1].label[1].name, "poller");
  EXPECT_EQ(families[0].metric[1].label[1].value, "1");
  EXPECT_EQ(families[1].metric[0].counter.value, 1.5);  // spin_ns in seconds
  EXPECT_EQ(families[2].type, prometheus::MetricType::Gauge);
  EXPECT_EQ(families[2].metric[0].gauge.value, 1);
}

TEST(RegistryFamiliesTest, TextExposition) {
  CounterRegistry r;
  AddTestSources(&r);
  const std::string text = prometheus::TextSerializer().Serialize(RegistryFamilies(r, {{"osd", "4"}}));
  EXPECT_EQ(text,
            "# HELP msgr_poller_records_total records drained\n"
            "# TYPE msgr_poller_records_total counter\n"
            "msgr_poller_records_total{osd=\"4\",poller=\"0\"} 10\n"
            "msgr_poller_records_total{osd=\"4\",poller=\"1\"} 11\n"
            "# HELP msgr_poller_spin_seconds_total time spent spinning\n"
            "# TYPE msgr_poller_spin_seconds_total counter\n"
            "msgr_poller_spin_seconds_total{osd=\"4\",poller=\"0\"} 1.5\n"
            "msgr_poller_spin_seconds_total{osd=\"4\",poller=\"1\"} 1.5\n"
            "# HELP msgr_poller_rings rings drained now\n"
            "# TYPE msgr_poller_rings gauge\n"
            "msgr_poller_rings{osd=\"4\",poller=\"0\"} 1\n"
            "msgr_poller_rings{osd=\"4\",poller=\"1\"} 1\n"
            "# HELP msgr_osd_client_writes_total client writes stored\n"
            "# TYPE msgr_osd_client_writes_total counter\n"
            "msgr_osd_client_writes_total{osd=\"4\"} 21\n"
            "# HELP msgr_osd_client_write_bytes_total payload bytes of those writes\n"
            "# TYPE msgr_osd_client_write_bytes_total counter\n"
            "msgr_osd_client_write_bytes_total{osd=\"4\"} 86016\n"
            "# HELP msgr_osd_ring_high_water_bytes most bytes \\\\ in one\\nring\n"
            "# TYPE msgr_osd_ring_high_water_bytes gauge\n"
            "msgr_osd_ring_high_water_bytes{osd=\"4\"} 8192\n"
            "# HELP msgr_osd_flush_latency_sum_seconds_total sum of flush latencies, microseconds\n"
            "# TYPE msgr_osd_flush_latency_sum_seconds_total counter\n"
            "msgr_osd_flush_latency_sum_seconds_total{osd=\"4\"} 0.0025\n"
            "# HELP msgr_messenger_sent_bytes_total bytes written\n"
            "# TYPE msgr_messenger_sent_bytes_total counter\n"
            "msgr_messenger_sent_bytes_total{osd=\"4\",backend=\"tcp\"} 12345678901\n"
            "# HELP msgr_messenger_record_received_bytes_total payload bytes received\n"
            "# TYPE msgr_messenger_record_received_bytes_total counter\n"
            "msgr_messenger_record_received_bytes_total{osd=\"4\",backend=\"tcp\"} 7\n"
            "# HELP msgr_messenger_connections_open connections open now\n"
            "# TYPE msgr_messenger_connections_open gauge\n"
            "msgr_messenger_connections_open{osd=\"4\",backend=\"tcp\"} 3\n");
}

TEST(RegistryCollectorTest, CollectsAtScrapeTime) {
  uint64_t ops = 1;
  CounterRegistry r;
  r.Add({"osd", -1, [&ops] {
           TestOsdCounters c;
           c.ops = ops;
           return std::vector{c.Group("osd")};
         }});
  RegistryCollector collector(&r, {});
  EXPECT_THAT(prometheus::TextSerializer().Serialize(collector.Collect()),
              HasSubstr("msgr_osd_client_writes_total 1\n"));
  ops = 5;
  EXPECT_THAT(prometheus::TextSerializer().Serialize(collector.Collect()),
              HasSubstr("msgr_osd_client_writes_total 5\n"));
}

constexpr HistogramDesc kTestOpLatency{"op_latency", "drained to acknowledged"};

TEST(RegistryFamiliesTest, HistogramsBecomePrometheusHistogramsInSeconds) {
  LatencyHistogram h(&kTestOpLatency);
  h.Record(3'000);       // <= 4 us
  h.Record(3'000);
  h.Record(1'000'000);   // <= 1.024 ms
  CounterRegistry r;
  r.Add({"pollers", 0, [&] {
           CounterGroup g = TestPollerCounters{}.Group("poller");
           g.histograms.push_back(h.Snapshot());
           return std::vector{g};
         }});
  auto families = RegistryFamilies(r, {{"osd", "1"}});
  ASSERT_EQ(families.size(), 4u);
  const prometheus::MetricFamily& f = families.back();
  EXPECT_EQ(f.name, "msgr_poller_op_latency_seconds");
  EXPECT_EQ(f.type, prometheus::MetricType::Histogram);
  ASSERT_EQ(f.metric.size(), 1u);
  const auto& hist = f.metric[0].histogram;
  EXPECT_EQ(hist.sample_count, 3u);
  EXPECT_DOUBLE_EQ(hist.sample_sum, 0.001006);
  ASSERT_EQ(hist.bucket.size(), static_cast<size_t>(kHistogramBuckets));
  EXPECT_DOUBLE_EQ(hist.bucket[2].upper_bound, 4e-6);
  EXPECT_EQ(hist.bucket[2].cumulative_count, 2u);
  EXPECT_EQ(hist.bucket[9].cumulative_count, 2u);   // <= 512 us
  EXPECT_EQ(hist.bucket[10].cumulative_count, 3u);  // <= 1.024 ms
  EXPECT_TRUE(std::isinf(hist.bucket.back().upper_bound));
  EXPECT_EQ(hist.bucket.back().cumulative_count, 3u);
  const std::string text = prometheus::TextSerializer().Serialize(families);
  EXPECT_NE(text.find("msgr_poller_op_latency_seconds_bucket{osd=\"1\",poller=\"0\",le=\"4e-06\"} 2"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("msgr_poller_op_latency_seconds_count{osd=\"1\",poller=\"0\"} 3"),
            std::string::npos);
}

}  // namespace
}  // namespace msgr::metrics

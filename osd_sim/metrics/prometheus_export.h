// The counter registry (msg/base/perf_counters.h) in Prometheus's terms, converted at
// scrape time: no metric is listed here, every one comes from a registered CounterDesc.
//
// Naming (https://prometheus.io/docs/practices/naming/), for counter `name` of group `g`:
//   msgr_<g>_<name>  with the unit as the base unit, last:
//     kNanoseconds:   a trailing "_ns" is dropped, "_seconds" appended, value / 1e9
//     "_us" names:    kNone counters the registry names "..._us" are microseconds:
//                     "_us" becomes "_seconds", value / 1e6
//     kBytes:         the word "bytes" moves to the end ("bytes_sent" -> "sent_bytes")
//   and kCounter appends "_total" (TYPE counter); kGauge is TYPE gauge.
//   A few OSD counters are exported under the name of what they count (kExportNames in
//   the .cc): the osd group's `ops` are msgr_osd_client_writes_total.
// Labels: the daemon's own (e.g. osd="0"), then from the source: a path
// "messenger.<backend>" gives backend="<backend>" (one group set per messenger), an
// indexed source ("pollers"[i]) gives <group>="<i>" (poller="1").
// Samples of one name from several sources (every poller) form one family, in the order
// first seen.
//
// Thread-safety: pure functions; RegistryCollector::Collect may run on any thread (the
// registry is thread-safe).
#ifndef MSGR_OSD_SIM_METRICS_PROMETHEUS_EXPORT_H_
#define MSGR_OSD_SIM_METRICS_PROMETHEUS_EXPORT_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "msg/base/perf_counters.h"
#include "prometheus/client_metric.h"
#include "prometheus/collectable.h"
#include "prometheus/metric_family.h"

namespace msgr::metrics {

inline constexpr char kMetricPrefix[] = "msgr_";

using Labels = std::vector<prometheus::ClientMetric::Label>;

// The exported name of counter `desc` of group `group` (see the header comment).
std::string MetricName(absl::string_view group, const CounterDesc& desc);

// What a registry value is multiplied by to be in the exported (base) unit.
double MetricScale(const CounterDesc& desc);

// HELP text: the description, escaped as the text format wants (\\ and \n); the
// prometheus-cpp 1.0.1 serializer writes HELP verbatim.
std::string MetricHelp(const CounterDesc& desc);

// Every counter of every source of `registry` now, as metric families, each sample
// labelled with `labels` and its source's labels.
std::vector<prometheus::MetricFamily> RegistryFamilies(const CounterRegistry& registry,
                                                       const Labels& labels);

// A registry served at scrape time. REQUIRES: `registry` outlives the collector's use
// (take it off the exposer, or destroy the exposer, before the registry goes).
class RegistryCollector : public prometheus::Collectable {
 public:
  RegistryCollector(const CounterRegistry* registry, Labels labels)
      : registry_(registry), labels_(std::move(labels)) {}
  std::vector<prometheus::MetricFamily> Collect() const override {
    return RegistryFamilies(*registry_, labels_);
  }

 private:
  const CounterRegistry* const registry_;
  const Labels labels_;
};

}  // namespace msgr::metrics

#endif  // MSGR_OSD_SIM_METRICS_PROMETHEUS_EXPORT_H_

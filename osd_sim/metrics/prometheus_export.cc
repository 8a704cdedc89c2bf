#include "osd_sim/metrics/prometheus_export.h"

#include <limits>
#include <map>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace msgr::metrics {
namespace {

// Counters exported under the name of what they count rather than their registry name
// (which perf dump readers use). The osd group's `ops` are the client writes it stored;
// replica writes, once there are any, get a counter of their own beside it.
struct ExportName {
  const char* group;
  const char* name;
  const char* exported;
};
constexpr ExportName kExportNames[] = {
    {"osd", "ops", "client_writes"},
    {"osd", "bytes", "client_write_bytes"},
    {"osd", "write_errors", "client_write_errors"},
};

absl::string_view BaseName(absl::string_view group, const CounterDesc& desc) {
  for (const ExportName& e : kExportNames) {
    if (group == e.group && absl::string_view(desc.name) == e.name) return e.exported;
  }
  return desc.name;
}

bool IsMicroseconds(const CounterDesc& desc) {
  return desc.unit == CounterUnit::kNone && absl::EndsWith(desc.name, "_us");
}

// The label an indexed source's samples carry, and a messenger's backend.
void AddSourceLabels(const CounterSource& source, const std::vector<CounterGroup>& groups,
                     Labels* labels) {
  std::vector<absl::string_view> parts = absl::StrSplit(source.path, '.');
  if (parts.size() == 2 && parts[0] == "messenger") {
    labels->push_back({"backend", std::string(parts[1])});
  }
  if (source.index >= 0 && !groups.empty()) {
    labels->push_back({groups.front().name, absl::StrCat(source.index)});
  }
}

}  // namespace

std::string MetricName(absl::string_view group, const CounterDesc& desc) {
  std::vector<std::string> words = absl::StrSplit(BaseName(group, desc), '_', absl::SkipEmpty());
  if (desc.unit == CounterUnit::kNanoseconds || IsMicroseconds(desc)) {
    if (!words.empty() && (words.back() == "ns" || words.back() == "us")) words.pop_back();
    words.push_back("seconds");
  } else if (desc.unit == CounterUnit::kBytes) {
    std::vector<std::string> rest;
    for (std::string& w : words) {
      if (w != "bytes") rest.push_back(std::move(w));
    }
    words = std::move(rest);
    words.push_back("bytes");
  }
  if (desc.kind == CounterKind::kCounter) words.push_back("total");
  return absl::StrCat(kMetricPrefix, group, "_", absl::StrJoin(words, "_"));
}

double MetricScale(const CounterDesc& desc) {
  if (desc.unit == CounterUnit::kNanoseconds) return 1e-9;
  if (IsMicroseconds(desc)) return 1e-6;
  return 1.0;
}

std::string MetricHelp(const CounterDesc& desc) {
  std::string out;
  for (const char* c = desc.description; *c != '\0'; ++c) {
    if (*c == '\\') {
      out += "\\\\";
    } else if (*c == '\n') {
      out += "\\n";
    } else {
      out += *c;
    }
  }
  return out;
}

std::vector<prometheus::MetricFamily> RegistryFamilies(const CounterRegistry& registry,
                                                       const Labels& labels) {
  std::vector<prometheus::MetricFamily> families;
  std::map<std::string, size_t> by_name;  // name -> index in families
  registry.ForEach([&](const CounterSource& source, const std::vector<CounterGroup>& groups) {
    Labels source_labels = labels;
    AddSourceLabels(source, groups, &source_labels);
    for (const CounterGroup& group : groups) {
      for (const CounterValue& v : group.values) {
        std::string name = MetricName(group.name, *v.desc);
        auto [it, added] = by_name.emplace(name, families.size());
        if (added) {
          prometheus::MetricFamily f;
          f.name = std::move(name);
          f.help = MetricHelp(*v.desc);
          f.type = v.desc->kind == CounterKind::kCounter ? prometheus::MetricType::Counter
                                                         : prometheus::MetricType::Gauge;
          families.push_back(std::move(f));
        }
        prometheus::MetricFamily& f = families[it->second];
        prometheus::ClientMetric m;
        m.label = source_labels;
        const double value = static_cast<double>(v.value) * MetricScale(*v.desc);
        if (f.type == prometheus::MetricType::Counter) {
          m.counter.value = value;
        } else {
          m.gauge.value = value;
        }
        f.metric.push_back(std::move(m));
      }
      for (const HistogramValue& h : group.histograms) {
        std::string name = absl::StrCat(kMetricPrefix, group.name, "_", h.desc->name, "_seconds");
        auto [it, added] = by_name.emplace(name, families.size());
        if (added) {
          prometheus::MetricFamily f;
          f.name = std::move(name);
          CounterDesc as_counter{h.desc->name, CounterKind::kCounter, CounterUnit::kNanoseconds,
                                 h.desc->description};
          f.help = MetricHelp(as_counter);
          f.type = prometheus::MetricType::Histogram;
          families.push_back(std::move(f));
        }
        prometheus::ClientMetric m;
        m.label = source_labels;
        m.histogram.sample_count = h.count;
        m.histogram.sample_sum = static_cast<double>(h.sum_ns) / 1e9;
        uint64_t cumulative = 0;
        for (int i = 0; i < kHistogramBuckets; ++i) {
          cumulative += h.buckets[i];
          const double bound = i < kHistogramBuckets - 1
                                   ? static_cast<double>(HistogramBucketBoundNs(i)) / 1e9
                                   : std::numeric_limits<double>::infinity();
          m.histogram.bucket.push_back({cumulative, bound});
        }
        families[it->second].metric.push_back(std::move(m));
      }
    }
  });
  return families;
}

}  // namespace msgr::metrics

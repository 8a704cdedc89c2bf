#include "osd_sim/metrics/daemon_metrics.h"

#include <string_view>

#include "absl/strings/str_cat.h"
#include "osd_sim/metrics/thread_cpu_collector.h"
#include "msg/base/file_util.h"

namespace msgr::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetrics(
    const std::string& addr, const std::string& addr_file, const CounterRegistry* registry,
    const Labels& labels) {
  // Pollers that drive a tcp messenger did its transport work (perf dump pollers[].
  // messenger_ns): the thread CPU by role counts it as transport.
  auto transport_in_pollers_s = [registry] {
    uint64_t ns = 0;
    registry->ForEach([&ns](const CounterSource& source, const std::vector<CounterGroup>& groups) {
      if (source.path != "pollers") return;
      for (const CounterGroup& g : groups) {
        for (const CounterValue& v : g.values) {
          if (std::string_view(v.desc->name) == "messenger_ns") ns += v.value;
        }
      }
    });
    return static_cast<double>(ns) / 1e9;
  };
  auto server = MetricsServer::Start(
      addr, {std::make_shared<RegistryCollector>(registry, labels),
             std::make_shared<ThreadCpuCollector>(labels, transport_in_pollers_s)});
  if (!server.ok()) return server.status();
  if (!addr_file.empty()) {
    absl::Status s = WriteFileAtomic(addr_file, absl::StrCat((*server)->addr(), "\n"));
    if (!s.ok()) {
      return absl::Status(s.code(), absl::StrCat("cannot write the metrics address to ",
                                                 addr_file, ": ", s.message()));
    }
  }
  return server;
}

}  // namespace msgr::metrics

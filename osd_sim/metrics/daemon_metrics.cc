#include "osd_sim/metrics/daemon_metrics.h"

#include "absl/strings/str_cat.h"
#include "osd_sim/metrics/thread_cpu_collector.h"
#include "msg/base/file_util.h"

namespace msgr::metrics {

absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetrics(
    const std::string& addr, const std::string& addr_file, const CounterRegistry* registry,
    const Labels& labels) {
  auto server = MetricsServer::Start(addr, {std::make_shared<RegistryCollector>(registry, labels),
                                            std::make_shared<ThreadCpuCollector>(labels)});
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

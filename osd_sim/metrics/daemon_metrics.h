// What the osd and mon daemons do with --metrics-addr / --metrics-addr-file: serve their
// counter registry and their threads' CPU by role at /metrics, and write the bound
// host:port to a file once serving (as the monitor's --addr-file).
//
// Thread-safety: call from the daemon's main thread.
#ifndef MSGR_OSD_SIM_METRICS_DAEMON_METRICS_H_
#define MSGR_OSD_SIM_METRICS_DAEMON_METRICS_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "msg/base/perf_counters.h"
#include "osd_sim/metrics/metrics_server.h"
#include "osd_sim/metrics/prometheus_export.h"

namespace msgr::metrics {

// Starts serving `registry` (every sample labelled with `labels`) on `addr`; writes
// "host:port\n" to `addr_file` atomically unless it is empty. REQUIRES: `registry`
// outlives the returned server (destroy the server before stopping the daemon).
absl::StatusOr<std::unique_ptr<MetricsServer>> StartDaemonMetrics(
    const std::string& addr, const std::string& addr_file, const CounterRegistry* registry,
    const Labels& labels);

}  // namespace msgr::metrics

#endif  // MSGR_OSD_SIM_METRICS_DAEMON_METRICS_H_

// MetricsServer: an HTTP endpoint serving /metrics in the Prometheus text format, through
// prometheus-cpp's Exposer (civetweb). What it serves is converted at scrape time by the
// collectables it is given (RegistryCollector, ThreadCpuCollector).
//
// Thread-safety: Start and the destructor from the owning thread; scrapes run on the
// exposer's threads and call the collectables there.
#ifndef MSGR_OSD_SIM_METRICS_METRICS_SERVER_H_
#define MSGR_OSD_SIM_METRICS_METRICS_SERVER_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "prometheus/collectable.h"

namespace prometheus {
class Exposer;
}

namespace msgr::metrics {

inline constexpr char kDefaultMetricsHost[] = "127.0.0.1";

// "HOST:PORT" as given; ":PORT" or "PORT" on the loopback (127.0.0.1). Port 0 = a free
// port. INVALID_ARGUMENT naming the value if it is none of these.
absl::StatusOr<std::string> NormalizeMetricsAddr(absl::string_view addr);

class MetricsServer {
 public:
  // Binds `addr` (NormalizeMetricsAddr's forms) and serves the collectables at /metrics,
  // which the server keeps alive. UNAVAILABLE if the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<MetricsServer>> Start(
      absl::string_view addr, std::vector<std::shared_ptr<prometheus::Collectable>> collectables);
  // Stops serving; a scrape under way finishes first.
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // The address bound, "host:port" with the real port.
  const std::string& addr() const { return addr_; }

 private:
  MetricsServer() = default;

  std::vector<std::shared_ptr<prometheus::Collectable>> collectables_;
  std::unique_ptr<prometheus::Exposer> exposer_;  // declared last: stops first
  std::string addr_;
};

}  // namespace msgr::metrics

#endif  // MSGR_OSD_SIM_METRICS_METRICS_SERVER_H_

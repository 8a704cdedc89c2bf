#include "osd_sim/metrics/metrics_server.h"

#include <exception>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "prometheus/exposer.h"
#include "prometheus/metric_family.h"

namespace msgr::metrics {
namespace {

// Scrapes are rare (seconds apart) and cheap: one thread serves them, one spare.
constexpr size_t kExposerThreads = 2;
constexpr uint32_t kMaxPort = 65535;

}  // namespace

absl::StatusOr<std::string> NormalizeMetricsAddr(absl::string_view addr) {
  const size_t colon = addr.rfind(':');
  absl::string_view host =
      colon == absl::string_view::npos ? absl::string_view() : addr.substr(0, colon);
  absl::string_view port = colon == absl::string_view::npos ? addr : addr.substr(colon + 1);
  uint32_t p;
  if (!absl::SimpleAtoi(port, &p) || p > kMaxPort) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", addr, "' is not HOST:PORT, :PORT or PORT"));
  }
  if (host.empty()) host = kDefaultMetricsHost;
  return absl::StrCat(host, ":", p);
}

absl::StatusOr<std::unique_ptr<MetricsServer>> MetricsServer::Start(
    absl::string_view addr, std::vector<std::shared_ptr<prometheus::Collectable>> collectables) {
  absl::StatusOr<std::string> bind = NormalizeMetricsAddr(addr);
  if (!bind.ok()) return bind.status();
  std::unique_ptr<MetricsServer> s(new MetricsServer());
  s->collectables_ = std::move(collectables);
  try {
    // civetweb reports a failed bind as an exception from the constructor.
    s->exposer_ = std::make_unique<prometheus::Exposer>(*bind, kExposerThreads);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", *bind, " (in use? bad host?): ", e.what()));
  }
  for (const auto& c : s->collectables_) s->exposer_->RegisterCollectable(c);
  const std::vector<int> ports = s->exposer_->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError(absl::StrCat("metrics: no port bound for ", *bind));
  s->addr_ = absl::StrCat(bind->substr(0, bind->rfind(':')), ":", ports.front());
  return s;
}

MetricsServer::~MetricsServer() = default;

}  // namespace msgr::metrics

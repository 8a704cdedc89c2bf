// msgr_thread_cpu_seconds_total{role=...}: this process's CPU time by thread role, read
// from /proc/self/task/*/stat at scrape time. The role comes from the name each thread
// gives itself (pthread_setname_np), as the bench splits OSD CPU:
//   transport  ms-* (ms-tcp-io, ms-rdma-cq, ms-rdma-disp), soft-hca
//   poller     osd-poller-N, less what the pollers spent running a tcp messenger they
//              drive (perf dump pollers[].messenger_ns: run to completion), which is
//              transport's
//   store      store-* (store-io, store-flush)
//   other      everything else (main, gRPC's threads, osd-read, the metrics server)
// The totals never go down: each thread's time is added as it grows, and a thread that
// exits keeps what it was last seen with (the time it used since that scrape is lost).
//
// Thread-safety: Collect may run on any thread (it takes the collector's mutex).
#ifndef MSGR_OSD_SIM_METRICS_THREAD_CPU_COLLECTOR_H_
#define MSGR_OSD_SIM_METRICS_THREAD_CPU_COLLECTOR_H_

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "osd_sim/metrics/prometheus_export.h"

namespace msgr::metrics {

inline constexpr int kThreadRoles = 4;
// Indexed by ThreadRoleOf's result.
inline constexpr const char* kThreadRoleNames[kThreadRoles] = {"transport", "poller", "store",
                                                               "other"};

// The role index (into kThreadRoleNames) of a thread named `comm`.
int ThreadRoleOf(absl::string_view comm);

struct TaskCpu {
  int tid = 0;
  std::string comm;
  uint64_t ticks = 0;  // utime + stime, in clock ticks
};

// Parses one /proc/<pid>/task/<tid>/stat: "tid (comm) state ..." where comm may hold
// spaces and parentheses (it ends at the last ')'), utime and stime are fields 14 and 15.
absl::StatusOr<TaskCpu> ParseTaskStatLine(absl::string_view stat);

class ThreadCpuCollector : public prometheus::Collectable {
 public:
  // `transport_in_pollers_s`: the seconds poller threads spent on transport work so far
  // (it only grows), moved from the poller role to transport; null: none.
  explicit ThreadCpuCollector(Labels labels,
                              std::function<double()> transport_in_pollers_s = nullptr)
      : labels_(std::move(labels)), transport_in_pollers_s_(std::move(transport_in_pollers_s)) {}
  std::vector<prometheus::MetricFamily> Collect() const override ABSL_LOCKS_EXCLUDED(mu_);

  // Adds the readings of one scrape (every live thread) to the role totals; returns the
  // totals in seconds. Collect() calls it with /proc/self/task; tests call it directly.
  std::array<double, kThreadRoles> Update(const std::vector<TaskCpu>& tasks,
                                          long ticks_per_second) const ABSL_LOCKS_EXCLUDED(mu_);
  // Update's totals with `transport_in_pollers_s` of the poller role moved to transport
  // (at most all of it), the poller's share never below what it last returned.
  std::array<double, kThreadRoles> Split(std::array<double, kThreadRoles> seconds,
                                         double transport_in_pollers_s) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const Labels labels_;
  const std::function<double()> transport_in_pollers_s_;
  mutable absl::Mutex scrape_mu_ ABSL_ACQUIRED_BEFORE(mu_);  // Collect: one at a time
  mutable absl::Mutex mu_;
  mutable double last_poller_s_ ABSL_GUARDED_BY(mu_) = 0;  // Split's last poller share
  mutable std::map<int, uint64_t> last_ticks_ ABSL_GUARDED_BY(mu_);  // tid -> ticks seen
  mutable std::array<uint64_t, kThreadRoles> role_ticks_ ABSL_GUARDED_BY(mu_){};
};

}  // namespace msgr::metrics

#endif  // MSGR_OSD_SIM_METRICS_THREAD_CPU_COLLECTOR_H_

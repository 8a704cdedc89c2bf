// The monitor's counters, listed once (msg/base/perf_counters.h): the map it keeps
// (gauges read from the map when a snapshot is taken) and the RPCs it served. They reach
// /metrics as msgr_mon_* (osd_sim/metrics/prometheus_export.h).
//
// Thread-safety: LiveMonCounters is bumped from gRPC's threads (relaxed atomics).
#ifndef MSGR_OSD_SIM_MON_MON_COUNTERS_H_
#define MSGR_OSD_SIM_MON_MON_COUNTERS_H_

#include "msg/base/perf_counters.h"

namespace msgr::mon {

#define MSGR_MON_COUNTERS(X)                                                             \
  X(map_epoch, kGauge, kNone, "epoch of the current cluster map")                        \
  X(osds, kGauge, kNone, "OSDs in the cluster map")                                      \
  X(osds_up, kGauge, kNone, "OSDs up (heartbeating within the grace period)")            \
  X(osds_in, kGauge, kNone, "OSDs in (holding placement groups)")                        \
  X(boot_rpcs, kCounter, kNone, "BootOsd calls served")                                  \
  X(heartbeat_rpcs, kCounter, kNone, "Heartbeat calls served")                           \
  X(get_map_rpcs, kCounter, kNone, "GetMap calls served")                                \
  X(watch_map_rpcs, kCounter, kNone, "WatchMap streams opened")                          \
  X(mark_rpcs, kCounter, kNone, "MarkOut and MarkIn calls served")                       \
  X(rpc_errors, kCounter, kNone, "calls answered with an error status")                  \
  X(auth_refused, kCounter, kNone, "calls refused by the roles (entity not allowed)")    \
  X(stale_instances_refused, kCounter, kNone, "boots and heartbeats refused from an OSD "  \
    "process that another instance of its id replaced, or that is blocklisted")           \
  X(watch_streams, kGauge, kNone, "WatchMap streams open now")                           \
  X(osds_marked_down, kCounter, kNone, "times an OSD was marked down for missed heartbeats") \
  X(osds_marked_out, kCounter, kNone, "times an OSD was marked out after being down too long")

MSGR_COUNTER_SNAPSHOT(MonCounters, MSGR_MON_COUNTERS);
MSGR_COUNTER_LIVE(LiveMonCounters, MonCounters, MSGR_MON_COUNTERS);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MON_COUNTERS_H_

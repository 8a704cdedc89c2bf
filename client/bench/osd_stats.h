// The OSD counters the bench reads from each OSD's perf dump (the admin socket
// DIR/run/osd.<id>.asok, osd_sim/admin_socket.h) before and after a run, for the figures
// /proc cannot give: the pollers' empty spinning and crc time, and payload copies.
//
// Thread-safety: pure functions, except SamplePerf (it talks to the sockets).
#ifndef MSGR_CLIENT_BENCH_OSD_STATS_H_
#define MSGR_CLIENT_BENCH_OSD_STATS_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace msgr::bench {

// One OSD's reading. Counters only grow while the OSD runs.
struct OsdPerfSample {
  int id = -1;                  // osd.id
  double uptime_s = 0;          // osd.uptime_s
  // When the OSD started, in Unix seconds: the time it was read less its uptime (SamplePerf
  // sets it; 0 = unknown). It moves when the OSD restarted between two readings.
  double started_at_s = 0;
  uint64_t spin_ns = 0;         // sum of pollers[].spin_ns
  uint64_t busy_ns = 0;         // sum of pollers[].busy_ns
  uint64_t crc_ns = 0;          // sum of pollers[].crc_ns
  // sum of pollers[].messenger_ns: pollers running a tcp messenger (run to completion); 0
  // when the dump has none (an OSD with socket threads, or from before the counter)
  uint64_t messenger_ns = 0;
  uint64_t wire_copied_rx = 0;  // sum of messenger.<type>.payload_bytes_copied_rx
  uint64_t send_copied_tx = 0;  // sum of messenger.<type>.payload_bytes_copied_tx
  uint64_t store_copied = 0;    // store.payload_bytes_copied
  // Gauges of the rdma messenger, if the OSD runs one (0 otherwise): registered memory
  // now (messenger.rdma.rdma.registered_bytes) and its sessions (connections_open).
  uint64_t rdma_registered_bytes = 0;
  uint64_t rdma_sessions = 0;
};

// The counters over a run, summed over OSDs.
struct OsdPerfDelta {
  int osds = 0;
  uint64_t spin_ns = 0;
  uint64_t busy_ns = 0;
  uint64_t crc_ns = 0;
  uint64_t messenger_ns = 0;
  uint64_t wire_copied_rx = 0;
  uint64_t send_copied_tx = 0;  // what the OSDs copied sending: replication forwards
  uint64_t store_copied = 0;
};

// INVALID_ARGUMENT naming the missing field if `json` is not a perf dump with them all.
absl::StatusOr<OsdPerfSample> ParsePerfDump(std::string_view json);

// DIR/run/osd.*.asok, sorted; empty if there are none.
std::vector<std::string> OsdAdminSockets(const std::string& cluster_dir);

// Readings by socket path; one that cannot be read or parsed keeps its error.
using PerfSamples = std::map<std::string, absl::StatusOr<OsdPerfSample>>;
PerfSamples SamplePerf(const std::vector<std::string>& sockets);

// How far two readings' started_at_s may differ for one OSD process: the time a perf dump
// takes to answer (an OSD restarted by hand or by a supervisor takes longer).
inline constexpr double kRestartSlackSeconds = 0.5;

// Sum over the sockets of `before` of after - before. All or nothing (a partial sum would
// not match the CPU of every OSD): an error naming the first OSD that was not read at
// both ends, or that restarted in between (started_at_s moved by more than
// kRestartSlackSeconds, or its uptime or a counter went back).
absl::StatusOr<OsdPerfDelta> SumPerfDeltas(const PerfSamples& before, const PerfSamples& after);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_OSD_STATS_H_

// The benchmark's results as a human summary and as JSON with stable field names:
//   mode, ms_type, object_size, concurrency, seconds, ops, bytes, mb_per_s, iops,
//   lat_us {p50, p99, p999, max, avg}, cpu_s_per_gb {client, osds} (null if unmeasured),
//   verify {enabled, checked, mismatches}, auth, errors, osd_processes,
//   lat_cdf [[lat_us, fraction], ...],
//   cpu_us_per_op {client, osds, osds_busy}: CPU microseconds per acknowledged write; busy
//     is the OSDs' CPU less their pollers' empty spinning (perf dump pollers[].spin_ns),
//   osd_cpu_s_per_gb_by_role {transport, crc, poller, store, other}: the OSDs' CPU-s per
//     GiB by thread role (thread_role.h), crc being the pollers' time in the record crc32c
//     check (pollers[].crc_ns), transport including the pollers' time running the tcp
//     messenger they drive (pollers[].messenger_ns), poller the rest of their CPU,
//   poller_spin_s_per_gb: the part of that poller figure that was empty spinning,
//   copies_per_byte {client, osd_wire, osd_store}: payload bytes a CPU copied per byte
//     written (client messenger payload_bytes_copied_tx; the OSDs' messenger
//     payload_bytes_copied_rx and store payload_bytes_copied),
//   clients: client instances in the process (--clients), connect_s: the time they took
//     to open their sessions to every OSD before the run (null when they did not),
//   host_cpu {busy_pct, steal_pct}: this machine's CPUs during the run (/proc/stat), busy
//     and stolen by the hypervisor, in percent of their time (cpu_usage.h HostCpu).
// spin_ns and crc_ns are wall-clock time: each is capped at the poller threads' CPU (see
// PollerCpuTimes), so crc + poller is the poller threads' CPU and spin a part of poller.
// Every figure is null when it could not be measured: nothing written, no OSD processes,
// or (for those from perf dumps: osds_busy, transport, crc, poller, poller_spin_s_per_gb,
// osd_wire, osd_store) no readable admin socket of every OSD at both ends of the run.
// MB/s is MiB/s (2^20 bytes, as `rados bench`), GB for CPU is GiB.
//
// Thread-safety: pure functions.
#ifndef MSGR_CLIENT_BENCH_BENCH_REPORT_H_
#define MSGR_CLIENT_BENCH_BENCH_REPORT_H_

#include <optional>
#include <string>

#include "client/bench/bench_runner.h"
#include "client/bench/cpu_usage.h"
#include "client/bench/osd_stats.h"
#include "client/bench/thread_role.h"
#include "nlohmann/json.hpp"

namespace msgr::bench {

struct BenchReport {
  std::string mode = "write";       // "write" | "verify"
  std::string ms_type;
  std::string pool = "default";     // the pool the run wrote or read
  uint64_t object_size = 0;
  int concurrency = 0;
  std::string auth;                 // "none" | "secret"
  std::string ms_mode = "crc";      // "crc" | "secure"
  WriteRunResult run;               // empty in verify mode
  std::optional<double> osd_cpu_s;  // summed over OSD processes, during the run
  int osd_processes = 0;
  std::optional<RoleCpu> osd_role_cpu_s;   // per-thread, summed over the same processes
  std::optional<OsdPerfDelta> osd_perf;    // perf dumps of every OSD, over the run
  uint64_t client_copied_tx = 0;           // client messenger payload_bytes_copied_tx, run
  int clients = 1;
  std::optional<double> connect_s;         // every client connected to every OSD
  std::optional<HostCpuShare> host_cpu;    // this machine's CPUs during the run
  // Registered memory per rdma session at the end of the run, in KiB: the OSDs' (their
  // registered_bytes over their sessions) and the clients' (every client's messenger,
  // its record buffers included, over its sessions). Unset over tcp or unmeasured.
  std::optional<double> osd_registered_kib_per_session;
  std::optional<double> client_registered_kib_per_session;
  bool verify_enabled = false;
  VerifyResult verify;
};

double MiBPerSecond(const BenchReport& r);
double Iops(const BenchReport& r);
// CPU seconds per GiB written, or nullopt when nothing was written / not measured.
std::optional<double> CpuSecondsPerGiB(std::optional<double> cpu_s, uint64_t bytes);

// The pollers' crc and empty-spin time over the run, in seconds, summed over OSDs. The perf
// counters are wall-clock time, which a preempted or yielding poller keeps counting, so
// when the poller threads' CPU was measured: crc is capped at it, and spin is that CPU
// less crc less the passes that found work (busy_ns; `capped` says crc or busy exceeded
// the CPU). Without it, spin is spin_ns. nullopt without perf dumps.
// transport_s: the pollers' time running the tcp messenger they drive (run to
// completion: pollers[].messenger_ns), capped the same way; it is the transport role's,
// not the poller's.
struct PollerTimes {
  double crc_s = 0;
  double transport_s = 0;
  double spin_s = 0;
  bool capped = false;
};
std::optional<PollerTimes> PollerCpuTimes(const BenchReport& r);

// The figures derived from the readings above (null members: not measured).
struct CpuPerOp {
  std::optional<double> client, osds, osds_busy;  // microseconds per op
};
struct OsdCpuByRole {
  std::optional<double> transport, crc, poller, store, other;  // CPU-s per GiB
  std::optional<double> poller_spin;                           // part of `poller`
};
struct CopiesPerByte {
  // osd_send: what the OSDs' CPUs copied sending payloads (a primary forwarding a write to
  // its replicas: the staging copy and, on the soft device, its HCA's memcpy; over tcp the
  // frame and the socket copies). 0 at pool size 1.
  std::optional<double> client, osd_wire, osd_store, osd_send;
};
CpuPerOp CpuMicrosPerOp(const BenchReport& r);
OsdCpuByRole OsdCpuPerGiBByRole(const BenchReport& r);
CopiesPerByte PayloadCopiesPerByte(const BenchReport& r);

nlohmann::json ToJson(const BenchReport& r);
std::string SummaryText(const BenchReport& r);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_REPORT_H_

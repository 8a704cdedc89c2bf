// The benchmark's results as a human summary and as JSON with stable field names:
//   mode, ms_type, object_size, concurrency, seconds, ops, bytes, mb_per_s, iops,
//   lat_us {p50, p99, p999, max, avg}, cpu_s_per_gb {client, osds} (null if unmeasured),
//   verify {enabled, checked, mismatches}, auth, errors, osd_processes,
//   lat_cdf [[lat_us, fraction], ...].
// MB/s is MiB/s (2^20 bytes, as `rados bench`), GB for CPU is GiB.
//
// Thread-safety: pure functions.
#ifndef MSGR_CLIENT_BENCH_BENCH_REPORT_H_
#define MSGR_CLIENT_BENCH_BENCH_REPORT_H_

#include <optional>
#include <string>

#include "client/bench/bench_runner.h"
#include "nlohmann/json.hpp"

namespace msgr::bench {

struct BenchReport {
  std::string mode = "write";       // "write" | "verify"
  std::string ms_type;
  uint64_t object_size = 0;
  int concurrency = 0;
  std::string auth;                 // "none" | "secret"
  WriteRunResult run;               // empty in verify mode
  std::optional<double> osd_cpu_s;  // summed over OSD processes, during the run
  int osd_processes = 0;
  bool verify_enabled = false;
  VerifyResult verify;
};

double MiBPerSecond(const BenchReport& r);
double Iops(const BenchReport& r);
// CPU seconds per GiB written, or nullopt when nothing was written / not measured.
std::optional<double> CpuSecondsPerGiB(std::optional<double> cpu_s, uint64_t bytes);

nlohmann::json ToJson(const BenchReport& r);
std::string SummaryText(const BenchReport& r);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_REPORT_H_

// CPU time of this process (getrusage) and of other processes (/proc/<pid>/stat), for
// the bench's CPU-seconds-per-GB figures.
//
// Thread-safety: pure functions (they read the kernel's counters).
#ifndef MSGR_CLIENT_BENCH_CPU_USAGE_H_
#define MSGR_CLIENT_BENCH_CPU_USAGE_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace msgr::bench {

// User + system CPU seconds of this process, all threads.
double SelfCpuSeconds();

// utime + stime of process `pid` in seconds. NOT_FOUND if it does not exist.
absl::StatusOr<double> ProcessCpuSeconds(int pid);

// Parses the contents of /proc/<pid>/stat (fields 14 and 15, after the "(comm)" which may
// hold spaces and parentheses) into seconds at `ticks_per_second`.
absl::StatusOr<double> ParseProcStatCpu(const std::string& stat, long ticks_per_second);

// The pids in DIR/osd.*.pid (one number per file); unreadable files are skipped.
std::vector<int> ReadOsdPids(const std::string& cluster_dir);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_CPU_USAGE_H_

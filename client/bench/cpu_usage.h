// CPU time of this process (getrusage), of other processes (/proc/<pid>/stat) and of each
// of their threads (/proc/<pid>/task/<tid>/stat), for the bench's CPU-per-GB figures.
//
// Thread-safety: pure functions (they read the kernel's counters).
#ifndef MSGR_CLIENT_BENCH_CPU_USAGE_H_
#define MSGR_CLIENT_BENCH_CPU_USAGE_H_

#include <optional>
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

// One thread's reading: its id, name (the comm field, as pthread_setname_np set it, at
// most 15 characters) and utime + stime in seconds.
struct ThreadCpu {
  int tid = 0;
  std::string comm;
  double cpu_s = 0;
};

// Parses /proc/<pid>/task/<tid>/stat (same layout as ParseProcStatCpu's): the tid before
// " (", the comm up to the last ')' (it may hold spaces and parentheses), then the times.
absl::StatusOr<ThreadCpu> ParseTaskStat(const std::string& stat, long ticks_per_second);

// Every thread of process `pid` now. Threads that exit while they are being listed are
// left out. NOT_FOUND if the process does not exist.
absl::StatusOr<std::vector<ThreadCpu>> ProcessThreadCpu(int pid);

// The CPU each thread of one process used between two readings of it, in `after`'s order:
// a thread in both (same tid, not gone backwards) gets after - before, under its name in
// `after` (a thread may name itself after it starts); one only in `after` (started
// between them), or gone backwards (a reused tid), all of its reading. Threads
// that exited between the readings are not in `after`, and their time is missing here
// (it is in the process's own total).
std::vector<ThreadCpu> ThreadCpuDelta(const std::vector<ThreadCpu>& before,
                                      const std::vector<ThreadCpu>& after);

// This machine's CPU time over all its CPUs, from /proc/stat's "cpu" line, in seconds:
// busy (user, nice, system, irq, softirq), idle (idle, iowait) and stolen (steal: time this
// VM wanted a CPU while its hypervisor ran something else). On a VM whose host is
// oversubscribed the steal moves every figure of a run: the bench reports it.
struct HostCpu {
  double busy_s = 0;
  double idle_s = 0;
  double steal_s = 0;
};
absl::StatusOr<HostCpu> ParseHostCpu(const std::string& proc_stat, long ticks_per_second);
absl::StatusOr<HostCpu> ReadHostCpu();

// Between two readings: busy and stolen time in percent of all of it (busy + idle +
// steal). nullopt when no time passed or a counter went backwards.
struct HostCpuShare {
  double busy_pct = 0;
  double steal_pct = 0;
};
std::optional<HostCpuShare> HostCpuBetween(const HostCpu& before, const HostCpu& after);

// The pids in DIR/osd.*.pid (one number per file); unreadable files are skipped.
std::vector<int> ReadOsdPids(const std::string& cluster_dir);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_CPU_USAGE_H_

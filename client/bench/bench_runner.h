// The benchmark's phases over a connected Client: a timed (or counted) write run with
// `concurrency` ops in flight, and a read-back verification of objects by id.
//
// The write run uses `concurrency` threads, each with one synchronous write in flight
// (as `rados bench -t`). Contents are MakePattern(oid, size) (pattern.h), generated
// outside the timed section. Latency is per op, submission to acknowledgement.
//
// Thread-safety: each call runs on the caller's thread and joins its own workers.
#ifndef MSGR_CLIENT_BENCH_BENCH_RUNNER_H_
#define MSGR_CLIENT_BENCH_BENCH_RUNNER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/latency_histogram.h"
#include "client/client.h"

namespace msgr::bench {

struct WriteRunOptions {
  std::string prefix;            // object ids are prefix + "_" + n
  uint64_t object_size = 0;
  int concurrency = 1;
  double seconds = 0;            // 0: no time limit (then count > 0)
  uint64_t count = 0;            // 0: no count limit
  std::string acked_log;         // "" = none; else appended, flushed per line
  bool progress = true;          // one line per second on `progress_out`
};

struct WriteRunResult {
  double seconds = 0;            // first submission to last completion
  uint64_t ops = 0;              // acknowledged writes
  uint64_t bytes = 0;
  uint64_t errors = 0;
  std::vector<std::string> error_samples;  // the first few failures
  LatencyHistogram latency;      // nanoseconds
  std::vector<uint64_t> acked;   // indices of acknowledged objects
  double client_cpu_s = 0;       // this process, during the run
};

std::string ObjectId(const std::string& prefix, uint64_t n);

absl::StatusOr<WriteRunResult> RunWrites(client::Client& c, const WriteRunOptions& o,
                                         std::ostream& progress_out);

struct VerifyResult {
  uint64_t checked = 0;
  uint64_t mismatches = 0;       // read errors included
  std::vector<std::string> samples;  // the first few problems
};

// Bytes of read replies the verifier keeps in flight at most (whatever the concurrency):
// replies are whole objects, and an OSD may stall a connection whose peer has too many
// bytes unacknowledged (the messenger's conn_max_bytes_in_flight is 64 MiB by default).
inline constexpr uint64_t kVerifyBytesInFlight = 32ull << 20;

// Reads back objects oid_of(0 .. n-1) with up to `concurrency` reads in flight (fewer for
// large objects: at most kVerifyBytesInFlight / object_size, at least 1) and checks them
// against their pattern. `object_size` 0 means unknown (no cap).
VerifyResult VerifyObjects(client::Client& c, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size = 0);

// Object ids from a file, one per line (blank lines skipped).
absl::StatusOr<std::vector<std::string>> ReadOidFile(const std::string& path);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_RUNNER_H_

// The benchmark's phases over a connected Client: a timed (or counted) write run with
// `concurrency` ops in flight, and a read-back verification of objects by id.
//
// Both run on the caller's thread with the asynchronous driver (async_driver.h): it keeps
// `concurrency` ops in flight through AsyncWrite / AsyncRead (as `rados bench -t` with
// aio), with no thread per op. Contents are MakePattern(oid, size) (pattern.h), generated
// outside the timed section. Latency is per op, on the monotonic clock, from just before
// the async call to the start of its completion callback (so it does not include waking
// the driver thread). Progress lines, the acked log and read-back checks are done by the
// driver thread, never inside a callback.
//
// Thread-safety: each call runs on the caller's thread; it returns after every op it
// started has completed.
#ifndef MSGR_CLIENT_BENCH_BENCH_RUNNER_H_
#define MSGR_CLIENT_BENCH_BENCH_RUNNER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/bench/async_driver.h"
#include "client/bench/latency_histogram.h"
#include "client/client.h"

namespace msgr::bench {

// The asynchronous operations the runner uses: a Client's (OpsOf), or a fake in tests.
// Same contract as Client::AsyncWrite / AsyncRead: the callback runs exactly once, on any
// thread or inline, and the call itself may block for back-pressure.
struct ObjectOps {
  // Writes the buffer's size() bytes (from a buffer of `alloc`: Client::AsyncWrite's
  // zero-copy form).
  std::function<void(std::string oid, RecordBufferRef data, client::WriteCallback cb)> write;
  // Memory for a write's payload (Client::AllocBuffer). Default: plain heap memory.
  std::function<RecordBufferRef(size_t size)> alloc = MakeHeapRecordBuffer;
  std::function<void(std::string oid, client::ReadCallback cb)> read;
  // Optional: reaps completions on the calling thread (Client::Poll); the driver calls it
  // while it spins (--spin-us) instead of only watching its queue.
  std::function<bool()> poll;
};

ObjectOps OpsOf(client::Client& c);

// One object a read run may read (a listing entry).
struct ReadTarget {
  std::string oid;
  uint64_t size = 0;
};

enum class RunMode { kWrite, kSeq, kRand };

struct WriteRunOptions {
  RunMode mode = RunMode::kWrite;
  // kSeq / kRand: what to read (each reply must have the listed size, else it is an error);
  // kSeq reads each once, in order, so the run ends after objects.size() ops at most.
  std::vector<ReadTarget> objects;
  uint64_t seed = 1;             // kRand: which objects, reproducibly
  std::string prefix;            // object ids are prefix + "_" + n
  uint64_t object_size = 0;
  int concurrency = 1;
  double seconds = 0;            // 0: no time limit (then count > 0)
  uint64_t count = 0;            // 0: no count limit
  std::string acked_log;         // "" = none; else appended, flushed per line
  bool progress = true;          // one line per second on `progress_out`
  std::chrono::nanoseconds spin = kDefaultSpin;  // --spin-us: poll for completions first
  int submit_threads = 0;        // --submit-threads: 0 = AsyncWrite on the driver thread
  uint64_t max_objects = 0;      // --max-objects: op n writes object n % max_objects (0: n)
};

struct WriteRunResult {
  double seconds = 0;            // first submission to last completion
  uint64_t ops = 0;              // acknowledged writes (reads: replies of the right size)
  uint64_t bytes = 0;
  uint64_t errors = 0;
  std::vector<std::string> error_samples;  // the first few failures
  LatencyHistogram latency;      // nanoseconds
  std::vector<uint64_t> acked;   // indices of acknowledged objects
  double client_cpu_s = 0;       // this process, during the run
  DriverStats driver;            // in-flight high-water mark, spin hits, sleeps
};

std::string ObjectId(const std::string& prefix, uint64_t n);

// A timed (or counted) run of writes, or of reads (o.mode). INVALID_ARGUMENT if the acked
// log cannot be opened or a read run has no objects; otherwise the run's results (failed
// ops are counted in `errors`, not returned as an error).
absl::StatusOr<WriteRunResult> RunWrites(const ObjectOps& ops, const WriteRunOptions& o,
                                         std::ostream& progress_out);
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
// against their pattern. `object_size` 0 means unknown (no cap). `expect_size` > 0: an
// object of another size is bad too ("OID: N bytes, expected M"), so an older version of
// a different size is caught (the pattern alone is the oid's at any length).
VerifyResult VerifyObjects(const ObjectOps& ops, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size = 0,
                           std::chrono::nanoseconds spin = kDefaultSpin, uint64_t expect_size = 0);
VerifyResult VerifyObjects(client::Client& c, uint64_t n,
                           const std::function<std::string(uint64_t)>& oid_of, int concurrency,
                           uint64_t object_size = 0,
                           std::chrono::nanoseconds spin = kDefaultSpin, uint64_t expect_size = 0);

// Object ids from a file, one per line (blank lines skipped).
absl::StatusOr<std::vector<std::string>> ReadOidFile(const std::string& path);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_RUNNER_H_

// The bench's asynchronous op driver: ONE thread (the caller's) keeps exactly
// `concurrency` ops in flight through an asynchronous API, as `rados bench -t` does with
// librados aio, instead of one blocked thread per op.
//
//   loop: start ops until `concurrency` are in flight (or the count / time limit is hit);
//         wait for completions (spin up to `spin`, then sleep; completion_queue.h);
//         hand each to `complete`, then refill.
//
// Ops are started ONLY on the driver thread, never from a completion callback: the
// objecter's callbacks must not block, and AsyncWrite may block (max_in_flight, ring
// credit). A callback only records the time and pushes the result (OpToken::Done).
//
// Op n's latency runs from just before `start(n, ...)` to the moment its callback runs,
// both on the monotonic clock; `prepare(n)` (building the payload) is outside it.
//
// Limit: the async call does its send on the calling thread (rdma: the record copy into
// the OSD's ring; both: waits for ring credit), so one driver serializes that work and
// finished ops wait for their slot to be refilled while it is inside AsyncWrite;
// DriverSummary() shows how much (figures: docs/BENCHMARKS.md, "Measurements quoted from
// source comments").
//
// Thread-safety: RunDriver() on one thread; every hook runs on that thread. OpToken::Done() from
// any thread, exactly once per token, possibly inline inside `start`.
#ifndef MSGR_CLIENT_BENCH_ASYNC_DRIVER_H_
#define MSGR_CLIENT_BENCH_ASYNC_DRIVER_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "client/bench/completion_queue.h"
#include "client/bench/latency_histogram.h"

namespace msgr::bench {

// Default of --spin-us: how long the driver polls for a completion before it sleeps.
// 0 (never spin): when cores are busy the spinning driver takes the core the messenger
// worker and the OSDs' pollers need, and a loopback op takes far longer than a short spin,
// so the spin rarely catches its completion (figures: docs/BENCHMARKS.md, "Measurements
// quoted from source comments"). Spinning may pay off with idle cores: measure with
// --spin-us.
inline constexpr std::chrono::microseconds kDefaultSpin{0};

// Handed to `start`; the op's callback calls Done() exactly once. Cheap to copy.
class OpToken {
 public:
  OpToken(std::shared_ptr<CompletionQueue> q, uint64_t n, BenchClock::time_point submitted)
      : q_(std::move(q)), n_(n), submitted_(submitted) {}
  uint64_t n() const { return n_; }
  // Any thread; does not block (a short mutex hold). `data`: a read's payload.
  void Done(absl::Status status, std::string data = {}) const;

 private:
  std::shared_ptr<CompletionQueue> q_;  // kept alive by every pending callback
  uint64_t n_;
  BenchClock::time_point submitted_;
};

struct DriverOptions {
  int concurrency = 1;        // ops in flight; >= 1
  uint64_t count = 0;         // ops to start in all; 0 = no limit (then seconds > 0)
  double seconds = 0;         // stop starting ops after this long; 0 = no limit
  std::chrono::nanoseconds spin = kDefaultSpin;  // 0 = never spin
  std::function<bool()> poll;  // optional: called while spinning (reaps completions)
  std::chrono::nanoseconds tick = std::chrono::seconds(1);  // period of `tick`
};

struct DriverHooks {
  std::function<void(uint64_t n)> prepare;                 // optional, untimed
  std::function<void(uint64_t n, const OpToken& t)> start;  // required; timed from here
  std::function<void(Completion& c)> complete;             // required
  std::function<void()> after_batch;  // optional: after each batch of completions
  std::function<void(int tick)> tick;  // optional: 1, 2, ... while ops are in flight
  // Optional: true once no more ops should start (an error no retry can fix); checked
  // before each start.
  std::function<bool()> give_up;
};

struct DriverStats {
  uint64_t started = 0, completed = 0;
  int max_in_flight = 0;      // highest number of ops in flight at once
  double seconds = 0;         // first start to last completion
  double start_seconds = 0;   // spent inside `start` (async calls blocking on credit...)
  // Per op, from its callback to the driver taking it (wake-up and scheduling delay):
  // the time its slot stays empty, ops not really in flight.
  LatencyHistogram handoff;   // nanoseconds
  CompletionQueueCounters queue;
};

// One line for humans: "driver: ops N, max in flight T, in start X% of the run, ..."
std::string DriverSummary(const DriverStats& s);

// Runs until the count or time limit stops new ops and every started op has completed.
// REQUIRES: o.concurrency >= 1, o.count > 0 || o.seconds > 0, hooks.start/complete set.
DriverStats RunDriver(const DriverOptions& o, const DriverHooks& hooks);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_ASYNC_DRIVER_H_

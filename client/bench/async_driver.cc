#include "client/bench/async_driver.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

#include "absl/strings/str_format.h"

namespace msgr::bench {

void OpToken::Done(absl::Status status, std::string data) const {
  Completion c;
  c.completed = BenchClock::now();
  c.n = n_;
  c.status = std::move(status);
  c.data = std::move(data);
  c.submitted = submitted_;
  q_->Push(std::move(c));
}

std::string DriverSummary(const DriverStats& s) {
  double pct = s.seconds > 0 ? 100 * s.start_seconds / s.seconds : 0;
  return absl::StrFormat(
      "driver: ops %d, max in flight %d, in start %.0f%% of the run, handoff to driver p50 "
      "%.1f us p99 %.1f us, waits %d (spin hits %d, sleeps %d)",
      s.completed, s.max_in_flight, pct, s.handoff.Percentile(0.5) / 1e3,
      s.handoff.Percentile(0.99) / 1e3, s.queue.waits, s.queue.spin_hits, s.queue.sleeps);
}

DriverStats RunDriver(const DriverOptions& o, const DriverHooks& hooks) {
  assert(o.concurrency >= 1 && (o.count > 0 || o.seconds > 0) && hooks.start && hooks.complete);
  using Clock = BenchClock;
  constexpr auto kNever = Clock::time_point::max();
  auto q = std::make_shared<CompletionQueue>();
  DriverStats st;
  const Clock::time_point t0 = Clock::now();
  const Clock::time_point stop_at =
      o.seconds > 0 ? t0 + std::chrono::duration_cast<Clock::duration>(
                               std::chrono::duration<double>(o.seconds))
                    : kNever;
  Clock::time_point next_tick = hooks.tick ? t0 + o.tick : kNever;
  Clock::time_point first_start{}, last_done{};
  Clock::duration start_time{};
  int tick = 0;
  int in_flight = 0;
  bool stopping = false;  // no more ops will be started
  std::vector<Completion> batch;

  for (;;) {
    // Refill. Each start may block (credit, max_in_flight), so the time limit is checked
    // between starts, not only once per loop.
    while (!stopping && in_flight < o.concurrency) {
      if ((o.count > 0 && st.started >= o.count) || (hooks.give_up && hooks.give_up())) {
        stopping = true;
        break;
      }
      const uint64_t n = st.started;
      if (hooks.prepare) hooks.prepare(n);
      const Clock::time_point now = Clock::now();
      if (now >= stop_at) {
        stopping = true;
        break;
      }
      if (st.started == 0) first_start = now;
      ++in_flight;
      ++st.started;
      st.max_in_flight = std::max(st.max_in_flight, in_flight);
      hooks.start(n, OpToken(q, n, now));  // may complete inline (Push from this thread)
      start_time += Clock::now() - now;
    }
    if (in_flight == 0) break;  // stopping (a non-stopping refill leaves >= 1 in flight)

    Clock::time_point now = Clock::now();
    while (now >= next_tick) {
      hooks.tick(++tick);
      next_tick += o.tick;
    }
    if (!stopping && now >= stop_at) stopping = true;
    Clock::time_point deadline = std::min(next_tick, stopping ? kNever : stop_at);
    batch.clear();
    if (q->Wait(&batch, deadline, o.spin, o.poll) == 0) continue;
    const Clock::time_point taken = Clock::now();
    for (Completion& c : batch) {
      st.handoff.Record(static_cast<uint64_t>(std::max<int64_t>(
          0, std::chrono::duration_cast<std::chrono::nanoseconds>(taken - c.completed).count())));
      --in_flight;
      ++st.completed;
      last_done = std::max(last_done, c.completed);
      hooks.complete(c);
    }
    if (hooks.after_batch) hooks.after_batch();
  }
  st.seconds = st.started > 0 ? std::chrono::duration<double>(last_done - first_start).count()
                              : 0;
  st.start_seconds = std::chrono::duration<double>(start_time).count();
  st.queue = q->counters();
  return st;
}

}  // namespace msgr::bench

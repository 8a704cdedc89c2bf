// The async driver over a fake asynchronous service (callbacks on another thread after a
// delay): never more than -t ops in flight and exactly -t when there is work, count mode
// starts exactly N ops, time mode stops starting and drains, inline completions work,
// latency covers the op's delay, time blocked inside `start` is what start_seconds counts,
// and a spinning driver takes completions without sleeping.
#include "client/bench/async_driver.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "tests/client/bench/delayed_executor.h"

namespace msgr::bench {
namespace {

using namespace std::chrono_literals;
using testing::DelayedExecutor;

// A fake async service that counts its own in-flight ops (from the call to just before
// the callback), the figure a real OSD would see.
struct FakeService {
  DelayedExecutor exec;
  std::atomic<int> in_flight{0};
  std::atomic<int> max_in_flight{0};

  void Start(const OpToken& t, std::chrono::nanoseconds delay) {
    int now = ++in_flight;
    int m = max_in_flight.load();
    while (now > m && !max_in_flight.compare_exchange_weak(m, now)) {
    }
    exec.After(delay, [this, t] {
      --in_flight;
      t.Done(absl::OkStatus());
    });
  }
};

struct Collected {
  std::vector<uint64_t> done;  // op indices in completion order
  std::vector<uint64_t> latency_ns;
};

DriverHooks HooksFor(FakeService& svc, Collected& got, std::chrono::nanoseconds delay) {
  DriverHooks h;
  h.start = [&svc, delay](uint64_t, const OpToken& t) { svc.Start(t, delay); };
  h.complete = [&got](Completion& c) {
    EXPECT_TRUE(c.status.ok()) << c.status;
    got.done.push_back(c.n);
    got.latency_ns.push_back(c.latency_ns());
  };
  return h;
}

TEST(AsyncDriverTest, CountModeKeepsExactlyTInFlightAndStartsExactlyN) {
  for (int t : {1, 3, 16}) {
    FakeService svc;
    Collected got;
    DriverOptions o;
    o.concurrency = t;
    o.count = 200;
    o.spin = 20us;
    DriverStats st = RunDriver(o, HooksFor(svc, got, 200us));
    EXPECT_EQ(st.started, 200u) << "-t " << t;
    EXPECT_EQ(st.completed, 200u);
    EXPECT_EQ(st.max_in_flight, t);             // the driver's own accounting ...
    EXPECT_EQ(svc.max_in_flight.load(), t);     // ... and what the service saw
    EXPECT_EQ(svc.in_flight.load(), 0);
    std::set<uint64_t> ids(got.done.begin(), got.done.end());
    EXPECT_EQ(ids.size(), 200u);
    EXPECT_EQ(*ids.begin(), 0u);
    EXPECT_EQ(*ids.rbegin(), 199u);
    EXPECT_GT(st.seconds, 0);
    EXPECT_EQ(st.handoff.count(), 200u);  // one callback-to-driver delay per op
    EXPECT_LE(st.start_seconds, st.seconds);  // what it counts: StartSecondsCounts... below
    std::string line = DriverSummary(st);
    EXPECT_NE(line.find("ops 200, max in flight " + std::to_string(t)), std::string::npos)
        << line;
  }
}

TEST(AsyncDriverTest, CountBelowConcurrencyStartsOnlyCount) {
  FakeService svc;
  Collected got;
  DriverOptions o;
  o.concurrency = 16;
  o.count = 5;
  DriverStats st = RunDriver(o, HooksFor(svc, got, 1ms));
  EXPECT_EQ(st.started, 5u);
  EXPECT_EQ(st.max_in_flight, 5);
  EXPECT_EQ(got.done.size(), 5u);
}

TEST(AsyncDriverTest, TimeModeStopsStartingThenDrains) {
  FakeService svc;
  Collected got;
  DriverOptions o;
  o.concurrency = 4;
  o.seconds = 0.2;
  o.tick = 50ms;
  std::vector<int> ticks;
  DriverHooks h = HooksFor(svc, got, 30ms);  // ops outlive the last tick
  h.tick = [&](int k) {
    ticks.push_back(k);
  };
  auto t0 = BenchClock::now();
  DriverStats st = RunDriver(o, h);
  auto took = BenchClock::now() - t0;
  EXPECT_GE(took, 200ms);
  EXPECT_LT(took, 5s);
  EXPECT_EQ(st.started, st.completed);          // drained
  EXPECT_EQ(got.done.size(), st.started);
  EXPECT_GE(st.started, 8u);                    // 4 in flight x >= 200 ms / 30 ms, loosely
  EXPECT_LE(st.max_in_flight, 4);
  ASSERT_GE(ticks.size(), 3u);                  // 50, 100, 150 ms at least
  for (size_t i = 0; i < ticks.size(); ++i) EXPECT_EQ(ticks[i], static_cast<int>(i) + 1);
  for (uint64_t ns : got.latency_ns) EXPECT_GE(ns, 30'000'000u);
}

TEST(AsyncDriverTest, InlineCompletionsAndErrorsAreHandled) {
  // Every op fails inside the start call, as an immediate error from AsyncWrite would.
  int starts = 0;
  uint64_t errors = 0;
  DriverOptions o;
  o.concurrency = 8;
  o.count = 1000;
  DriverHooks h;
  h.start = [&](uint64_t n, const OpToken& t) {
    ++starts;
    t.Done(n % 2 ? absl::UnavailableError("odd") : absl::OkStatus());
  };
  h.complete = [&](Completion& c) {
    if (!c.status.ok()) {
      EXPECT_EQ(c.status.message(), "odd");
      EXPECT_EQ(c.n % 2, 1u);
      ++errors;
    }
  };
  DriverStats st = RunDriver(o, h);
  EXPECT_EQ(starts, 1000);
  EXPECT_EQ(st.completed, 1000u);
  EXPECT_EQ(errors, 500u);
  EXPECT_LE(st.max_in_flight, 8);
}

TEST(AsyncDriverTest, PrepareRunsBeforeEachStartOutsideTheTiming) {
  FakeService svc;
  Collected got;
  std::vector<uint64_t> prepared;
  DriverOptions o;
  o.concurrency = 2;
  o.count = 10;
  DriverHooks h = HooksFor(svc, got, 100us);
  h.prepare = [&](uint64_t n) {
    prepared.push_back(n);
    std::this_thread::sleep_for(5ms);  // slow payload generation: not op latency
  };
  auto start = h.start;
  h.start = [&](uint64_t n, const OpToken& t) {
    ASSERT_FALSE(prepared.empty());
    EXPECT_EQ(prepared.back(), n);
    start(n, t);
  };
  RunDriver(o, h);
  EXPECT_EQ(prepared.size(), 10u);
  // The 5 ms of prepare are not in the latency (ops take 100 us plus scheduling noise).
  std::vector<uint64_t> l = got.latency_ns;
  std::sort(l.begin(), l.end());
  EXPECT_LT(l[l.size() / 2], 5'000'000u);
}

// start_seconds is the time the driver spends inside `start` (an async call that blocks on
// ring credit, say). Here each start blocks 2 ms before it hands its op over: all of that is
// counted -- at least what the hook measured around itself -- and nothing else: not the
// untimed prepare before it, not the waits for completions after it (at most the time from
// the end of each prepare to the next hook the driver runs). The bounds are clock readings
// taken around the hooks, not fixed limits: a slow machine moves both sides alike.
TEST(AsyncDriverTest, StartSecondsCountsTheTimeSpentInsideStart) {
  FakeService svc;
  Collected got;
  DriverOptions o;
  o.concurrency = 2;
  o.count = 20;
  DriverHooks h = HooksFor(svc, got, 5ms);
  BenchClock::duration inside{};    // each start, as the hook measured it
  BenchClock::duration envelope{};  // each start's end of prepare .. next hook
  std::optional<BenchClock::time_point> open;  // the end of the last prepare, until a hook
  auto close = [&] {
    if (open) envelope += BenchClock::now() - *open;
    open.reset();
  };
  h.prepare = [&](uint64_t) {
    close();
    std::this_thread::sleep_for(3ms);  // untimed work
    open = BenchClock::now();
  };
  h.start = [&, start = h.start](uint64_t n, const OpToken& t) {
    const BenchClock::time_point t0 = BenchClock::now();
    std::this_thread::sleep_for(2ms);  // blocked, as on ring credit
    start(n, t);
    inside += BenchClock::now() - t0;
  };
  h.complete = [&, complete = h.complete](Completion& c) {
    close();
    complete(c);
  };
  DriverStats st = RunDriver(o, h);
  close();
  ASSERT_EQ(st.completed, 20u);
  auto secs = [](BenchClock::duration d) { return std::chrono::duration<double>(d).count(); };
  EXPECT_GE(secs(inside), 20 * 0.002);  // the sleeps happened inside the starts
  EXPECT_GE(st.start_seconds, secs(inside)) << "time blocked inside start is not counted";
  EXPECT_LE(st.start_seconds, secs(envelope)) << "time outside start is counted";
  EXPECT_LE(st.start_seconds, st.seconds);
}

TEST(AsyncDriverTest, SpinningDriverTakesCompletionsWithoutSleeping) {
  FakeService svc;
  Collected got;
  DriverOptions o;
  o.concurrency = 1;
  o.count = 50;
  o.spin = 10s;  // far above the op time: every wait ends in the spin
  DriverStats st = RunDriver(o, HooksFor(svc, got, 200us));
  EXPECT_EQ(st.completed, 50u);
  EXPECT_EQ(st.queue.sleeps, 0u);
  EXPECT_EQ(st.queue.spin_hits, st.queue.waits);
  EXPECT_GT(st.queue.waits, 0u);

  FakeService svc2;
  Collected got2;
  o.spin = 0us;  // never spin: every wait sleeps
  st = RunDriver(o, HooksFor(svc2, got2, 200us));
  EXPECT_EQ(st.completed, 50u);
  EXPECT_EQ(st.queue.spin_hits, 0u);
  EXPECT_GT(st.queue.sleeps, 0u);
}

}  // namespace
}  // namespace msgr::bench

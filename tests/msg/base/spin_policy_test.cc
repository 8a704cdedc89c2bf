#include "msg/base/spin_policy.h"

#include "gtest/gtest.h"

namespace msgr {
namespace {

constexpr uint64_t kUs = 1000;

SpinPolicy::Options Opts(uint64_t max_spin_us, uint64_t wakeup_us, bool adaptive = true) {
  return SpinPolicy::Options{max_spin_us * kUs, wakeup_us * kUs, adaptive};
}

TEST(SpinPolicyTest, SpinsAWakeupsWorthWhileGapsAreShort) {
  SpinPolicy p(Opts(1000, 150));
  for (int i = 0; i < 100; ++i) {
    EXPECT_EQ(p.BeginIdle(), 150 * kUs) << i;  // never more than a wake-up costs
    p.EndIdle(40 * kUs, /*slept=*/false);
  }
  EXPECT_TRUE(p.spinning());
  EXPECT_GT(p.short_permille(), 900u);
}

// One idle period in three short: below the default bar (one in two) the policy stops
// spinning; with the bar at one in four (a caller whose wake-ups cost several spins) it
// keeps spinning.
TEST(SpinPolicyTest, TheBarForSpinningIsTheCallers) {
  auto run = [](uint32_t bar) {
    SpinPolicy::Options o = Opts(20, 20);
    o.min_short_permille = bar;
    SpinPolicy p(o);
    for (int i = 0; i < 300; ++i) {
      if (p.BeginIdle() == 0) {
        p.EndIdle(500 * kUs, /*slept=*/true);  // slept from the start: no sample
      } else if (i % 3 == 0) {
        p.EndIdle(10 * kUs, /*slept=*/false);  // ended within the spin
      } else {
        p.EndIdle(500 * kUs, /*slept=*/true);  // spun out, then slept
      }
    }
    return p.spinning();
  };
  EXPECT_FALSE(run(500));
  EXPECT_TRUE(run(250));
}

TEST(SpinPolicyTest, SpinNeverExceedsTheCap) {
  SpinPolicy p(Opts(50, 150));
  EXPECT_EQ(p.BeginIdle(), 50 * kUs);
}

TEST(SpinPolicyTest, LongGapsStopTheSpinButKeepProbing) {
  SpinPolicy p(Opts(1000, 150));
  int rounds = 0;
  // Records 2 ms apart: every spin runs out and the poller sleeps.
  while (p.spinning() && rounds < 100) {
    EXPECT_EQ(p.BeginIdle(), 150 * kUs);
    p.EndIdle(2000 * kUs, /*slept=*/true);
    ++rounds;
  }
  EXPECT_FALSE(p.spinning());
  EXPECT_GT(rounds, 5);  // one long gap does not end the spin
  EXPECT_LT(rounds, 20);
  int zero = 0, probes = 0;
  for (int i = 0; i < 8 * SpinPolicy::kProbeEvery; ++i) {
    const uint64_t spin = p.BeginIdle();
    (spin == 0 ? zero : probes)++;
    p.EndIdle(2000 * kUs, /*slept=*/true);
  }
  EXPECT_EQ(probes, 8);  // one period in kProbeEvery still measures
  EXPECT_EQ(zero, 8 * (SpinPolicy::kProbeEvery - 1));
  EXPECT_FALSE(p.spinning());
}

TEST(SpinPolicyTest, ProbesComeAsOftenAsTheCallerAsks) {
  SpinPolicy::Options o = Opts(1000, 150);
  o.probe_every = 64;
  SpinPolicy p(o);
  while (p.spinning()) {
    p.BeginIdle();
    p.EndIdle(2000 * kUs, true);
  }
  int probes = 0;
  for (int i = 0; i < 4 * 64; ++i) {
    if (p.BeginIdle() != 0) ++probes;
    p.EndIdle(2000 * kUs, /*slept=*/true);
  }
  EXPECT_EQ(probes, 4);
}

TEST(SpinPolicyTest, ShortGapsFoundByProbesResumeTheSpin) {
  SpinPolicy p(Opts(1000, 150));
  while (p.spinning()) {
    p.BeginIdle();
    p.EndIdle(2000 * kUs, true);
  }
  // The load changes: records come 30 us apart. Periods slept through from their start
  // teach nothing (the wake-up is in the gap); the probes and the last looks do.
  int periods = 0;
  while (!p.spinning() && periods < 1000) {
    const uint64_t spin = p.BeginIdle();
    if (spin == 0) {
      p.EndIdle(180 * kUs, /*slept=*/true);  // 30 us plus the wake-up: no sample
    } else {
      p.EndIdle(30 * kUs, /*slept=*/false);
    }
    ++periods;
  }
  EXPECT_TRUE(p.spinning());
  EXPECT_LT(periods, 1000);
}

TEST(SpinPolicyTest, RecordsAtTheLastLookCountAsShort) {
  SpinPolicy p(Opts(1000, 150));
  while (p.spinning()) {
    p.BeginIdle();
    p.EndIdle(2000 * kUs, true);
  }
  const uint32_t before = p.short_permille();
  p.BeginIdle();
  p.EndIdle(2 * kUs, /*slept=*/false);  // found by Sleep()'s last look
  EXPECT_GT(p.short_permille(), before);
}

// A caller that learns every period's verdict (the store's group commit) gives it with
// Observe: long ones stop the spin, short ones bring it back; a fixed policy ignores them.
TEST(SpinPolicyTest, ObservedVerdictsMoveTheBet) {
  SpinPolicy p(Opts(150, 150, /*adaptive=*/true));
  ASSERT_TRUE(p.spinning());
  for (int i = 0; i < 11; ++i) p.Observe(false);
  EXPECT_FALSE(p.spinning());
  for (int i = 0; i < 11; ++i) p.Observe(true);
  EXPECT_TRUE(p.spinning());
  SpinPolicy fixed(Opts(150, 150, /*adaptive=*/false));
  for (int i = 0; i < 50; ++i) fixed.Observe(false);
  EXPECT_TRUE(fixed.spinning());
}

TEST(SpinPolicyTest, FixedSpinIgnoresWhatItSees) {
  SpinPolicy p(Opts(700, 150, /*adaptive=*/false));
  for (int i = 0; i < 50; ++i) {
    EXPECT_EQ(p.BeginIdle(), 700 * kUs);
    p.EndIdle(5000 * kUs, true);
  }
  EXPECT_TRUE(p.spinning());
}

}  // namespace
}  // namespace msgr

// Spin or sleep after the last event (hybrid polling), decided from what a thread measures.
//
// A polling thread that finds no work can spin (look again and again: the next event is
// found at once, at the price of a core) or sleep until something wakes it (a doorbell, a
// completion channel, a timeout: free while idle, but the wake-up costs latency and the CPU
// of a chain of thread hand-offs, `wakeup_cost`). It should spin only while the next event
// is likely to come sooner than a wake-up would cost, and otherwise sleep at once, leaving
// the core to the threads that produce the work. Users: the OSD's pollers (records on
// RDMA rings, which raise no event: osd_sim/poller.h), the rdma backend's completion
// thread (msg/rdma/event_loop.h) and the store's group commit (whether a flush waits for
// more writes to join it: osd_sim/store/object_store_commit.cc).
//
// The policy is the classic spin-then-block rule with a learned bet. An *idle period*
// starts when a look that found work is followed by one that found none, and ends with the
// next work. The policy keeps an estimate `p` of how often an idle period is *short* (ends
// within `wakeup_cost`). While p >= 1/2 it spins `wakeup_cost` (never more than `max_spin`)
// before sleeping: spinning that long costs at most one wake-up's worth of CPU per period
// and saves a wake-up in most of them (a caller whose wake-ups cost several times its
// spin lowers the bar: `min_short_permille`). Below it, it sleeps at once, except every
// `probe_every`-th period (default kProbeEvery), which spins to keep measuring (a period
// slept through from its start says nothing about its length: the wake-up is in it). Idle
// periods that ended while spinning are short; those spun through are long.
//
// Non-adaptive (a fixed spin the user set): every idle period spins `max_spin`.
//
// Not thread-safe: one polling thread owns it. Sans-I/O: the caller measures the gaps.
#ifndef MSGR_MSG_BASE_SPIN_POLICY_H_
#define MSGR_MSG_BASE_SPIN_POLICY_H_

#include <algorithm>
#include <cstdint>

namespace msgr {

class SpinPolicy {
 public:
  struct Options {
    uint64_t max_spin_ns = 1'000'000;    // the longest spin of one idle period
    uint64_t wakeup_cost_ns = 1'000'000; // what a wake-up costs (the caller's measurement)
    bool adaptive = true;                // false: always spin max_spin_ns
    // Spin while at least this per mille of idle periods are short. 500 when a wake-up
    // costs about what the spin does; lower when a wake-up costs several spins.
    uint32_t min_short_permille = 500;
    // While sleeping at once, spin one period in this many (a caller whose periods come
    // by the thousand per second and whose spins take CPU others need probes less often).
    uint32_t probe_every = 8;
  };
  static constexpr int kProbeEvery = 8;  // Options::probe_every's default

  explicit SpinPolicy(const Options& options)
      : options_(options), probe_every_(std::max<uint32_t>(options.probe_every, 1)) {}

  // An idle period starts: how long to spin before sleeping.
  uint64_t BeginIdle() {
    if (!options_.adaptive) return spin_ns_ = options_.max_spin_ns;
    const uint64_t spin = std::min(options_.max_spin_ns, options_.wakeup_cost_ns);
    if (short_permille_ >= options_.min_short_permille) return spin_ns_ = spin;
    return spin_ns_ = (++probe_count_ % probe_every_ == 0) ? spin : 0;
  }

  // The idle period ended with a record `gap_ns` after it began; `slept`: the poller had
  // been asleep in it (woken by a doorbell or its sleep's timeout).
  void EndIdle(uint64_t gap_ns, bool slept) {
    if (!options_.adaptive) return;
    if (!slept) {
      Learn(gap_ns <= options_.wakeup_cost_ns);  // found while spinning or at the last look
    } else if (spin_ns_ >= options_.wakeup_cost_ns) {
      Learn(false);  // spun a wake-up's worth and no record came
    }                // slept from the start: the gap includes the wake-up, no sample
  }

  // A caller that learns whether each period was short whatever it did (the store's group
  // commit sees, as each write arrives, whether others are pending that waiting would
  // have batched it with) gives each verdict here instead of BeginIdle/EndIdle;
  // spinning() then says whether to wait.
  void Observe(bool was_short) {
    if (options_.adaptive) Learn(was_short);
  }

  // Per mille of recent idle periods that were short (perf dump: poller.spin_short_pm).
  uint32_t short_permille() const { return short_permille_; }
  bool spinning() const {
    return !options_.adaptive || short_permille_ >= options_.min_short_permille;
  }

 private:
  // EWMA with weight 1/16 per period, in per mille.
  void Learn(bool was_short) {
    const int32_t sample = was_short ? 1000 : 0;
    short_permille_ = static_cast<uint32_t>(
        static_cast<int32_t>(short_permille_) + (sample - static_cast<int32_t>(short_permille_)) / 16);
  }

  const Options options_;
  const uint32_t probe_every_;  // options_.probe_every, at least 1
  uint32_t short_permille_ = 1000;  // start by spinning, as a fresh poller expects records
  uint64_t spin_ns_ = 0;            // this period's budget
  uint32_t probe_count_ = 0;
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_SPIN_POLICY_H_

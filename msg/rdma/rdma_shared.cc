#include "msg/rdma/rdma_shared.h"

#include <pthread.h>

#include <algorithm>

#include "msg/rdma/event_loop.h"

namespace msgr::rdma {

bool RdmaShared::OutOfRingInjection::TakeArmed() {
  uint64_t left = left_.load(std::memory_order_relaxed);
  while (left != 0 && !left_.compare_exchange_weak(left, left - 1)) {
  }
  return left == 1;
}

size_t RdmaShared::RingSizeFor(uint64_t asked) const {
  size_t bytes = ring_min_bytes;
  while (bytes < asked && bytes < options.ring_bytes) bytes *= 2;
  return std::min(bytes, options.ring_bytes);
}

RdmaStats RdmaShared::Stats() const {
  RdmaStats s = counters.LiveRdmaCounters::Snapshot();
  s.registered_bytes = budget->used();
  s.registered_max_bytes = budget->max();
  s.registration_refusals = budget->refusals();
  if (buffers) s.record_buffer_cached_bytes = buffers->cached_bytes();
  for (const auto& n : notifiers) s.record_imms_received += n->record_imms();
  if (loop) {
    s.cq_idle_periods = loop->idle_periods();
    s.cq_sleeps_at_once = loop->sleeps_at_once();
  }
  return s;
}

void RdmaShared::Ban(const EntityName& peer) {
  if (cutoff_ban <= absl::ZeroDuration()) return;
  absl::MutexLock l(&ban_mu);
  const absl::Time now = absl::Now();
  for (auto it = banned.begin(); it != banned.end();) {  // forget expired bans
    it = it->second <= now ? banned.erase(it) : std::next(it);
  }
  banned[peer.ToString()] = now + cutoff_ban;
}

absl::Time RdmaShared::BannedUntil(const EntityName& peer) {
  absl::MutexLock l(&ban_mu);
  auto it = banned.find(peer.ToString());
  return it == banned.end() ? absl::InfinitePast() : it->second;
}

void RdmaShared::Linger(std::shared_ptr<Transport> tp, std::weak_ptr<RdmaConnection> owner) {
  absl::MutexLock l(&linger_mu);
  lingering.push_back(Lingering{absl::Now(), std::move(tp), std::move(owner)});
}

std::shared_ptr<RdmaConnection> RdmaShared::LingeringOwner(uint32_t qp_num) {
  absl::MutexLock l(&linger_mu);
  for (const Lingering& g : lingering) {
    if (g.tp->qp()->qp_num() == qp_num) return g.owner.lock();
  }
  return nullptr;
}

void RdmaShared::BuryLingering(bool all) {
  std::vector<std::shared_ptr<Transport>> bury;  // destroyed outside the lock
  {
    absl::MutexLock l(&linger_mu);
    const absl::Time cutoff = absl::Now() - kRetiredTransportLinger;
    while (!lingering.empty() && (all || lingering.front().since <= cutoff)) {
      bury.push_back(std::move(lingering.front().tp));
      lingering.pop_front();
    }
  }
}

void RdmaShared::DrainAsyncEvents() {
  std::function<void()> drain;
  {
    absl::MutexLock l(&hooks_mu);
    drain = drain_async_events;
  }
  if (drain) drain();
}

Workers::Workers(int threads, const char* name) {
  if (threads < 1) threads = 1;
  for (int i = 0; i < threads; ++i) queues_.push_back(std::make_unique<Queue>());
  for (int i = 0; i < threads; ++i) threads_.emplace_back([this, i, name] {
      pthread_setname_np(pthread_self(), name);
      Run(queues_[i].get());
    });
}

Workers::~Workers() { Stop(); }

void Workers::Post(uint64_t key, std::function<void()> fn) {
  Queue* q = queues_[key % queues_.size()].get();
  absl::MutexLock l(&q->mu);
  if (q->stop) return;
  q->q.push_back(std::move(fn));
  q->cv.Signal();
}

void Workers::Stop() {
  for (auto& q : queues_) {
    absl::MutexLock l(&q->mu);
    q->stop = true;
    q->cv.SignalAll();
  }
  for (auto& t : threads_) {
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
    else if (t.joinable()) t.detach();
  }
  threads_.clear();
  for (auto& q : queues_) {
    std::deque<std::function<void()>> drop;
    absl::MutexLock l(&q->mu);
    drop.swap(q->q);
  }
}

void Workers::Run(Queue* q) {
  for (;;) {
    std::function<void()> fn;
    {
      absl::MutexLock l(&q->mu);
      while (q->q.empty() && !q->stop) q->cv.Wait(&q->mu);
      if (q->stop) return;
      fn = std::move(q->q.front());
      q->q.pop_front();
    }
    fn();
  }
}

}  // namespace msgr::rdma

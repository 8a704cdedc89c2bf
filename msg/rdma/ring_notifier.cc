#include "msg/rdma/ring_notifier.h"

#include <algorithm>

#include "msg/rdma/rdma_connection.h"
#include "msg/rdma/rdma_wire.h"
#include "spdlog/spdlog.h"

namespace msgr::rdma {

absl::StatusOr<std::shared_ptr<RdmaRingNotifier>> RdmaRingNotifier::Create(
    std::shared_ptr<DeviceContext> ctx, int index, int depth, uint32_t recv_per_session) {
  const verbs::DeviceAttr& attr = ctx->device->attr();
  if (attr.max_cqe > 0) depth = std::min<int>(depth, static_cast<int>(attr.max_cqe));
  const size_t per_session = 2 * static_cast<size_t>(std::max<uint32_t>(recv_per_session, 1));
  const size_t max_sessions = static_cast<size_t>(depth) / per_session;
  if (max_sessions == 0) {
    return absl::InvalidArgumentError("RDMA ring notifier: the CQ holds no session's receives");
  }
  std::shared_ptr<RdmaRingNotifier> n(new RdmaRingNotifier(std::move(ctx), index, max_sessions));
  auto cq = n->ctx_->device->CreateCq(depth);
  if (!cq.ok()) return cq.status();
  n->cq_ = std::move(*cq);
  return n;
}

RdmaRingNotifier::~RdmaRingNotifier() = default;

std::shared_ptr<void> RdmaRingNotifier::Reserve() {
  size_t now = sessions_.load();
  do {
    if (now >= max_sessions_) return nullptr;
  } while (!sessions_.compare_exchange_weak(now, now + 1));
  // The token keeps the notifier (and its CQ) alive as long as a transport uses it.
  std::shared_ptr<RdmaRingNotifier> self = shared_from_this();
  return std::shared_ptr<void>(self.get(), [self](void*) { self->sessions_.fetch_sub(1); });
}

void RdmaRingNotifier::PruneLocked() {
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (it->second.tp.expired()) {
      entries_.erase(it++);
    } else {
      ++it;
    }
  }
}

void RdmaRingNotifier::Attach(uint32_t qp_num, std::weak_ptr<Transport> tp, RecvRing* ring,
                              std::shared_ptr<ImmCount> count) {
  absl::MutexLock l(&mu_);
  PruneLocked();
  Entry& e = entries_[qp_num];
  e = Entry{};
  e.tp = std::move(tp);
  e.ring = ring;
  e.count = std::move(count);
}

void RdmaRingNotifier::SetLink(uint32_t qp_num, std::weak_ptr<Link> link) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find(qp_num);
  if (it == entries_.end()) return;
  it->second.link = std::move(link);
  it->second.has_link = true;
  if (!it->second.waiting.empty()) flush_waiting_.store(true);
}

void RdmaRingNotifier::Arm() {
  if (failed_) return;
  if (absl::Status s = cq_->RequestNotify(); !s.ok()) {
    spdlog::warn("msgr rdma: ring notifier {}: cannot arm its CQ: {}", index_, s.ToString());
    return;
  }
}

size_t RdmaRingNotifier::Poll(RecvRing** out, size_t max) {
  if (failed_ || max == 0) return 0;
  constexpr size_t kBatch = sizeof(wc_) / sizeof(wc_[0]);
  verbs::Completion* const wc = wc_;
  const int n = cq_->Poll(wc, static_cast<int>(std::min(kBatch, max)));
  if (n < 0) {
    failed_ = true;
    spdlog::error("msgr rdma: ring notifier {}: its completion queue failed (overrun); the "
                  "sessions on it get no more receives: restart the OSD",
                  index_);
    return 0;
  }
  if (n == 0 && !flush_waiting_.load(std::memory_order_relaxed)) return 0;
  size_t found = 0;
  used_deliveries_ = 0;
  count_writes_.clear();
  auto deliver = [&](const std::shared_ptr<Link>& link, const verbs::Completion& c) {
    if (used_deliveries_ > 0 && deliveries_[used_deliveries_ - 1].link == link) {
      deliveries_[used_deliveries_ - 1].wc.push_back(c);
      return;
    }
    if (used_deliveries_ == deliveries_.size()) deliveries_.emplace_back();
    Delivery& d = deliveries_[used_deliveries_++];
    d.link = link;
    d.wc.clear();
    d.wc.push_back(c);
  };
  {
    absl::MutexLock l(&mu_);
    if (flush_waiting_.exchange(false)) {
      for (auto& [qp, e] : entries_) {
        if (!e.has_link || e.waiting.empty()) continue;
        std::shared_ptr<Link> link = e.link.lock();
        for (const verbs::Completion& c : e.waiting) {
          if (link) deliver(link, c);
        }
        e.waiting.clear();
      }
    }
    for (int i = 0; i < n; ++i) {
      const verbs::Completion& c = wc[i];
      auto it = entries_.find(c.qp_num);
      if (it == entries_.end()) continue;  // a QP that is gone: nobody to tell
      Entry& e = it->second;
      const bool record = e.ring != nullptr && c.status == verbs::WcStatus::kSuccess &&
                          c.opcode == verbs::WcOpcode::kRecvRdmaWithImm &&
                          (c.imm_data & kImmWantCreditWakeup) == 0;
      if (record) {
        // The receive goes back at once; only then does the count the client reads say so.
        if (std::shared_ptr<Transport> tp = e.tp.lock()) {
          if (tp->RepostRecv(static_cast<uint32_t>(c.wr_id & ~kRecvWrBit)).ok()) {
            e.count->reposted.fetch_add(1, std::memory_order_relaxed);
            if (e.has_link && e.count->lagging(3)) {
              if (std::shared_ptr<Link> link = e.link.lock()) {
                if (std::find(count_writes_.begin(), count_writes_.end(), link) ==
                    count_writes_.end()) {
                  count_writes_.push_back(std::move(link));
                }
              }
            }
          }
        }
        record_imms_.fetch_add(1, std::memory_order_relaxed);
        out[found++] = e.ring;
        continue;
      }
      if (!e.has_link) {
        e.waiting.push_back(c);
        continue;
      }
      if (std::shared_ptr<Link> link = e.link.lock()) deliver(link, c);
    }
  }
  // Outside mu_: the sessions take their own locks.
  for (size_t i = 0; i < used_deliveries_; ++i) {
    Delivery& d = deliveries_[i];
    d.link->OnCompletions(d.wc.data(), static_cast<int>(d.wc.size()));
    d.link.reset();
  }
  for (const std::shared_ptr<Link>& link : count_writes_) link->WriteImmCount();
  count_writes_.clear();
  return found;
}

}  // namespace msgr::rdma

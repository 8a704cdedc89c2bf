// Objecter setup, maps, messenger events and background threads (the op paths are in
// objecter_io.cc).
#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/objecter.h"
#include "client/objecter_op.h"
#include "msg/base/pool_allocator.h"
#include "proto/osd_protocol.h"
#include "spdlog/spdlog.h"

namespace msgr::client {
namespace {

}  // namespace

void Objecter::RunAll(Completions& done) {
  for (auto& c : done) c.Run();
  done.clear();
}

Objecter::Objecter(ObjecterOptions options)
    : options_(std::move(options)), pending_(std::make_unique<PendingOps>()) {}

Objecter::OpRef Objecter::NewOp() {
  // From a pool (msg/base/pool_allocator.h): after the first max_in_flight ops an op costs
  // no allocation.
  return std::allocate_shared<Op>(PoolAllocator<Op>());
}

std::vector<Objecter::OpRef> Objecter::PendingOpsLocked() const {
  std::vector<OpRef> all;
  all.reserve(pending_->in_order.size());
  for (Op& op : pending_->in_order) all.push_back(op.pending);
  return all;
}

absl::StatusOr<std::unique_ptr<Objecter>> Objecter::Create(ObjecterOptions options) {
  if (options.max_in_flight == 0) {
    return absl::InvalidArgumentError("max_in_flight must be at least 1");
  }
  if (options.op_timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError("op_timeout must be positive");
  }
  std::unique_ptr<Objecter> o(new Objecter(std::move(options)));
  auto m = Messenger::Create(o->options_.messenger, o.get());
  if (!m.ok()) return m.status();
  o->messenger_ = std::move(*m);
  o->retry_thread_ = std::thread([p = o.get()] { p->RetryLoop(); });
  o->timer_thread_ = std::thread([p = o.get()] { p->TimerLoop(); });
  return o;
}

Objecter::~Objecter() { Shutdown(); }

void Objecter::Shutdown() {
  {
    absl::MutexLock l(&mu_);
    if (shutdown_) return;
    shutdown_ = true;
    retry_cv_.SignalAll();
    timer_cv_.SignalAll();
    slot_cv_.SignalAll();
  }
  // The messenger first: it says goodbye to every OSD (each frees our ring at once),
  // unblocks senders waiting for credit and ends callbacks.
  if (messenger_) messenger_->Shutdown();
  if (retry_thread_.joinable()) retry_thread_.join();
  if (timer_thread_.joinable()) timer_thread_.join();
  Completions done;
  {
    absl::MutexLock l(&mu_);
    for (const OpRef& op : PendingOpsLocked()) {
      done.push_back(FinishLocked(
          op, absl::CancelledError(absl::StrCat(op->what(), " of ", op->oid,
                                                " cancelled: client shutting down"))));
    }
    sessions_.clear();
    retry_queue_.clear();
  }
  RunAll(done);
}

void Objecter::Fence(absl::Status why) {
  Completions done;
  {
    absl::MutexLock l(&mu_);
    if (shutdown_ || !fenced_.ok()) return;
    fenced_ = why;
    spdlog::error("client: {}", std::string(why.message()));
    for (const OpRef& op : PendingOpsLocked()) {
      if (op->done) continue;
      done.push_back(FinishLocked(
          op, absl::Status(why.code(), absl::StrCat(op->what(), " of ", op->oid, ": ",
                                                    why.message()))));
    }
    slot_cv_.SignalAll();
  }
  RunAll(done);
}

uint64_t Objecter::map_epoch() const {
  absl::MutexLock l(&mu_);
  return have_map_ ? map_.epoch() : 0;
}

ObjecterCounters Objecter::counters() const {
  absl::MutexLock l(&mu_);
  return counters_;
}

size_t Objecter::in_flight() const {
  absl::MutexLock l(&mu_);
  return pending_->in_order.size();
}

void Objecter::HandleMap(PlacementMap map) {
  std::vector<ConnectionRef> drop;
  {
    absl::MutexLock l(&mu_);
    if (shutdown_ || (have_map_ && map.epoch() <= map_.epoch())) return;
    spdlog::debug("client: map epoch {} ({} osds, {} pgs)", map.epoch(), map.osds().size(),
                  map.pg_num());
    map_ = std::move(map);
    up_osds_ = static_cast<size_t>(std::count_if(map_.osds().begin(), map_.osds().end(),
                                                 [](const OsdEntry& e) { return e.up; }));
    pool_id_.store(map_.pool_id(), std::memory_order_relaxed);
    have_map_ = true;
    // Refusals are remembered by address: forget those of addresses no OSD has now.
    for (auto it = connect_refusals_.begin(); it != connect_refusals_.end();) {
      const bool known = std::any_of(map_.osds().begin(), map_.osds().end(),
                                     [&](const OsdEntry& e) { return e.addr == it->first; });
      it = known ? std::next(it) : connect_refusals_.erase(it);
    }
    // A session whose OSD changed address or incarnation (or vanished) is stale: drop
    // it and re-send everything that OSD had not acknowledged.
    std::vector<int> stale;
    for (auto& [osd, s] : sessions_) {
      const OsdEntry* e = map_.Find(osd);
      if (e == nullptr || (e->up && (e->addr != s->addr || e->up_from != s->up_from))) {
        stale.push_back(osd);
      }
    }
    for (int osd : stale) {
      connect_refusals_.erase(sessions_[osd]->addr);  // a new incarnation gets a new try
      if (sessions_[osd]->conn) drop.push_back(sessions_[osd]->conn);
      sessions_.erase(osd);
      spdlog::info("client: osd.{} has a new incarnation or address: re-sending its ops", osd);
      ResendAllOfOsdLocked(osd);
    }
    // Ops whose PG moved follow it; parked ops whose OSD is back go again.
    for (Op& op : pending_->in_order) {
      if (op.done) continue;
      int target = TargetLocked(op);
      if (target != op.target || (op.waiting && OsdUsableLocked(target))) ResendLocked(op.pending);
    }
  }
  for (auto& c : drop) c->MarkDown();
}

int Objecter::TargetLocked(const Op& op) const {
  if (!have_map_) return kNoOsd;
  if (op.kind == Op::Kind::kList) return op.request.osd;
  return map_.OsdOf(op.oid);
}

std::vector<int> Objecter::OsdsIn() const {
  absl::MutexLock l(&mu_);
  std::vector<int> in;
  if (!have_map_) return in;
  for (const OsdEntry& e : map_.osds()) {
    if (e.in) in.push_back(static_cast<int>(e.id));
  }
  return in;
}

PlacementMap Objecter::CurrentMap() const {
  absl::MutexLock l(&mu_);
  return map_;
}

const char* Request::KindName(Kind k) {
  switch (k) {
    case Kind::kWrite: return "write";
    case Kind::kRead: return "read";
    case Kind::kStat: return "stat";
    case Kind::kDelete: return "delete";
    case Kind::kList: return "list";
  }
  return "op";
}

bool Objecter::OsdUsableLocked(int osd) const {
  if (!have_map_ || osd == kNoOsd) return false;
  const OsdEntry* e = map_.Find(osd);
  return e != nullptr && e->up && e->in && !e->addr.empty();
}

std::string Objecter::DownReasonLocked(int osd) const {
  if (!have_map_) return "no cluster map yet";
  if (osd == kNoOsd) return "no OSD is in";
  const OsdEntry* e = map_.Find(osd);
  if (e == nullptr) return absl::StrCat("osd.", osd, " not in the map");
  if (!e->up) return absl::StrCat("osd.", osd, " down");
  if (auto r = connect_refusals_.find(e->addr); r != connect_refusals_.end()) {
    return absl::StrCat("osd.", osd, " up, but connecting to it fails: ", r->second.ToString());
  }
  return absl::StrCat("osd.", osd, " up, no reply");
}

Objecter::Session* Objecter::SessionByConnLocked(const Connection* conn) {
  for (auto& [osd, s] : sessions_) {
    if (s->conn.get() == conn) return s.get();
  }
  return nullptr;
}

void Objecter::ForgetTidsLocked(Op& op) {
  for (uint64_t k = 0; k < op.tid_count && op.unacked > 0; ++k) {
    if (by_tid_.erase(op.first_tid + k) > 0) --op.unacked;
  }
  op.tid_count = 0;
  op.unacked = 0;
}

void Objecter::ResendLocked(const OpRef& op) {
  if (op->done) return;
  ForgetTidsLocked(*op);
  if (op->attempt > 0) ++counters_.resends;
  ++op->attempt;
  op->sent_all = false;
  op->waiting = false;
  RetargetLocked(*op);
  if (!op->sending && !op->queued && !shutdown_) {
    op->queued = true;
    retry_queue_.push_back(op);
    retry_cv_.Signal();
  }
}

void Objecter::ResendAllOfOsdLocked(int osd) {
  for (Op& op : pending_->in_order) {
    if (!op.done && op.target == osd) ResendLocked(op.pending);
  }
}

void Objecter::RetargetLocked(Op& op) {
  const int to = TargetLocked(op);
  if (to == op.target) return;
  if (op.target != kNoOsd) --ops_by_osd_[op.target];
  op.target = to;
  if (to != kNoOsd) ++ops_by_osd_[to];
}

uint16_t Objecter::WriterDepthLocked(const Op& op) const {
  const auto it = ops_by_osd_.find(op.target);
  const size_t others = it == ops_by_osd_.end() || it->second == 0 ? 0 : it->second - 1;
  const size_t share = up_osds_ == 0 ? 0 : options_.queue_depth / up_osds_;
  return static_cast<uint16_t>(std::min<size_t>(std::max(others, share), 0xffff));
}

Objecter::Completion Objecter::FinishLocked(const OpRef& op,
                                            absl::StatusOr<std::string> result) {
  if (op->done) return {};
  op->done = true;
  if (op->target != kNoOsd) --ops_by_osd_[op->target];
  ForgetTidsLocked(*op);
  if (op->pending) {  // registered by Submit
    pending_->by_deadline.erase(pending_->by_deadline.iterator_to(*op));
    pending_->in_order.erase(pending_->in_order.iterator_to(*op));
    op->pending.reset();
  }
  slot_cv_.Signal();
  if (result.ok()) {
    ++counters_.ops_ok;
  } else {
    ++counters_.ops_failed;
    if (absl::IsDeadlineExceeded(result.status())) ++counters_.ops_timed_out;
  }
  return Completion(op, std::move(result));
}

void Objecter::OnMessage(const ConnectionRef& conn, Message m) {
  switch (m.type) {
    case osd::kReadReply:
    case osd::kStatReply:
    case osd::kDeleteReply:
    case osd::kListReply:
    case osd::kScrubReply:
      HandleReply(conn, m);
      break;
    default:
      spdlog::warn("client: unexpected message type {:#x} from {}", m.type, conn->peer_addr());
  }
}

void Objecter::OnReset(const ConnectionRef& conn, const absl::Status& why) {
  absl::MutexLock l(&mu_);
  Session* s = SessionByConnLocked(conn.get());
  if (s == nullptr) return;  // a connection we dropped ourselves
  int osd = s->osd;
  spdlog::warn("client: connection to osd.{} reset ({}): its ops wait and are re-sent", osd,
               why.ToString());
  sessions_.erase(osd);
  ResendAllOfOsdLocked(osd);
}

void Objecter::OnRemoteReset(const ConnectionRef& conn) {
  absl::MutexLock l(&mu_);
  Session* s = SessionByConnLocked(conn.get());
  if (s == nullptr) return;
  spdlog::info("client: osd.{} restarted (new session): re-sending its unacknowledged ops",
               s->osd);
  ResendAllOfOsdLocked(s->osd);
}

void Objecter::OnConnectRefused(const ConnectionRef& conn, const absl::Status& why) {
  Completions done;
  {
    // Kept by address: the refusal may come before Connect() has returned and the session
    // is registered. Said once per kind of failure, not on every retry.
    absl::MutexLock l(&mu_);
    absl::Status& last = connect_refusals_[conn->peer_addr()];
    const bool permanent = absl::IsFailedPrecondition(why);
    if (last.code() != why.code()) {
      spdlog::warn("client: connecting to {} failed: {}{}", conn->peer_addr(), why.ToString(),
                   permanent ? "" : " (retrying)");
    }
    last = why;
    // FAILED_PRECONDITION: the OSD can never serve this client (no common features, a
    // soft RDMA device on another host): its ops fail now with the reason, not at their
    // deadline. Nothing was delivered to it, so nothing acknowledged is at stake.
    if (permanent) {
      for (const OpRef& op : PendingOpsLocked()) {
        const OsdEntry* e = op->done ? nullptr : map_.Find(op->target);
        if (e != nullptr && e->addr == conn->peer_addr()) {
          done.push_back(FinishLocked(op, CannotServe(*op, e->addr, why)));
        }
      }
    }
  }
  RunAll(done);
}

absl::Status Objecter::CannotServe(const Op& op, const std::string& addr,
                                   const absl::Status& why) {
  return absl::Status(why.code(), absl::StrCat(op.what(), " of ", op.oid, ": osd.", op.target,
                                               " at ", addr, " cannot serve this client: ",
                                               why.message()));
}

void Objecter::RetryLoop() {
  for (;;) {
    OpRef op;
    SendPlan plan;
    {
      absl::MutexLock l(&mu_);
      while (!shutdown_ && retry_queue_.empty()) retry_cv_.Wait(&mu_);
      if (shutdown_) return;
      op = std::move(retry_queue_.front());
      retry_queue_.pop_front();
      op->queued = false;
      if (op->done || op->sending) continue;
      op->sending = true;
      plan = PlanSendLocked(op);
    }
    SendPlanned(op, std::move(plan), /*may_wait_for_session=*/true);
  }
}

void Objecter::TimerLoop() {
  absl::Time next_sweep = absl::Now() + kSweepInterval;
  Completions done;
  for (;;) {
    {
      absl::MutexLock l(&mu_);
      absl::Time wake = next_sweep;
      auto& deadlines = pending_->by_deadline;
      if (!deadlines.empty()) wake = std::min(wake, deadlines.begin()->deadline);
      if (!shutdown_) timer_cv_.WaitWithDeadline(&mu_, wake);
      if (shutdown_) return;
      absl::Time now = absl::Now();
      while (!deadlines.empty() && deadlines.begin()->deadline <= now) {
        OpRef op = deadlines.begin()->pending;
        std::string why = DownReasonLocked(op->target);
        spdlog::warn("client: {} of {} timed out ({})", op->what(), op->oid, why);
        done.push_back(FinishLocked(
            op, absl::DeadlineExceededError(absl::StrCat(
                    op->what(), " of ", op->oid, " timed out after ",
                    absl::FormatDuration(options_.op_timeout), " (", why, ")"))));
      }
      if (now >= next_sweep) {
        next_sweep = now + kSweepInterval;
        for (Op& o : pending_->in_order) {
          if (o.waiting && !o.sending && OsdUsableLocked(o.target)) ResendLocked(o.pending);
        }
      }
    }
    RunAll(done);
  }
}

}  // namespace msgr::client

// Objecter op paths: submission, sending (records and read requests), replies.
#include <algorithm>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "client/objecter.h"

#include <sched.h>
#include "client/objecter_op.h"
#include "proto/osd_protocol.h"
#include "spdlog/spdlog.h"

namespace msgr::client {
namespace {

// One WriteRecord waits at most this long for ring credit before the op re-checks
// whether it was superseded or timed out.
constexpr absl::Duration kCreditSlice = absl::Milliseconds(250);

// Transient OSD answers: the op is retried instead of failed.
bool IsRetryable(absl::StatusCode c) {
  return c == absl::StatusCode::kUnavailable || c == absl::StatusCode::kAborted;
}

Message EncodeRequest(const Request& r, uint64_t tid, uint32_t pool) {
  switch (r.kind) {
    case Request::Kind::kStat:
      return osd::Encode(osd::ObjectRequest{osd::kStat, tid, r.oid, pool});
    case Request::Kind::kDelete:
      return osd::Encode(osd::ObjectRequest{osd::kDelete, tid, r.oid, pool});
    case Request::Kind::kList:
      return osd::Encode(osd::ListRequest{tid, r.oid, r.after, r.max, pool, r.digest});
    default:
      return osd::Encode(osd::ReadRequest{tid, r.oid, r.offset, r.length, pool});
  }
}

}  // namespace

void Objecter::AsyncWrite(std::string oid, std::shared_ptr<const std::string> data,
                          WriteCallback cb) {
  const std::string_view bytes = data ? std::string_view(*data) : std::string_view();
  AsyncWriteFrom(std::move(oid), std::move(data), bytes, std::move(cb));
}

void Objecter::AsyncWrite(std::string oid, RecordBufferRef data, WriteCallback cb) {
  const std::string_view bytes = data ? data->view() : std::string_view();
  AsyncWriteFrom(std::move(oid), std::move(data), bytes, std::move(cb));
}

void Objecter::AsyncWriteFrom(std::string oid, std::shared_ptr<const void> owner,
                              std::string_view bytes, WriteCallback cb) {
  OpRef op = NewOp();
  op->kind = Op::Kind::kWrite;
  op->oid = std::move(oid);
  op->data_owner = std::move(owner);
  op->data = bytes;
  op->write_cb = std::move(cb);
  Submit(std::move(op));
}

RecordBufferRef Objecter::AllocBuffer(size_t size) { return messenger_->AllocRecordBuffer(size); }

void Objecter::AsyncRead(std::string oid, ReadCallback cb) {
  Request r;
  r.oid = std::move(oid);
  AsyncRequest(std::move(r), std::move(cb));
}

void Objecter::AsyncRequest(Request request, ReadCallback cb) {
  OpRef op = NewOp();
  op->kind = request.kind == Op::Kind::kWrite ? Op::Kind::kRead : request.kind;
  op->request = std::move(request);
  op->request.kind = op->kind;
  op->oid = op->request.oid;
  op->read_cb = std::move(cb);
  Submit(std::move(op));
}

absl::StatusOr<std::string> Objecter::Call(Request request) {
  absl::Notification n;
  absl::StatusOr<std::string> result;
  AsyncRequest(std::move(request), [&](absl::StatusOr<std::string> r) {
    result = std::move(r);
    n.Notify();
  });
  SpinWait(n);
  return result;
}

absl::Status Objecter::Write(std::string oid, std::shared_ptr<const std::string> data) {
  const std::string_view bytes = data ? std::string_view(*data) : std::string_view();
  return WriteFrom(std::move(oid), std::move(data), bytes);
}

absl::Status Objecter::Write(std::string oid, RecordBufferRef data) {
  const std::string_view bytes = data ? data->view() : std::string_view();
  return WriteFrom(std::move(oid), std::move(data), bytes);
}

absl::Status Objecter::WriteFrom(std::string oid, std::shared_ptr<const void> owner,
                                 std::string_view bytes) {
  absl::Notification n;
  absl::Status result;
  AsyncWriteFrom(std::move(oid), std::move(owner), bytes, [&](absl::Status s) {
    result = std::move(s);
    n.Notify();
  });
  SpinWait(n);
  return result;
}

void Objecter::SpinWait(const absl::Notification& n) {
  if (options_.sync_spin > absl::ZeroDuration()) {
    const absl::Time until = absl::Now() + options_.sync_spin;
    while (!n.HasBeenNotified() && absl::Now() < until) {
      if (!messenger_->Poll()) sched_yield();  // let the completer run on this core
    }
  }
  n.WaitForNotification();
}

absl::StatusOr<std::string> Objecter::Read(std::string oid) {
  Request r;
  r.oid = std::move(oid);
  return Call(std::move(r));
}

void Objecter::Submit(OpRef op) {
  Completion fail;
  bool send_now = false;
  SendPlan plan;
  {
    absl::MutexLock l(&mu_);
    op->submitted = absl::Now();
    op->deadline = op->submitted + options_.op_timeout;
    const bool list = op->kind == Op::Kind::kList;  // a prefix: may be empty
    // Another pool's oid travels qualified (placement::PoolObjectName) within kMaxOidBytes.
    const size_t max_oid = kMaxOidBytes - placement::PoolNameOverhead(pool_id());
    const bool marked = !op->oid.empty() && op->oid[0] == placement::kPoolNameMark;
    if ((op->oid.empty() && !list) || op->oid.size() > max_oid || marked) {
      op->done = true;
      fail = Completion(
          op, absl::InvalidArgumentError(
                  marked ? std::string("an object id may not start with byte 0x01")
                         : absl::StrCat("object id must be 1..", max_oid, " bytes, got ",
                                        op->oid.size())));
    } else {
      auto& pending = *pending_;
      while (!shutdown_ && pending.in_order.size() >= options_.max_in_flight &&
             options_.block_when_full && absl::Now() < op->deadline) {
        slot_cv_.WaitWithDeadline(&mu_, op->deadline);
      }
      op->id = next_op_id_++;
      op->pending = op;
      pending.in_order.push_back(*op);
      pending.by_deadline.insert(*op);
      ++counters_.ops_started;
      absl::Status refuse;
      if (shutdown_) {
        refuse = absl::CancelledError("client shutting down");
      } else if (!fenced_.ok()) {
        refuse = fenced_;
      } else if (pending.in_order.size() > options_.max_in_flight) {
        refuse = options_.block_when_full
                     ? absl::DeadlineExceededError(absl::StrCat(
                           "timed out after ", absl::FormatDuration(options_.op_timeout),
                           " waiting for one of ", options_.max_in_flight, " op slots"))
                     : absl::ResourceExhaustedError(absl::StrCat(
                           options_.max_in_flight, " ops already in flight (max_in_flight)"));
      }
      if (!refuse.ok()) {
        fail = FinishLocked(op, absl::Status(refuse.code(), absl::StrCat(op->what(), " of ",
                                                                         op->oid, ": ",
                                                                         refuse.message())));
      } else {
        op->attempt = 1;
        RetargetLocked(*op);
        // The timer wakes at least every sweep interval; it only needs a nudge when this
        // deadline comes sooner than that (short op timeouts). Waking it on every op would
        // cost a context switch per op.
        if (options_.op_timeout < kSweepInterval && &*pending.by_deadline.begin() == op.get()) {
          timer_cv_.Signal();
        }
        if (OsdUsableLocked(op->target)) {
          op->sending = true;
          // Under this lock: a write of one record takes mu_ once more, after its send.
          // Last here: planning may finish the op, which takes it out of by_deadline.
          plan = PlanSendLocked(op);
          send_now = true;
        } else {
          op->waiting = true;
        }
      }
    }
  }
  fail.Run();
  if (send_now) SendPlanned(op, std::move(plan), /*may_wait_for_session=*/false);
}

absl::StatusOr<ConnectionRef> Objecter::ConnectionFor(int osd) {
  std::string addr;
  uint64_t up_from = 0;
  {
    absl::MutexLock l(&mu_);
    auto it = sessions_.find(osd);
    if (it != sessions_.end() && it->second->conn) return it->second->conn;
    const OsdEntry* e = have_map_ ? map_.Find(osd) : nullptr;
    if (e == nullptr) return absl::UnavailableError(absl::StrCat("osd.", osd, " not in map"));
    const auto& types = e->ms_types;
    const std::string& want = options_.messenger.type;
    if (!types.empty() && std::find(types.begin(), types.end(), want) == types.end()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "osd.", osd, " does not serve ms_type ", want, " (it serves: ",
          absl::StrJoin(types, ","), ")"));
    }
    addr = e->addr;
    up_from = e->up_from;
  }
  ConnectOptions copts;
  copts.policy = Policy::Lossless();
  copts.want_ring = true;
  copts.peer = EntityName{EntityType::kOsd, static_cast<uint64_t>(osd)};  // not whoever is there now
  auto conn = messenger_->Connect(addr, copts);
  if (!conn.ok()) return conn.status();
  {
    absl::MutexLock l(&mu_);
    // A map that moved the OSD while we connected found no session to mark stale: this
    // connection goes to the old address and must not be kept.
    const OsdEntry* now = have_map_ ? map_.Find(osd) : nullptr;
    if (now != nullptr && now->addr == addr && now->up_from == up_from) {
      auto& s = sessions_[osd];
      if (s && s->conn) return s->conn;  // another thread won the race
      s = std::make_unique<Session>();
      s->osd = osd;
      s->addr = addr;
      s->up_from = up_from;
      s->conn = *conn;
      spdlog::debug("client: connecting to osd.{} at {}", osd, addr);
      return s->conn;
    }
    // The messenger hands out one connection per address: if the OSD's new incarnation
    // at the same address already has it as its session, it is in use -- keep it.
    if (SessionByConnLocked(conn->get()) != nullptr) {
      return absl::UnavailableError(
          absl::StrCat("osd.", osd, " restarted while connecting to ", addr));
    }
  }
  (*conn)->MarkDown();
  return absl::UnavailableError(
      absl::StrCat("osd.", osd, " changed address or restarted while connecting to ", addr));
}

absl::Status Objecter::ConnectAll(absl::Time deadline) {
  std::vector<int> up;
  {
    absl::MutexLock l(&mu_);
    if (!have_map_) return absl::UnavailableError("no cluster map yet");
    for (const OsdEntry& e : map_.osds()) {
      if (e.up) up.push_back(static_cast<int>(e.id));
    }
  }
  std::vector<std::pair<int, ConnectionRef>> conns;
  for (int osd : up) {
    auto c = ConnectionFor(osd);
    if (!c.ok()) return c.status();
    conns.emplace_back(osd, *c);
  }
  std::vector<std::string> waiting;
  for (;;) {
    waiting.clear();
    for (const auto& [osd, c] : conns) {
      if (!c->is_connected() || c->max_record_payload() == 0) {
        waiting.push_back(absl::StrCat("osd.", osd));
      }
    }
    if (waiting.empty()) return absl::OkStatus();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("not connected to ", absl::StrJoin(waiting, ", "), " in time"));
}

Objecter::SendPlan Objecter::PlanSendLocked(const OpRef& op) {
  SendPlan plan;
  if (op->done || shutdown_) {
    op->sending = false;
    return plan;
  }
  op->waiting = false;  // a retryable ack may have parked it while it sat in the queue
  plan.attempt = op->attempt;
  plan.target = op->target;
  if (!OsdUsableLocked(plan.target)) {  // down, out of the map, or no map: park
    op->sending = false;
    op->waiting = true;
    return plan;
  }
  // This OSD refused us for good (OnConnectRefused): fail at once, as it did then.
  auto r = connect_refusals_.find(map_.Find(plan.target)->addr);
  if (r != connect_refusals_.end() && absl::IsFailedPrecondition(r->second)) {
    op->sending = false;
    plan.failed = FinishLocked(op, CannotServe(*op, r->first, r->second));
    return plan;
  }
  plan.send = true;
  auto it = sessions_.find(plan.target);
  if (it == sessions_.end() || !it->second->conn) return plan;  // ConnectionFor, unlocked
  plan.conn = it->second->conn;
  const size_t max = op->kind == Op::Kind::kWrite ? RecordPayloadLimit(*plan.conn) : 0;
  if (op->kind != Op::Kind::kWrite || max > 0) plan.tids = TakeTidsLocked(op, max);
  return plan;
}

size_t Objecter::RecordPayloadLimit(const Connection& conn) const {
  const size_t max = conn.max_record_payload();
  return max > 0 && options_.max_record_payload > 0 ? std::min(max, options_.max_record_payload)
                                                    : max;
}

Objecter::Tids Objecter::TakeTidsLocked(const OpRef& op, size_t max_payload) {
  Tids t;
  t.first = next_tid_;
  t.max_payload = max_payload;
  if (op->kind != Op::Kind::kWrite) {
    t.count = 1;
  } else {
    // The records of one write carry consecutive tids, all taken now: the OSD tells which
    // write a later part belongs to by its tid (msg/PROTOCOL.md "Writes of several
    // records").
    t.count = op->data.empty() ? 1 : (op->data.size() + max_payload - 1) / max_payload;
    // Another pool's oid goes qualified (placement::PoolObjectName); the default pool's as
    // it is, without a copy.
    const uint32_t pool = pool_id();
    if (pool == placement::kDefaultPoolId) {
      op->wire_oid.clear();
    } else {
      op->wire_oid = placement::PoolObjectName(pool, op->oid);
    }
    ++counters_.records_sent;  // the first; SendWriteRecords counts the others
    t.depth = WriterDepthLocked(*op);
  }
  next_tid_ += t.count;
  op->first_tid = t.first;
  op->tid_count = static_cast<uint32_t>(t.count);
  op->unacked = static_cast<uint32_t>(t.count);
  for (size_t k = 0; k < t.count; ++k) by_tid_[t.first + k] = op;
  return t;
}

void Objecter::SendPlanned(const OpRef& op, SendPlan plan, bool may_wait_for_session) {
  for (;;) {
    if (!plan.send) {
      plan.failed.Run();
      return;
    }
    ConnectionRef conn = std::move(plan.conn);
    if (!conn) {
      auto c = ConnectionFor(plan.target);
      if (!c.ok()) {
        Completion f;
        {
          absl::MutexLock l(&mu_);
          op->sending = false;
          if (absl::IsFailedPrecondition(c.status())) {  // the OSD cannot serve us at all
            f = FinishLocked(op, absl::Status(c.status().code(),
                                              absl::StrCat(op->what(), " of ", op->oid, ": ",
                                                           c.status().message())));
          } else {
            op->waiting = true;
          }
        }
        f.Run();
        return;
      }
      conn = *std::move(c);
    }
    if (op->kind == Op::Kind::kWrite && plan.tids.count == 0 && !may_wait_for_session &&
        RecordPayloadLimit(*conn) == 0) {
      // The session's handshake is not done: the retry thread waits for it, not this
      // thread, which may be the messenger's own (a write chained from a callback) and
      // would hold up the handshake it waits for.
      absl::MutexLock l(&mu_);
      op->sending = false;
      if (!op->done && !op->queued && !shutdown_) {
        op->queued = true;
        retry_queue_.push_back(op);
        retry_cv_.Signal();
      }
      return;
    }
    bool sent = false;
    if (op->kind == Op::Kind::kWrite) {
      sent = SendWriteRecords(op, plan.attempt, conn, plan.tids);
    } else {
      if (plan.tids.count == 0) {  // the session was made above: take the tid now
        absl::MutexLock l(&mu_);
        if (op->done || op->attempt != plan.attempt) {
          plan = PlanSendLocked(op);
          continue;
        }
        plan.tids = TakeTidsLocked(op, 0);
      }
      sent = conn->Send(EncodeRequest(op->request, plan.tids.first, pool_id())).ok();
    }
    Completion finish;
    {
      absl::MutexLock l(&mu_);
      if (!op->done && op->attempt != plan.attempt) {  // superseded while sending
        plan = PlanSendLocked(op);
        continue;
      }
      op->sending = false;
      if (op->done) return;
      if (!sent) {
        op->waiting = true;  // retried by the next sweep or OSD event
        return;
      }
      op->sent_all = true;
      if (op->unacked == 0) finish = FinishLocked(op, std::string());  // acks raced ahead
    }
    finish.Run();
    return;
  }
}

bool Objecter::SendWriteRecords(const OpRef& op, uint64_t attempt, const ConnectionRef& conn,
                                Tids tids) {
  // Still worth sending: not finished or superseded, and its OSD not marked down (an OSD
  // that died with the map still saying up leaves us waiting for a handshake or credit
  // that will not come; once the map says down the op parks until the OSD is back,
  // instead of holding this thread -- often the retry thread -- until its deadline).
  auto current = [&]() {
    absl::MutexLock l(&mu_);
    return !op->done && !shutdown_ && op->attempt == attempt && OsdUsableLocked(op->target);
  };
  // Tids not taken with the plan: the record size is known once the handshake is done.
  if (tids.count == 0) {
    size_t max = RecordPayloadLimit(*conn);
    while (max == 0) {
      if (!current() || absl::Now() >= op->deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      max = RecordPayloadLimit(*conn);
    }
    absl::MutexLock l(&mu_);
    if (op->done || shutdown_ || op->attempt != attempt) return false;
    tids = TakeTidsLocked(op, max);
  }
  const std::string_view data = op->data;
  const size_t max = tids.max_payload;
  for (size_t i = 0; i < tids.count; ++i) {
    uint16_t depth = tids.depth;
    if (i > 0) {
      absl::MutexLock l(&mu_);
      if (op->done || shutdown_ || op->attempt != attempt) return false;
      ++counters_.records_sent;
      depth = WriterDepthLocked(*op);
    }
    RecordDesc desc;
    desc.writer_depth = depth;
    desc.oid = op->record_oid();
    desc.tid = tids.first + i;
    desc.object_offset = i * max;
    desc.flags = (i == 0 ? kRecordFlagTruncate : 0) | (i + 1 == tids.count ? kRecordFlagLast : 0);
    std::string_view chunk(data.data() + desc.object_offset,
                           std::min(max, data.size() - desc.object_offset));
    for (;;) {
      absl::Duration left = op->deadline - absl::Now();
      if (left <= absl::ZeroDuration()) return false;
      absl::Status s =
          conn->WriteRecordShared(desc, chunk, op->data_owner, std::min(left, kCreditSlice));
      if (s.ok()) break;
      if (!absl::IsDeadlineExceeded(s) || !current()) {
        if (!absl::IsDeadlineExceeded(s)) {
          spdlog::debug("client: write of {} to {}: {}", op->oid, conn->peer_addr(),
                        s.ToString());
        }
        return false;
      }
    }
  }
  return true;
}

void Objecter::OnRecordsAcked(const ConnectionRef& conn, absl::Span<const RecordAck> acks) {
  Completions done;
  {
    absl::MutexLock l(&mu_);
    if (!connect_refusals_.empty()) connect_refusals_.erase(conn->peer_addr());
    for (const RecordAck& e : acks) {
      auto it = by_tid_.find(e.tid);
      if (it == by_tid_.end()) {
        ++counters_.stale_acks;  // an older attempt, or an op already finished
        continue;
      }
      OpRef op = std::move(it->second);
      by_tid_.erase(it);
      --op->unacked;
      if (e.code != absl::StatusCode::kOk) {
        if (IsRetryable(e.code)) {
          ForgetTidsLocked(*op);
          op->waiting = !op->sending;  // swept again shortly
          ++op->attempt;
          op->sent_all = false;
          continue;
        }
        done.push_back(FinishLocked(
            op, absl::Status(e.code, absl::StrCat("write of ", op->oid, " failed on osd.",
                                                  op->target, ": ",
                                                  osd::DescribeWriteFailure(e.code)))));
      } else if (op->unacked == 0 && op->sent_all) {
        done.push_back(FinishLocked(op, std::string()));
      }
    }
  }
  RunAll(done);
}

void Objecter::HandleReply(const ConnectionRef& conn, const Message& m) {
  auto reply = osd::DecodeReply(m);
  if (!reply.ok()) {
    spdlog::warn("client: bad reply from {}: {}", conn->peer_addr(), reply.status().ToString());
    return;
  }
  Completion done;
  {
    absl::MutexLock l(&mu_);
    if (!connect_refusals_.empty()) connect_refusals_.erase(conn->peer_addr());  // it answers
    auto it = by_tid_.find(reply->tid);
    if (it == by_tid_.end()) {
      ++counters_.stale_acks;
      return;
    }
    OpRef op = it->second;
    if (IsRetryable(reply->code)) {
      ForgetTidsLocked(*op);
      op->waiting = !op->sending;
      ++op->attempt;
      return;
    }
    if (reply->code == absl::StatusCode::kNotFound && op->kind == Op::Kind::kDelete &&
        op->attempt > 1) {
      // A re-sent delete: the first attempt may have deleted the object and lost its reply.
      done = FinishLocked(op, std::string());
    } else if (reply->code != absl::StatusCode::kOk) {
      done = FinishLocked(op, absl::Status(reply->code, absl::StrCat(op->what(), " of ", op->oid,
                                                                   " on osd.", op->target,
                                                                   ": ", reply->error)));
    } else {
      done = FinishLocked(op, std::move(reply->data));
    }
  }
  done.Run();
}

}  // namespace msgr::client

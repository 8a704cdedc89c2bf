// Private to the Objecter (objecter*.cc): the state of one op and of one OSD session.
// Every field is guarded by Objecter::mu_.
#ifndef MSGR_CLIENT_OBJECTER_OP_H_
#define MSGR_CLIENT_OBJECTER_OP_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "boost/intrusive/list.hpp"
#include "boost/intrusive/set.hpp"
#include "client/objecter.h"

namespace msgr::client {

// Nothing here is allocated per op in steady state: ops come from a pool (Objecter::NewOp),
// the pending list and the deadline index are intrusive, and an attempt's tids are one
// range.
struct Objecter::Op {
  using Kind = Request::Kind;
  Kind kind = Kind::kWrite;
  uint64_t id = 0;
  std::string oid;                          // a list's prefix
  std::string wire_oid;                     // another pool's oid, qualified (writes)
  Request request;                          // everything but writes: what to ask
  // Writes: the payload, and what keeps it alive (a string, or a RecordBuffer that the
  // messenger sends from without a copy).
  std::shared_ptr<const void> data_owner;
  std::string_view data;
  WriteCallback write_cb;
  ReadCallback read_cb;
  absl::Time submitted;
  absl::Time deadline;

  int target = kNoOsd;     // OSD of the current attempt
  uint64_t attempt = 0;    // bumped by every (re)send; acks of older attempts are stale
  // The current attempt's tids: [first_tid, first_tid + tid_count), of which `unacked`
  // are still in by_tid_ (each is acknowledged once: by_tid_ forgets it then).
  uint64_t first_tid = 0;
  uint32_t tid_count = 0;
  uint32_t unacked = 0;
  bool sending = false;    // one thread plans and sends this op (PlanSendLocked)
  bool queued = false;     // in the retry queue
  bool waiting = false;    // parked until its OSD is usable again
  bool sent_all = false;   // every record/message of the current attempt was handed over
  bool done = false;       // completed; the callback ran or is about to

  // Pending (in ops_, in submission order, and in deadlines_): ops_ holds this reference.
  OpRef pending;
  boost::intrusive::list_member_hook<> pending_hook;
  boost::intrusive::set_member_hook<> deadline_hook;

  const char* what() const { return Request::KindName(kind); }
  // The name its records carry: the oid, qualified when the pool is not the default.
  std::string_view record_oid() const { return wire_oid.empty() ? oid : wire_oid; }
};

// What FinishLocked hands back, to run once mu_ is released: the op's callback with its
// result. Empty when the op had finished already.
class Objecter::Completion {
 public:
  Completion() = default;
  Completion(OpRef op, absl::StatusOr<std::string> result)
      : op_(std::move(op)), result_(std::move(result)) {}
  explicit operator bool() const { return op_ != nullptr; }
  // Calls the callback (at most once; the op is done, so no one else touches it).
  void Run() {
    if (!op_) return;
    OpRef op = std::move(op_);
    if (op->kind == Op::Kind::kWrite) {
      WriteCallback cb = std::move(op->write_cb);
      if (cb) cb(result_.status());
    } else {
      ReadCallback cb = std::move(op->read_cb);
      if (cb) cb(std::move(result_));
    }
  }

 private:
  OpRef op_;
  absl::StatusOr<std::string> result_;
};

// One attempt of an op as PlanSendLocked decided it under mu_, for SendPlanned to carry
// out unlocked. When the target's session exists and its record size is known, the tids
// are taken with the plan, so a common send takes mu_ once before it and once after.
struct Objecter::SendPlan {
  bool send = false;    // false: the op was parked or has finished (`failed` if it failed)
  Completion failed;    // to run once mu_ is released
  uint64_t attempt = 0;
  int target = kNoOsd;
  ConnectionRef conn;   // the target's session; null: ConnectionFor makes one
  Tids tids;            // tids.count == 0: not taken yet
};

// The pending ops, each in both: in submission order (re-sends go in that order, so a later
// write of an object never overtakes an earlier one) and by (deadline, id).
struct Objecter::PendingOps {
  struct ByDeadline {
    bool operator()(const Op& a, const Op& b) const {
      return a.deadline != b.deadline ? a.deadline < b.deadline : a.id < b.id;
    }
  };
  boost::intrusive::list<Op, boost::intrusive::member_hook<Op, boost::intrusive::list_member_hook<>,
                                                           &Op::pending_hook>>
      in_order;
  boost::intrusive::multiset<
      Op, boost::intrusive::member_hook<Op, boost::intrusive::set_member_hook<>, &Op::deadline_hook>,
      boost::intrusive::compare<ByDeadline>>
      by_deadline;
};

struct Objecter::Session {
  int osd = kNoOsd;
  std::string addr;
  uint64_t up_from = 0;
  ConnectionRef conn;
};

}  // namespace msgr::client

#endif  // MSGR_CLIENT_OBJECTER_OP_H_

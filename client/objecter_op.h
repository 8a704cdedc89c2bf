// Private to the Objecter (objecter*.cc): the state of one op and of one OSD session.
// Every field is guarded by Objecter::mu_.
#ifndef MSGR_CLIENT_OBJECTER_OP_H_
#define MSGR_CLIENT_OBJECTER_OP_H_

#include <cstdint>
#include <memory>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "client/objecter.h"

namespace msgr::client {

struct Objecter::Op {
  using Kind = Request::Kind;
  Kind kind = Kind::kWrite;
  uint64_t id = 0;
  std::string oid;                          // a list's prefix
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
  std::set<uint64_t> tids; // unacknowledged tids of the current attempt
  bool sending = false;    // a thread is inside SendOp for this op
  bool queued = false;     // in the retry queue
  bool waiting = false;    // parked until its OSD is usable again
  bool sent_all = false;   // every record/message of the current attempt was handed over
  bool done = false;       // completed; the callback ran or is about to

  const char* what() const { return Request::KindName(kind); }
};

struct Objecter::Session {
  int osd = kNoOsd;
  std::string addr;
  uint64_t up_from = 0;
  ConnectionRef conn;
};

}  // namespace msgr::client

#endif  // MSGR_CLIENT_OBJECTER_OP_H_

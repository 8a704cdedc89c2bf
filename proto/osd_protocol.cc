#include "proto/osd_protocol.h"

#include <cstdint>
#include <limits>
#include <vector>

#include "absl/strings/str_cat.h"
#include "msg/base/wire.h"

namespace msgr::osd {
namespace {

constexpr size_t kMaxErrorBytes = 4096;

absl::Status Malformed(const char* what) {
  return absl::InvalidArgumentError(
      absl::StrCat("malformed ", what, " message"));
}

bool ValidCode(uint32_t c) {
  return c <= static_cast<uint32_t>(absl::StatusCode::kUnauthenticated);
}

}  // namespace

Message Encode(const ReadRequest& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.PutString32(m.oid);
  if (m.offset != 0 || m.length != kToEnd || m.pool != 0) {
    w.Put(m.offset);
    w.Put(m.length);
  }
  if (m.pool != 0) w.Put(m.pool);
  return Message{kRead, std::move(out)};
}

Message Encode(const ObjectRequest& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.PutString32(m.oid);
  if (m.pool != 0) w.Put(m.pool);
  return Message{m.type, std::move(out)};
}

Message Encode(const ListRequest& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.PutString32(m.prefix);
  w.PutString32(m.after);
  w.Put(m.max);
  if (m.pool != 0) w.Put(m.pool);
  return Message{m.digest ? kScrub : kList, std::move(out)};
}

Message Encode(const PgRequest& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.Put(m.pool);
  w.Put(m.pg);
  w.Put(m.pg_num);
  w.Put(m.epoch);
  w.PutString32(m.oid);
  w.PutString32(m.data);
  return Message{m.type, std::move(out)};
}

bool IsPgRequest(uint16_t type) {
  return type == kPgQuery || type == kPgList || type == kPgPush || type == kPgActivate ||
         type == kPgRemove || type == kPgMissed;
}

absl::StatusOr<PgRequest> DecodePgRequest(const Message& m) {
  if (!IsPgRequest(m.type)) return Malformed("peering");
  WireReader r(m.payload);
  PgRequest p;
  p.type = static_cast<MsgType>(m.type);
  if (!r.Get(&p.tid) || !r.Get(&p.pool) || !r.Get(&p.pg) || !r.Get(&p.pg_num) ||
      !r.Get(&p.epoch) || !r.GetString32(kMaxOidBytes, &p.oid) ||
      !r.GetString32(m.payload.size(), &p.data) || r.remaining() != 0) {
    return Malformed("peering");
  }
  return p;
}

std::string EncodeBody(const PgInfoBody& b) {
  std::string out;
  WireWriter w(&out);
  w.Put(static_cast<uint8_t>(b.complete ? 1 : 0));
  w.Put(b.as_of_epoch);
  return out;
}

absl::StatusOr<PgInfoBody> DecodePgInfoBody(std::string_view data) {
  WireReader r(data);
  PgInfoBody b;
  uint8_t complete;
  if (!r.Get(&complete) || complete > 1 || !r.Get(&b.as_of_epoch) || r.remaining() != 0) {
    return Malformed("pg-query-reply");
  }
  b.complete = complete == 1;
  return b;
}

Message Encode(const Reply& m, MsgType type) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.Put(static_cast<uint32_t>(m.code));
  w.PutString32(std::string_view(m.error).substr(0, kMaxErrorBytes));
  w.PutString32(m.data);
  return Message{type, std::move(out)};
}

std::string EncodeBody(const StatBody& b) {
  std::string out;
  WireWriter(&out).Put(b.size);
  return out;
}

namespace {

// A count of entries, then each one's oid (length-prefixed), size and, with `digest`, crc32c:
// kPgListReply's entries and kPgMissedReply's present objects.
void PutEntries(WireWriter& w, const std::vector<ListEntry>& entries, bool digest) {
  w.Put(static_cast<uint32_t>(entries.size()));
  for (const ListEntry& e : entries) {
    w.PutString32(e.oid);
    w.Put(e.size);
    if (digest) w.Put(e.crc32c);
  }
}

// At most `max` entries. Each takes at least 12 bytes: a count beyond what the data holds
// is malformed before anything is reserved for it.
bool GetEntries(WireReader& r, bool digest, uint32_t max, std::vector<ListEntry>* entries) {
  uint32_t n;
  if (!r.Get(&n) || n > max || n > r.remaining() / 12) return false;
  entries->resize(n);
  for (ListEntry& e : *entries) {
    if (!r.GetString32(kMaxOidBytes, &e.oid) || !r.Get(&e.size) ||
        (digest && !r.Get(&e.crc32c))) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::string EncodeBody(const ListBody& b, bool digest) {
  std::string out;
  WireWriter w(&out);
  PutEntries(w, b.entries, digest);
  w.Put(static_cast<uint8_t>(b.more ? 1 : 0));
  return out;
}

absl::StatusOr<ReadRequest> DecodeReadRequest(const Message& m) {
  if (m.type != kRead) return Malformed("read");
  WireReader r(m.payload);
  ReadRequest q;
  if (!r.Get(&q.tid) || !r.GetString32(kMaxOidBytes, &q.oid) || q.oid.empty()) {
    return Malformed("read");
  }
  if (r.remaining() != 0 && (!r.Get(&q.offset) || !r.Get(&q.length))) return Malformed("read");
  if (r.remaining() != 0 && (!r.Get(&q.pool) || q.pool == 0)) return Malformed("read");
  if (r.remaining() != 0) return Malformed("read");
  return q;
}

absl::StatusOr<ObjectRequest> DecodeObjectRequest(const Message& m) {
  if (m.type != kStat && m.type != kDelete) return Malformed("stat/delete");
  WireReader r(m.payload);
  ObjectRequest q;
  q.type = static_cast<MsgType>(m.type);
  if (!r.Get(&q.tid) || !r.GetString32(kMaxOidBytes, &q.oid) || q.oid.empty() ||
      (r.remaining() != 0 && (!r.Get(&q.pool) || q.pool == 0)) || r.remaining() != 0) {
    return Malformed(m.type == kStat ? "stat" : "delete");
  }
  return q;
}

absl::StatusOr<ListRequest> DecodeListRequest(const Message& m) {
  if (m.type != kList && m.type != kScrub) return Malformed("list");
  WireReader r(m.payload);
  ListRequest q;
  q.digest = m.type == kScrub;
  if (!r.Get(&q.tid) || !r.GetString32(kMaxOidBytes, &q.prefix) ||
      !r.GetString32(kMaxOidBytes, &q.after) || !r.Get(&q.max) ||
      (r.remaining() != 0 && (!r.Get(&q.pool) || q.pool == 0)) || r.remaining() != 0) {
    return Malformed("list");
  }
  return q;
}

bool IsReply(uint16_t type) {
  return type == kReadReply || type == kStatReply || type == kDeleteReply ||
         type == kListReply || type == kScrubReply || type == kPgQueryReply ||
         type == kPgListReply || type == kPgPushReply || type == kPgActivateReply ||
         type == kPgRemoveReply || type == kPgMissedReply;
}

absl::StatusOr<Reply> DecodeReply(const Message& m) {
  if (!IsReply(m.type)) return Malformed("reply");
  WireReader r(m.payload);
  Reply p;
  uint32_t code;
  if (!r.Get(&p.tid) || !r.Get(&code) || !ValidCode(code) ||
      !r.GetString32(kMaxErrorBytes, &p.error) ||
      !r.GetString32(m.payload.size(), &p.data) || r.remaining() != 0) {
    return Malformed("reply");
  }
  p.code = static_cast<absl::StatusCode>(code);
  return p;
}

absl::StatusOr<ReadReply> DecodeReadReply(const Message& m) {
  if (m.type != kReadReply) return Malformed("read-reply");
  auto p = DecodeReply(m);
  if (!p.ok()) return Malformed("read-reply");
  return p;
}

absl::StatusOr<StatBody> DecodeStatBody(std::string_view data) {
  WireReader r(data);
  StatBody b;
  if (!r.Get(&b.size) || r.remaining() != 0) return Malformed("stat-reply");
  return b;
}

absl::StatusOr<ListBody> DecodeListBody(std::string_view data, bool digest) {
  WireReader r(data);
  ListBody b;
  if (!GetEntries(r, digest, std::numeric_limits<uint32_t>::max(), &b.entries)) return Malformed("list-reply");
  uint8_t more;
  if (!r.Get(&more) || more > 1 || r.remaining() != 0) return Malformed("list-reply");
  b.more = more == 1;
  return b;
}

namespace {

// A count of strings, then each (length-prefixed); at most kMaxMissedObjects.
void PutNames(WireWriter& w, const std::vector<std::string>& names) {
  w.Put(static_cast<uint32_t>(names.size()));
  for (const std::string& n : names) w.PutString32(n);
}

bool GetNames(WireReader& r, std::vector<std::string>* names) {
  uint32_t n;
  // Each name takes at least its 4-byte length: a count beyond what is left is malformed
  // before anything is reserved for it.
  if (!r.Get(&n) || n > kMaxMissedObjects || n > r.remaining() / 4) return false;
  names->resize(n);
  for (std::string& s : *names) {
    if (!r.GetString32(kMaxOidBytes, &s)) return false;
  }
  return true;
}

}  // namespace

std::string EncodeBody(const PgMissedQuery& b) {
  std::string out;
  WireWriter w(&out);
  w.Put(b.as_of_epoch);
  PutNames(w, b.candidates);
  return out;
}

absl::StatusOr<PgMissedQuery> DecodePgMissedQuery(std::string_view data) {
  WireReader r(data);
  PgMissedQuery b;
  if (!r.Get(&b.as_of_epoch) || !GetNames(r, &b.candidates) || r.remaining() != 0) {
    return Malformed("pg-missed");
  }
  return b;
}

std::string EncodeBody(const PgMissedBody& b) {
  std::string out;
  WireWriter w(&out);
  w.Put(static_cast<uint8_t>(b.known ? 1 : 0));
  w.PutString32(std::string_view(b.why).substr(0, kMaxErrorBytes));
  PutEntries(w, b.present, /*digest=*/false);
  PutNames(w, b.absent);
  return out;
}

absl::StatusOr<PgMissedBody> DecodePgMissedBody(std::string_view data) {
  WireReader r(data);
  PgMissedBody b;
  uint8_t known;
  if (!r.Get(&known) || known > 1 || !r.GetString32(kMaxErrorBytes, &b.why) ||
      !GetEntries(r, /*digest=*/false, kMaxMissedObjects, &b.present) ||
      !GetNames(r, &b.absent) || r.remaining() != 0) {
    return Malformed("pg-missed-reply");
  }
  b.known = known == 1;
  return b;
}

std::string DescribeWriteFailure(absl::StatusCode code) {
  switch (code) {
    case absl::StatusCode::kResourceExhausted:
      return "the OSD is full (out of disk space or over its configured capacity)";
    case absl::StatusCode::kDataLoss:
      return "the OSD's store failed to write or flush (I/O error; see its log)";
    case absl::StatusCode::kInvalidArgument:
      return "the OSD rejected the record (see its log)";
    default:
      return absl::StrCat("the OSD failed the write: ", absl::StatusCodeToString(code),
                          " (see its log)");
  }
}

}  // namespace msgr::osd

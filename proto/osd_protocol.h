// Messages between clients and OSDs (above the messenger). Object writes do not appear
// here: they travel as receive-ring records (msg/ring/ring_format.h) and are acknowledged
// by the messenger itself (ring credit = ack, failures with a status code: see
// Connection::ReleaseRing and Dispatcher::OnRecordsAcked). Everything else is a small Message whose payload is encoded below
// (fixed little-endian fields, then length-prefixed strings). Decoders reject short or
// oversized input with an error instead of reading past the end.
#ifndef MSGR_PROTO_OSD_PROTOCOL_H_
#define MSGR_PROTO_OSD_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "msg/messenger.h"

namespace msgr::osd {

// Requests (client -> OSD) and their replies (OSD -> client): reply type = request + 1.
enum MsgType : uint16_t {
  kRead = 0x101,  // an object's bytes, or a range of them
  kReadReply = 0x102,
  kStat = 0x103,  // an object's size
  kStatReply = 0x104,
  kDelete = 0x105,  // delete an object; replied once the delete is durable
  kDeleteReply = 0x106,
  kList = 0x107,  // one page of the objects an OSD holds
  kListReply = 0x108,
  kScrub = 0x109,  // a list page whose entries carry each object's crc32c (a scrub)
  kScrubReply = 0x10a,
  // OSD to OSD only (peering and recovery, osd_sim/peering.h); PgRequest.
  kPgQuery = 0x10b,  // is your copy of a PG complete, and as of which map epoch?
  kPgQueryReply = 0x10c,
  kPgList = 0x10d,  // a page of a PG's objects with size and crc32c
  kPgListReply = 0x10e,
  kPgPush = 0x10f,  // store this whole object (replacing any copy)
  kPgPushReply = 0x110,
  kPgActivate = 0x111,  // your copy of the PG is now complete (the primary synced it)
  kPgActivateReply = 0x112,
  kPgRemove = 0x113,  // drop your (stray) copy of a PG: its members are all up and complete
  kPgRemoveReply = 0x114,
  // What did I miss of this PG while you led it, and which of these objects do you hold?
  // (a primary returning to a PG it led before; PgMissedQuery / PgMissedBody). An OSD of a
  // build before it does not answer: the asker's timeout sends it to the whole-copy compare.
  kPgMissed = 0x115,
  kPgMissedReply = 0x116,
};

inline constexpr uint64_t kToEnd = UINT64_MAX;  // a read length: to the object's end

// Pools: every request names its pool (proto/placement.h); the default pool is id 0. The
// pool id is a trailing u32 written only when it is not 0, so a message of a build
// before pools is a request on the default pool, and a default-pool request is encoded
// as it always was. A read of another pool always carries the range fields before it.
// Writes (ring records) name the pool in the record's oid: placement::PoolObjectName.

// A read of bytes [offset, offset + length) of `oid`, cut at its end. The wire form of
// a whole-object read (offset 0, kToEnd) is the one builds before ranges sent: tid and oid
// only; the range fields follow otherwise.
struct ReadRequest {
  uint64_t tid = 0;
  std::string oid;
  uint64_t offset = 0;
  uint64_t length = kToEnd;
  uint32_t pool = 0;
};

// A stat or a delete of one object (`type` kStat or kDelete).
struct ObjectRequest {
  MsgType type = kStat;
  uint64_t tid = 0;
  std::string oid;
  uint32_t pool = 0;
};

// Up to `max` objects whose id starts with `prefix`, after `after` in byte order.
// `digest`: sent as kScrub, the OSD reads every listed object and adds its crc32c.
struct ListRequest {
  uint64_t tid = 0;
  std::string prefix;
  std::string after;
  uint32_t max = 1000;
  uint32_t pool = 0;  // the listing covers this pool only
  bool digest = false;
};
inline constexpr uint32_t kMaxListPage = 1000;  // the OSD caps `max` at this
inline constexpr uint32_t kMaxScrubPage = 64;   // and a digest page's at this (it reads them)

// A peering request (kPg*), from one OSD to another. Fields a type does not use are 0 or
// empty: kPgQuery pool+pg; kPgList pool+pg+pg_num+after (a page of kMaxScrubPage);
// kPgPush pool+oid+data; kPgActivate pool+pg+epoch; kPgRemove pool+pg+epoch;
// kPgMissed pool+pg+pg_num+epoch (the asker's map) + data (EncodeBody(PgMissedQuery)).
struct PgRequest {
  MsgType type = kPgQuery;
  uint64_t tid = 0;
  uint32_t pool = 0;
  uint32_t pg = 0;
  uint32_t pg_num = 0;
  uint64_t epoch = 0;
  std::string oid;   // kPgList: list after this oid; kPgPush: the object
  std::string data;  // kPgPush: the object's bytes
};
// kPgQueryReply's body.
struct PgInfoBody {
  bool complete = false;     // the copy has every acknowledged write of the PG now
  uint64_t as_of_epoch = 0;  // the last map epoch it was known to (0: never)
};

// Every reply: the request's tid, a status, and a body that depends on the request:
// read: the bytes; stat: StatBody; delete: empty; list: ListBody.
struct Reply {
  uint64_t tid = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string error;
  std::string data;
};
using ReadReply = Reply;

struct StatBody {
  uint64_t size = 0;
};

struct ListEntry {
  std::string oid;
  uint64_t size = 0;
  uint32_t crc32c = 0;  // of the object's bytes; kScrubReply only
};
struct ListBody {
  std::vector<ListEntry> entries;  // in byte order of oid
  bool more = false;               // the OSD has more after the last entry
};

// kPgMissed's request body: the asker's copy of the PG was complete as of `as_of_epoch`;
// `candidates` are objects it may hold in a version of its own (its watermark,
// osd_sim/pg_log.h), whose presence and size it wants too.
struct PgMissedQuery {
  uint64_t as_of_epoch = 0;
  std::vector<std::string> candidates;
};
inline constexpr uint32_t kMaxMissedObjects = 16384;  // per query, and per reply list
// kPgMissedReply's body. `known`: the answerer's PG log knows what the asker missed; then
// every object of (what it missed) and (the candidates) is in `present` (with its size
// there) or in `absent` (deleted or never written there). Not known: `why`, nothing else.
struct PgMissedBody {
  bool known = false;
  std::string why;
  std::vector<ListEntry> present;  // oid and size (no crc)
  std::vector<std::string> absent;
};

Message Encode(const ReadRequest& m);
Message Encode(const ObjectRequest& m);
Message Encode(const ListRequest& m);
Message Encode(const PgRequest& m);
// `type`: the reply's message type (the request's type + 1).
Message Encode(const Reply& m, MsgType type = kReadReply);
std::string EncodeBody(const StatBody& b);
std::string EncodeBody(const PgInfoBody& b);
// `digest`: the kScrubReply form (each entry's crc32c after its size).
std::string EncodeBody(const ListBody& b, bool digest = false);
std::string EncodeBody(const PgMissedQuery& b);
std::string EncodeBody(const PgMissedBody& b);

absl::StatusOr<ReadRequest> DecodeReadRequest(const Message& m);
absl::StatusOr<ObjectRequest> DecodeObjectRequest(const Message& m);
absl::StatusOr<ListRequest> DecodeListRequest(const Message& m);
absl::StatusOr<PgRequest> DecodePgRequest(const Message& m);
absl::StatusOr<PgInfoBody> DecodePgInfoBody(std::string_view data);
bool IsPgRequest(uint16_t type);
// A reply of any of the reply types.
absl::StatusOr<Reply> DecodeReply(const Message& m);
// A kReadReply only.
absl::StatusOr<ReadReply> DecodeReadReply(const Message& m);
absl::StatusOr<StatBody> DecodeStatBody(std::string_view data);
absl::StatusOr<ListBody> DecodeListBody(std::string_view data, bool digest = false);
absl::StatusOr<PgMissedQuery> DecodePgMissedQuery(std::string_view data);
absl::StatusOr<PgMissedBody> DecodePgMissedBody(std::string_view data);

bool IsReply(uint16_t type);

// What a client tells its user when an OSD failed a write with `code` (the OSD logs the
// details): e.g. kResourceExhausted -> "... is full ...".
std::string DescribeWriteFailure(absl::StatusCode code);

}  // namespace msgr::osd

#endif  // MSGR_PROTO_OSD_PROTOCOL_H_

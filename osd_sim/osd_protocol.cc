#include "osd_sim/osd_protocol.h"

#include "absl/strings/str_cat.h"
#include "msg/wire.h"

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

Message Encode(const WriteAck& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.map_epoch);
  w.Put(static_cast<uint32_t>(m.entries.size()));
  for (const auto& e : m.entries) {
    w.Put(e.tid);
    w.Put(static_cast<uint32_t>(e.code));
    w.PutString32(std::string_view(e.error).substr(0, kMaxErrorBytes));
  }
  return Message{kWriteAck, std::move(out)};
}

Message Encode(const ReadRequest& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.PutString32(m.oid);
  return Message{kRead, std::move(out)};
}

Message Encode(const ReadReply& m) {
  std::string out;
  WireWriter w(&out);
  w.Put(m.tid);
  w.Put(static_cast<uint32_t>(m.code));
  w.PutString32(std::string_view(m.error).substr(0, kMaxErrorBytes));
  w.PutString32(m.data);
  return Message{kReadReply, std::move(out)};
}

absl::StatusOr<WriteAck> DecodeWriteAck(const Message& m) {
  if (m.type != kWriteAck) return Malformed("write-ack");
  WireReader r(m.payload);
  WriteAck a;
  uint32_t n;
  if (!r.Get(&a.map_epoch) || !r.Get(&n) || n > m.payload.size() / 16) {
    return Malformed("write-ack");
  }
  a.entries.resize(n);
  for (auto& e : a.entries) {
    uint32_t code;
    if (!r.Get(&e.tid) || !r.Get(&code) || !ValidCode(code) ||
        !r.GetString32(kMaxErrorBytes, &e.error)) {
      return Malformed("write-ack");
    }
    e.code = static_cast<absl::StatusCode>(code);
  }
  if (r.remaining() != 0) return Malformed("write-ack");
  return a;
}

absl::StatusOr<ReadRequest> DecodeReadRequest(const Message& m) {
  if (m.type != kRead) return Malformed("read");
  WireReader r(m.payload);
  ReadRequest q;
  if (!r.Get(&q.tid) || !r.GetString32(kMaxOidBytes, &q.oid) || q.oid.empty() ||
      r.remaining() != 0) {
    return Malformed("read");
  }
  return q;
}

absl::StatusOr<ReadReply> DecodeReadReply(const Message& m) {
  if (m.type != kReadReply) return Malformed("read-reply");
  WireReader r(m.payload);
  ReadReply p;
  uint32_t code;
  if (!r.Get(&p.tid) || !r.Get(&code) || !ValidCode(code) ||
      !r.GetString32(kMaxErrorBytes, &p.error) ||
      !r.GetString32(m.payload.size(), &p.data) || r.remaining() != 0) {
    return Malformed("read-reply");
  }
  p.code = static_cast<absl::StatusCode>(code);
  return p;
}

}  // namespace msgr::osd

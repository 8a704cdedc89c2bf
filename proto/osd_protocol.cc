#include "proto/osd_protocol.h"

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

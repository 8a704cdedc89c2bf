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
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "msg/messenger.h"

namespace msgr::osd {

enum MsgType : uint16_t {
  kRead = 0x101,       // client -> OSD: read a whole object
  kReadReply = 0x102,  // OSD -> client
};

struct ReadRequest {
  uint64_t tid = 0;
  std::string oid;
};

struct ReadReply {
  uint64_t tid = 0;
  absl::StatusCode code = absl::StatusCode::kOk;
  std::string error;
  std::string data;
};

Message Encode(const ReadRequest& m);
Message Encode(const ReadReply& m);

absl::StatusOr<ReadRequest> DecodeReadRequest(const Message& m);
absl::StatusOr<ReadReply> DecodeReadReply(const Message& m);

// What a client tells its user when an OSD failed a write with `code` (the OSD logs the
// details): e.g. kResourceExhausted -> "... is full ...".
std::string DescribeWriteFailure(absl::StatusCode code);

}  // namespace msgr::osd

#endif  // MSGR_PROTO_OSD_PROTOCOL_H_

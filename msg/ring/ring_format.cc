#include "msg/ring/ring_format.h"

#include <cstring>

#include "msg/base/crc32c.h"

namespace msgr {

uint32_t RecordHeaderCrc(const RecordHeader& h) {
  return Crc32c(0, &h, offsetof(RecordHeader, header_crc));
}

uint32_t RecordPayloadCrc(const void* oid, size_t oid_len, const void* payload, size_t len) {
  return Crc32c(Crc32c(0, oid, oid_len), payload, len);
}

void FillRecordHeader(RecordHeader* h, RecordType type, uint16_t flags, uint64_t seq,
                      uint16_t oid_len, uint32_t payload_len, uint32_t payload_crc,
                      uint64_t client_id, uint64_t tid, uint64_t object_offset,
                      uint16_t writer_depth) {
  std::memset(h, 0, sizeof(*h));
  h->magic = kRecordMagic;
  h->version = kRecordVersion;
  h->type = type;
  h->flags = static_cast<uint16_t>(flags & ~kRecordFlagAlignedPayload);
  if (type == RecordType::kWrite && IsAlignedRecord(payload_len)) {
    h->flags |= kRecordFlagAlignedPayload;
  }
  h->seq = seq;
  h->record_bytes = static_cast<uint32_t>(RecordBytes(oid_len, payload_len));
  h->oid_len = oid_len;
  h->payload_len = payload_len;
  h->payload_crc = payload_crc;
  h->client_id = client_id;
  h->tid = tid;
  h->object_offset = object_offset;
  h->writer_depth = writer_depth;
  h->header_crc = RecordHeaderCrc(*h);
}

}  // namespace msgr

#include "osd_sim/store/record.h"

#include "msg/base/crc32c.h"

namespace msgr::store {

uint32_t PayloadCrc(std::string_view oid, const void* payload, size_t len) {
  return Crc32c(Crc32c(0, oid.data(), oid.size()), payload, len);
}
namespace {

uint32_t ComputeHeaderCrc(RecordHeader h, std::string_view oid, uint64_t apply_seq) {
  h.header_crc = 0;
  uint32_t crc = Crc32c(0, &h, sizeof(h));
  if ((h.flags & kRecordRelocated) != 0) crc = Crc32c(crc, &apply_seq, sizeof(apply_seq));
  return Crc32c(crc, oid.data(), oid.size());
}

}  // namespace

RecordHeader MakeRecordHeader(std::string_view oid, uint64_t seq, uint64_t object_off,
                              uint64_t payload_len, uint32_t payload_crc, uint32_t flags,
                              uint32_t write_id, uint64_t apply_seq) {
  RecordHeader h{};
  h.magic = kRecordMagic;
  h.version = kRecordVersion;
  h.oid_len = static_cast<uint16_t>(oid.size());
  h.flags = flags;
  h.payload_crc = payload_crc;
  h.seq = seq;
  h.object_off = object_off;
  h.payload_len = payload_len;
  h.write_id = write_id;
  h.header_crc = ComputeHeaderCrc(h, oid, apply_seq);
  return h;
}

bool HeaderShapeValid(const RecordHeader& h) {
  return h.magic == kRecordMagic && h.version == kRecordVersion && h.oid_len >= 1 &&
         h.oid_len <= kMaxOidBytes && (h.flags & ~kKnownRecordFlags) == 0 &&
         h.payload_len <= kMaxPayloadBytes &&
         ((h.flags & kContinued) == 0 || h.write_id != 0) &&
         ((h.flags & kRecordRelocated) == 0 || (h.flags & kContinued) == 0) &&
         h.object_off <= UINT64_MAX - h.payload_len;
}

bool HeaderCrcValid(const RecordHeader& h, std::string_view oid, uint64_t apply_seq) {
  if ((h.flags & kRecordRelocated) != 0 && apply_seq >= h.seq) return false;
  return HeaderShapeValid(h) && oid.size() == h.oid_len &&
         ComputeHeaderCrc(h, oid, apply_seq) == h.header_crc;
}

}  // namespace msgr::store

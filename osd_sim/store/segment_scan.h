// Recovery scan of one segment file: finds every valid record and classifies the rest.
//
// A record is valid when its header shape and header_crc check out, it lies wholly
// inside the file, its payload matches payload_crc, and its seq is above every seq
// accepted before it (a relocated record's apply seq is below its own seq, and is not
// compared with other records': copies of old writes sit among new ones). Anything else is skipped:
//  * skipped bytes followed by a valid record are "corrupt" (a bit flip, or a
//    write that never completed while a later one did — never acknowledged in
//    durable mode, because a flush acknowledges only writes that had completed);
//  * skipped bytes with no valid record after them are the "torn tail".
// After an invalid header the scan resynchronises on the next kRecordAlign-aligned
// magic number whose header is intact (a record whose payload is then bad is skipped by
// its length and named in corrupt_oids, like one met in sequence). Zero bytes are not damage where the format
// allows them: up to the next kDirectAlign boundary before an aligned record (padding),
// and from the last valid record to the end of the file (preallocated, never written:
// "free"). Holes and unwritten extents are skipped without being read (SEEK_DATA).
// Thread-compatible: scan a file nobody is writing.
#ifndef MSGR_OSD_SIM_STORE_SEGMENT_SCAN_H_
#define MSGR_OSD_SIM_STORE_SEGMENT_SCAN_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "osd_sim/store/record.h"
#include "osd_sim/store/segment_file.h"

namespace msgr::store {

struct ScannedRecord {
  RecordHeader header{};
  std::string oid;
  uint64_t pos = 0;  // record start in the segment
  // The seq the write takes effect at: header.seq, or a relocated record's apply seq
  // (record.h), which is below header.seq and need not grow from record to record.
  uint64_t apply_seq = 0;
};

struct SegmentScan {
  std::vector<ScannedRecord> records;  // valid records, in file order
  uint64_t file_size = 0;
  uint64_t valid_end = 0;        // end of the last valid record (0 if none): appends go here
  uint64_t last_seq = 0;         // highest valid seq (the min_seq passed in if none)
  uint64_t corrupt_records = 0;  // skipped stretches (or records) with valid data after
  uint64_t corrupt_bytes = 0;
  uint64_t torn_records = 0;     // 1 if there is a torn tail, plus any complete-header
  uint64_t torn_bytes = 0;       //   records in it with a bad payload
  uint64_t free_bytes = 0;       // all-zero bytes after valid_end (not torn)
  std::vector<std::string> corrupt_oids;  // oids of skipped records whose header was intact
};

// Scans `file`; `min_seq` is the highest seq accepted in earlier segments.
absl::StatusOr<SegmentScan> ScanSegment(const SegmentFile& file, uint64_t min_seq);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_SEGMENT_SCAN_H_

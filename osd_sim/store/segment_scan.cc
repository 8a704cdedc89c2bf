#include "osd_sim/store/segment_scan.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "msg/base/crc32c.h"

namespace msgr::store {
namespace {

constexpr size_t kScanChunk = 1 << 20;

enum class Verdict { kValid, kBadPayload, kInvalid };

struct Probe {
  Verdict verdict = Verdict::kInvalid;
  ScannedRecord rec;
  uint64_t bytes = 0;  // record length (kValid / kBadPayload)
};

// Reads and checks the record at `pos`. I/O errors other than end-of-file propagate.
absl::StatusOr<Probe> ProbeRecord(const SegmentFile& f, uint64_t pos, uint64_t size,
                                  uint64_t last_seq, std::string& buf) {
  Probe p;
  if (size - pos < sizeof(RecordHeader)) return p;
  RecordHeader& h = p.rec.header;
  if (absl::Status s = f.ReadFull(pos, &h, sizeof(h)); !s.ok()) return s;
  if (!HeaderShapeValid(h)) return p;
  const uint64_t bytes = RecordBytes(h.oid_len, h.payload_len, h.flags);
  if (bytes > size - pos) return p;  // runs past the end: torn (or garbage lengths)
  p.rec.apply_seq = h.seq;
  if ((h.flags & kRecordRelocated) != 0) {
    if (absl::Status s = f.ReadFull(pos + sizeof(h), &p.rec.apply_seq, kApplySeqBytes); !s.ok()) {
      return s;
    }
  }
  p.rec.oid.resize(h.oid_len);
  if (absl::Status s = f.ReadFull(pos + HeaderBytes(h.flags), p.rec.oid.data(), h.oid_len);
      !s.ok()) {
    return s;
  }
  if (!HeaderCrcValid(h, p.rec.oid, p.rec.apply_seq) || h.seq <= last_seq) return p;
  p.bytes = bytes;
  p.rec.pos = pos;
  uint32_t crc = Crc32c(0, p.rec.oid.data(), p.rec.oid.size());  // see record.h
  uint64_t at = pos + PayloadOffset(h.oid_len, h.flags);
  for (uint64_t left = h.payload_len; left > 0;) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(left, kScanChunk));
    buf.resize(n);
    if (absl::Status s = f.ReadFull(at, buf.data(), n); !s.ok()) return s;
    crc = Crc32c(crc, buf.data(), n);
    at += n;
    left -= n;
  }
  p.verdict = crc == h.payload_crc ? Verdict::kValid : Verdict::kBadPayload;
  return p;
}

bool AllZero(const char* p, size_t n) {
  for (; n > 0 && (reinterpret_cast<uintptr_t>(p) & 7) != 0; --n) {
    if (*p++ != 0) return false;
  }
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof(w));
    if (w != 0) return false;
  }
  for (; n > 0; --n) {
    if (*p++ != 0) return false;
  }
  return true;
}

struct Resynced {
  std::optional<uint64_t> next;  // first record after the skip start (see Resync)
  bool all_zero = true;          // every byte from the skip start to `next` (or EOF) is 0
};

// Finds the first kRecordAlign-aligned position > `skip` holding a fully valid record or
// one whose header is intact and only its payload bad (the caller skips that one by its
// length and names its oid), and whether the bytes skipped on the way are all zero.
// Holes and unwritten (preallocated) extents are stepped over with SEEK_DATA without
// reading them.
absl::StatusOr<Resynced> Resync(const SegmentFile& f, uint64_t skip, uint64_t size,
                                uint64_t last_seq, std::string& buf) {
  Resynced out;
  std::string chunk;
  uint64_t base = skip;
  while (base < size) {
    absl::StatusOr<uint64_t> data = f.SeekData(base);
    if (!data.ok()) return data.status();
    if (*data >= size) break;  // only holes from here on
    base = *data;
    absl::StatusOr<uint64_t> hole = f.SeekHole(base);  // read data ranges only
    if (!hole.ok()) return hole.status();
    const uint64_t data_end = std::min(size, std::max(*hole, base + kRecordAlign));
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kScanChunk, data_end - base));
    chunk.resize(n);
    if (absl::Status s = f.ReadFull(base, chunk.data(), n); !s.ok()) return s;
    const uint64_t first = std::max<uint64_t>(AlignUp(skip + 1, kRecordAlign), base);
    for (uint64_t at = AlignUp(first, kRecordAlign); at + sizeof(uint32_t) <= base + n; at += kRecordAlign) {
      uint32_t magic;
      std::memcpy(&magic, chunk.data() + (at - base), sizeof(magic));
      if (magic != kRecordMagic) continue;
      absl::StatusOr<Probe> p = ProbeRecord(f, at, size, last_seq, buf);
      if (!p.ok()) return p.status();
      if (p->verdict != Verdict::kInvalid) {
        out.next = at;
        if (out.all_zero) out.all_zero = AllZero(chunk.data(), static_cast<size_t>(at - base));
        return out;
      }
    }
    if (out.all_zero) out.all_zero = AllZero(chunk.data(), n);
    base += n;
  }
  return out;
}

}  // namespace

absl::StatusOr<SegmentScan> ScanSegment(const SegmentFile& file, uint64_t min_seq) {
  SegmentScan scan;
  absl::StatusOr<uint64_t> size = file.Size();
  if (!size.ok()) return size.status();
  scan.file_size = *size;
  scan.last_seq = min_seq;
  std::string buf;
  // Skipped since the last valid record: decided corrupt or torn once we know
  // whether a valid record follows.
  uint64_t skipped_records = 0;
  bool skipped_all_zero = true;  // and every skipped byte was zero
  std::vector<std::string> skipped_oids;
  uint64_t pos = 0;
  while (pos < scan.file_size) {
    absl::StatusOr<Probe> p = ProbeRecord(file, pos, scan.file_size, scan.last_seq, buf);
    if (!p.ok()) return p.status();
    if (p->verdict == Verdict::kValid) {
      if (skipped_records > 0) {
        scan.corrupt_records += skipped_records;
        scan.corrupt_bytes += pos - scan.valid_end;
        for (std::string& oid : skipped_oids) scan.corrupt_oids.push_back(std::move(oid));
        skipped_records = 0;
        skipped_all_zero = true;
        skipped_oids.clear();
      }
      scan.last_seq = p->rec.header.seq;
      pos += p->bytes;
      scan.valid_end = pos;
      scan.records.push_back(std::move(p->rec));
      continue;
    }
    if (p->verdict == Verdict::kBadPayload) {
      // The header is vouched for by its crc, so its length is trustworthy.
      ++skipped_records;
      skipped_all_zero = false;
      skipped_oids.push_back(p->rec.oid);
      pos += p->bytes;
      continue;
    }
    absl::StatusOr<Resynced> next = Resync(file, pos, scan.file_size, scan.last_seq, buf);
    if (!next.ok()) return next.status();
    if (!next->all_zero) skipped_all_zero = false;
    if (!next->next.has_value()) break;
    const uint64_t at = *next->next;
    // Zeros from a record's end to the next kDirectAlign boundary, where an aligned
    // record starts, are padding, not damage.
    const bool padding = skipped_records == 0 && next->all_zero && pos == scan.valid_end &&
                         at == AlignUp(pos, kDirectAlign);
    if (!padding) ++skipped_records;
    pos = at;
  }
  if (scan.file_size > scan.valid_end) {
    if (skipped_records == 0 && skipped_all_zero) {
      // Zeros to the end of the file: preallocated space nobody wrote yet.
      scan.free_bytes = scan.file_size - scan.valid_end;
    } else {
      scan.torn_records = std::max<uint64_t>(skipped_records, 1);
      scan.torn_bytes = scan.file_size - scan.valid_end;
    }
  }
  return scan;
}

}  // namespace msgr::store

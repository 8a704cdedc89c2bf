#include "osd_sim/store/segment_scan.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "msg/crc32c.h"

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
  const uint64_t bytes = RecordBytes(h.oid_len, h.payload_len);
  if (bytes > size - pos) return p;  // runs past the end: torn (or garbage lengths)
  p.rec.oid.resize(h.oid_len);
  if (absl::Status s = f.ReadFull(pos + sizeof(h), p.rec.oid.data(), h.oid_len); !s.ok()) return s;
  if (!HeaderCrcValid(h, p.rec.oid) || h.seq <= last_seq) return p;
  p.bytes = bytes;
  p.rec.pos = pos;
  uint32_t crc = Crc32c(0, p.rec.oid.data(), p.rec.oid.size());  // see record.h
  uint64_t at = pos + sizeof(h) + h.oid_len;
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

// Finds the first aligned position >= `from` holding a fully valid record.
absl::StatusOr<std::optional<uint64_t>> Resync(const SegmentFile& f, uint64_t from, uint64_t size,
                                               uint64_t last_seq, std::string& buf) {
  from = (from + kRecordAlign - 1) / kRecordAlign * kRecordAlign;
  std::string chunk;
  for (uint64_t base = from; base + sizeof(RecordHeader) <= size; base += kScanChunk) {
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kScanChunk, size - base));
    chunk.resize(n);
    if (absl::Status s = f.ReadFull(base, chunk.data(), n); !s.ok()) return s;
    for (size_t i = 0; i + sizeof(uint32_t) <= n; i += kRecordAlign) {
      uint32_t magic;
      std::memcpy(&magic, chunk.data() + i, sizeof(magic));
      if (magic != kRecordMagic) continue;
      absl::StatusOr<Probe> p = ProbeRecord(f, base + i, size, last_seq, buf);
      if (!p.ok()) return p.status();
      if (p->verdict == Verdict::kValid) return std::optional<uint64_t>(base + i);
    }
  }
  return std::optional<uint64_t>();
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
        skipped_oids.clear();
      }
      scan.last_seq = p->rec.header.seq;
      pos += p->bytes;
      scan.valid_end = pos;
      scan.records.push_back(std::move(p->rec));
      continue;
    }
    ++skipped_records;
    if (p->verdict == Verdict::kBadPayload) {
      // The header is vouched for by its crc, so its length is trustworthy.
      skipped_oids.push_back(p->rec.oid);
      pos += p->bytes;
      continue;
    }
    absl::StatusOr<std::optional<uint64_t>> next =
        Resync(file, pos + kRecordAlign, scan.file_size, scan.last_seq, buf);
    if (!next.ok()) return next.status();
    if (!next->has_value()) break;
    pos = **next;
  }
  if (scan.file_size > scan.valid_end) {
    scan.torn_records = std::max<uint64_t>(skipped_records, 1);
    scan.torn_bytes = scan.file_size - scan.valid_end;
  }
  return scan;
}

}  // namespace msgr::store

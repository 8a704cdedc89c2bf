// ScanSegment (osd_sim/store/segment_scan.cc): the recovery scan of one segment file.
// Good records are found with their headers and positions; a torn tail ends the scan
// without costing earlier records; damage followed by a valid record is skipped and
// counted as corrupt; zeros where the format allows them (preallocated space, padding
// before an aligned record) are not damage.
//
// Files are written by SegmentWriter below, the one place that knows where records go in
// a segment file; every expectation is relative to the positions it reports, so a change
// of the file's layout ahead of the first record touches SegmentWriter only.
#include "osd_sim/store/segment_scan.h"

#include <sys/uio.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "osd_sim/store/record.h"
#include "osd_sim/store/segment_file.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Pattern;

struct Written {
  uint64_t pos = 0;    // record start
  uint64_t bytes = 0;  // RecordBytes, padding included
  uint64_t end() const { return pos + bytes; }
};

class SegmentWriter {
 public:
  explicit SegmentWriter(const std::string& name) {
    path_ = FreshDir("segment_scan_test." + name) + "/" + SegmentName(1);
    auto f = SegmentFile::Open(path_, 1, /*create=*/true);
    EXPECT_TRUE(f.ok()) << f.status();
    if (f.ok()) file_ = std::move(*f);
    end_ = 0;  // where the first record goes
  }

  // A record in the buffered layout at the current end.
  Written Append(const std::string& oid, uint64_t seq, const std::string& payload,
                 uint64_t object_off = 0, uint32_t flags = 0, uint32_t write_id = 0) {
    const RecordHeader h =
        MakeRecordHeader(oid, seq, object_off, payload.size(),
                         PayloadCrc(oid, payload.data(), payload.size()), flags, write_id);
    std::string bytes(RecordBytes(oid.size(), payload.size(), flags), '\0');
    std::memcpy(bytes.data(), &h, sizeof(h));
    std::memcpy(bytes.data() + sizeof(h), oid.data(), oid.size());
    std::memcpy(bytes.data() + PayloadOffset(oid.size(), flags), payload.data(), payload.size());
    return Put(bytes);
  }

  // A relocated record (kRecordRelocated: a copy the compactor made of the write at
  // `apply_seq`), in the buffered layout or, with kRecordAlignedPayload in `flags`, the
  // aligned one at the next kDirectAlign boundary.
  Written AppendRelocated(const std::string& oid, uint64_t seq, uint64_t apply_seq,
                          const std::string& payload, uint32_t flags = 0) {
    flags |= kRecordRelocated;
    if ((flags & kRecordAlignedPayload) != 0) end_ = AlignUp(end_, kDirectAlign);
    const RecordHeader h =
        MakeRecordHeader(oid, seq, 0, payload.size(),
                         PayloadCrc(oid, payload.data(), payload.size()), flags, 0, apply_seq);
    std::string bytes(RecordBytes(oid.size(), payload.size(), flags), '\0');
    std::memcpy(bytes.data(), &h, sizeof(h));
    std::memcpy(bytes.data() + sizeof(h), &apply_seq, sizeof(apply_seq));
    std::memcpy(bytes.data() + HeaderBytes(flags), oid.data(), oid.size());
    std::memcpy(bytes.data() + PayloadOffset(oid.size(), flags), payload.data(), payload.size());
    return Put(bytes);
  }

  // A record in the aligned (O_DIRECT) layout at the next kDirectAlign boundary; the gap
  // before it is left as zeros.
  Written AppendAligned(const std::string& oid, uint64_t seq, const std::string& payload) {
    end_ = AlignUp(end_, kDirectAlign);
    return Append(oid, seq, payload, 0, kRecordAlignedPayload);
  }

  // Arbitrary bytes at the current end.
  Written Put(const std::string& bytes) {
    Written w{end_, bytes.size()};
    WriteAt(end_, bytes);
    end_ += bytes.size();
    return w;
  }

  // Overwrites bytes already written (damage).
  void WriteAt(uint64_t off, const std::string& bytes) {
    struct iovec iov = {const_cast<char*>(bytes.data()), bytes.size()};
    const absl::Status s = file_->WriteFull(off, &iov, 1);
    EXPECT_TRUE(s.ok()) << s;
  }
  void FlipByte(uint64_t off) {
    char c = 0;
    ASSERT_TRUE(file_->ReadFull(off, &c, 1).ok());
    WriteAt(off, std::string(1, static_cast<char>(c ^ 0x5a)));
  }
  void Truncate(uint64_t size) {
    ASSERT_TRUE(file_->Truncate(size).ok());
    end_ = size;
  }

  SegmentScan Scan(uint64_t min_seq = 0) {
    absl::StatusOr<SegmentScan> s = ScanSegment(*file_, min_seq);
    EXPECT_TRUE(s.ok()) << s.status();
    return s.ok() ? *s : SegmentScan{};
  }

  uint64_t end() const { return end_; }
  SegmentFile& file() { return *file_; }

 private:
  std::string path_;
  std::unique_ptr<SegmentFile> file_;
  uint64_t end_ = 0;
};

void ExpectNoDamage(const SegmentScan& s) {
  EXPECT_EQ(s.corrupt_records, 0u);
  EXPECT_EQ(s.corrupt_bytes, 0u);
  EXPECT_EQ(s.torn_records, 0u);
  EXPECT_EQ(s.torn_bytes, 0u);
  EXPECT_TRUE(s.corrupt_oids.empty());
}

std::vector<uint64_t> Seqs(const SegmentScan& s) {
  std::vector<uint64_t> out;
  for (const ScannedRecord& r : s.records) out.push_back(r.header.seq);
  return out;
}

TEST(SegmentScanTest, EmptySegmentHasNothingAndKeepsMinSeq) {
  SegmentWriter w("empty");
  const SegmentScan s = w.Scan(/*min_seq=*/17);
  EXPECT_TRUE(s.records.empty());
  EXPECT_EQ(s.file_size, w.end());
  EXPECT_EQ(s.last_seq, 17u) << "no record: last_seq stays the min_seq passed in";
  EXPECT_EQ(s.free_bytes, 0u);
  ExpectNoDamage(s);
}

TEST(SegmentScanTest, GoodRecordsAreFoundWithTheirHeadersAndPositions) {
  SegmentWriter w("good");
  const Written a = w.Append("obj.a", 10, Pattern("obj.a", 100), /*object_off=*/0);
  const Written b = w.Append("obj.bb", 11, "", /*object_off=*/4096);  // no payload
  const Written c = w.Append("obj.ccc", 15, Pattern("obj.ccc", 70000), /*object_off=*/7,
                             kTruncate);
  const SegmentScan s = w.Scan(/*min_seq=*/9);
  ASSERT_EQ(s.records.size(), 3u);
  EXPECT_EQ(s.records[0].oid, "obj.a");
  EXPECT_EQ(s.records[0].pos, a.pos);
  EXPECT_EQ(s.records[0].header.payload_len, 100u);
  EXPECT_EQ(s.records[1].oid, "obj.bb");
  EXPECT_EQ(s.records[1].pos, b.pos);
  EXPECT_EQ(s.records[1].header.payload_len, 0u);
  EXPECT_EQ(s.records[1].header.object_off, 4096u);
  EXPECT_EQ(s.records[2].oid, "obj.ccc");
  EXPECT_EQ(s.records[2].pos, c.pos);
  EXPECT_EQ(s.records[2].header.payload_len, 70000u);
  EXPECT_EQ(s.records[2].header.object_off, 7u);
  EXPECT_EQ(s.records[2].header.flags, kTruncate);
  EXPECT_EQ(s.records[2].header.payload_crc,
            PayloadCrc("obj.ccc", Pattern("obj.ccc", 70000).data(), 70000));
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{10, 11, 15}));
  EXPECT_EQ(s.last_seq, 15u);
  EXPECT_EQ(s.valid_end, c.end());
  EXPECT_EQ(s.file_size, c.end());
  EXPECT_EQ(s.free_bytes, 0u);
  ExpectNoDamage(s);
}

TEST(SegmentScanTest, PartsOfAMultiRecordWriteKeepTheirWriteId) {
  SegmentWriter w("parts");
  w.Append("big", 21, Pattern("big", 300), 0, kTruncate | kContinued, WriteIdOf(21));
  w.Append("big", 22, Pattern("big", 300, 1), 300, 0, WriteIdOf(21));
  const SegmentScan s = w.Scan();
  ASSERT_EQ(s.records.size(), 2u);
  EXPECT_EQ(s.records[0].header.write_id, WriteIdOf(21));
  EXPECT_EQ(s.records[0].header.flags, kTruncate | kContinued);
  EXPECT_EQ(s.records[1].header.write_id, WriteIdOf(21));
  ExpectNoDamage(s);
}

TEST(SegmentScanTest, TornTailAfterAPartialPayloadIsStoppedAt) {
  SegmentWriter w("torn-payload");
  w.Append("a", 1, Pattern("a", 500));
  const Written b = w.Append("b", 2, Pattern("b", 500));
  const Written c = w.Append("c", 3, Pattern("c", 5000));
  w.Truncate(c.pos + 2000);  // the last write stopped half way
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.valid_end, b.end());
  EXPECT_EQ(s.last_seq, 2u);
  EXPECT_EQ(s.file_size, c.pos + 2000);
  EXPECT_EQ(s.torn_records, 1u);
  EXPECT_EQ(s.torn_bytes, 2000u);
  EXPECT_EQ(s.corrupt_records, 0u);
  EXPECT_EQ(s.corrupt_bytes, 0u);
  EXPECT_EQ(s.free_bytes, 0u);
}

TEST(SegmentScanTest, TornTailInsideAHeaderIsStoppedAt) {
  SegmentWriter w("torn-header");
  const Written a = w.Append("a", 1, Pattern("a", 64));
  const Written b = w.Append("b", 2, Pattern("b", 64));
  w.Truncate(b.pos + 20);  // not even a whole header
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), std::vector<uint64_t>{1});
  EXPECT_EQ(s.valid_end, a.end());
  EXPECT_EQ(s.torn_records, 1u);
  EXPECT_EQ(s.torn_bytes, 20u);
  EXPECT_EQ(s.corrupt_records, 0u);
}

// Whole records whose payload fails its crc, with nothing valid after them: torn, each
// one counted (their headers are intact).
TEST(SegmentScanTest, BadPayloadsAtTheEndAreTornNotCorrupt) {
  SegmentWriter w("torn-crc");
  const Written a = w.Append("a", 1, Pattern("a", 64));
  const Written b = w.Append("b", 2, Pattern("b", 64));
  const Written c = w.Append("c", 3, Pattern("c", 64));
  w.FlipByte(b.end() - 8);  // inside b's payload
  w.FlipByte(c.end() - 8);
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), std::vector<uint64_t>{1});
  EXPECT_EQ(s.valid_end, a.end());
  EXPECT_EQ(s.torn_records, 2u);
  EXPECT_EQ(s.torn_bytes, c.end() - a.end());
  EXPECT_EQ(s.corrupt_records, 0u);
  EXPECT_TRUE(s.corrupt_oids.empty());
}

TEST(SegmentScanTest, BadPayloadInTheMiddleIsSkippedAndCountedWithItsOid) {
  SegmentWriter w("corrupt-payload");
  w.Append("a", 1, Pattern("a", 1000));
  const Written b = w.Append("victim", 2, Pattern("victim", 1000));
  const Written c = w.Append("c", 3, Pattern("c", 1000));
  w.FlipByte(b.pos + b.bytes / 2);
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(s.records[1].pos, c.pos);
  EXPECT_EQ(s.corrupt_records, 1u);
  EXPECT_EQ(s.corrupt_bytes, b.bytes);
  EXPECT_EQ(s.corrupt_oids, std::vector<std::string>{"victim"});
  EXPECT_EQ(s.valid_end, c.end());
  EXPECT_EQ(s.last_seq, 3u);
  EXPECT_EQ(s.torn_records, 0u);
  EXPECT_EQ(s.torn_bytes, 0u);
}

// A damaged header cannot be trusted for the record's length: the scan resynchronises on
// the next valid record. The oid is unknown, so none is reported.
TEST(SegmentScanTest, BadHeaderInTheMiddleIsSkippedByResynchronising) {
  SegmentWriter w("corrupt-header");
  w.Append("a", 1, Pattern("a", 300));
  const Written b = w.Append("b", 2, Pattern("b", 300));
  const Written c = w.Append("c", 3, Pattern("c", 300));
  w.Append("d", 4, Pattern("d", 300));
  w.FlipByte(b.pos + offsetof(RecordHeader, payload_len));
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 3, 4}));
  EXPECT_EQ(s.records[1].pos, c.pos);
  EXPECT_EQ(s.corrupt_records, 1u);
  EXPECT_EQ(s.corrupt_bytes, b.bytes);
  EXPECT_TRUE(s.corrupt_oids.empty());
  EXPECT_EQ(s.torn_records, 0u);
}

TEST(SegmentScanTest, GarbageBetweenRecordsIsOneCorruptStretch) {
  SegmentWriter w("garbage");
  w.Append("a", 1, Pattern("a", 200));
  // Junk with a record magic in it (8-aligned), whose "header" is not valid.
  std::string junk = Pattern("junk", 777);
  const uint32_t magic = kRecordMagic;
  std::memcpy(junk.data() + 64, &magic, sizeof(magic));
  const Written g = w.Put(junk);
  const uint64_t pad = AlignUp(w.end(), kRecordAlign) - w.end();
  w.Put(std::string(pad, '\x7f'));  // records start 8-aligned
  const Written b = w.Append("b", 2, Pattern("b", 200));
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.records[1].pos, b.pos);
  EXPECT_EQ(s.corrupt_records, 1u);
  EXPECT_EQ(s.corrupt_bytes, b.pos - g.pos);
  EXPECT_EQ(s.torn_records, 0u);
}

// Seqs only grow along the log: a record whose seq is not above the last one accepted
// (a stale record, or one from before min_seq) is not valid there.
TEST(SegmentScanTest, ARecordWhoseSeqDoesNotGrowIsSkipped) {
  SegmentWriter w("stale");
  w.Append("a", 10, Pattern("a", 64));
  const Written stale = w.Append("old", 4, Pattern("old", 64));
  w.Append("b", 11, Pattern("b", 64));
  SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{10, 11}));
  EXPECT_EQ(s.corrupt_records, 1u);
  EXPECT_EQ(s.corrupt_bytes, stale.bytes);

  s = w.Scan(/*min_seq=*/11);  // everything here came before an earlier segment's end
  EXPECT_TRUE(s.records.empty());
  EXPECT_EQ(s.valid_end, 0u);
  EXPECT_EQ(s.last_seq, 11u);
  EXPECT_EQ(s.torn_records, 1u);
  EXPECT_EQ(s.torn_bytes, s.file_size);
}

// Compaction's copies (format 3): each has a fresh seq, its place in the log, and the
// older seq of the write it copies after the header; the scan reports that apply seq,
// which need not grow from copy to copy, while the seqs still must.
TEST(SegmentScanTest, RelocatedRecordsAreFoundWithTheSeqTheyApplyAt) {
  SegmentWriter w("relocated");
  const Written a = w.Append("new", 40, Pattern("new", 100));
  const Written b = w.AppendRelocated("old.b", 41, 7, Pattern("old.b", 5000));
  const Written c = w.AppendRelocated("old.c", 42, 3, "", kTruncate | kDelete);  // a delete
  const Written d = w.AppendRelocated("old.d", 43, 20, Pattern("old.d", 2 * kDirectAlign),
                                      kRecordAlignedPayload);
  w.Append("new", 44, Pattern("new", 10, 1));
  const SegmentScan s = w.Scan(/*min_seq=*/39);
  ASSERT_EQ(s.records.size(), 5u);
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{40, 41, 42, 43, 44}));
  std::vector<uint64_t> apply;
  for (const ScannedRecord& r : s.records) apply.push_back(r.apply_seq);
  EXPECT_EQ(apply, (std::vector<uint64_t>{40, 7, 3, 20, 44}));
  EXPECT_EQ(s.records[0].pos, a.pos);
  EXPECT_EQ(s.records[1].pos, b.pos);
  EXPECT_EQ(s.records[1].oid, "old.b");
  EXPECT_EQ(s.records[1].header.flags, kRecordRelocated);
  EXPECT_EQ(s.records[2].pos, c.pos);
  EXPECT_EQ(s.records[2].header.flags, kRecordRelocated | kTruncate | kDelete);
  EXPECT_EQ(s.records[3].pos, d.pos);
  EXPECT_EQ(d.pos % kDirectAlign, 0u);
  EXPECT_EQ(s.records[3].header.flags, kRecordRelocated | kRecordAlignedPayload);
  EXPECT_EQ(s.last_seq, 44u);
  ExpectNoDamage(s);
}

// A copy's apply seq is vouched for by the header crc, and must lie below its own seq.
TEST(SegmentScanTest, RelocatedRecordWithABadApplySeqIsSkipped) {
  SegmentWriter w("relocated-bad");
  w.Append("a", 10, Pattern("a", 64));
  const Written flipped = w.AppendRelocated("b", 11, 5, Pattern("b", 64));
  const Written future = w.AppendRelocated("c", 12, 12, Pattern("c", 64));  // not below 12
  w.Append("d", 13, Pattern("d", 64));
  w.FlipByte(flipped.pos + sizeof(RecordHeader));  // inside the apply seq
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{10, 13}));
  EXPECT_EQ(s.corrupt_records, 1u) << "one damaged stretch";
  EXPECT_EQ(s.corrupt_bytes, flipped.bytes + future.bytes);
}

TEST(SegmentScanTest, PreallocatedZerosAfterTheLastRecordAreFree) {
  SegmentWriter w("prealloc");
  w.Append("a", 1, Pattern("a", 100));
  const Written b = w.Append("b", 2, Pattern("b", 100));
  const absl::Status p = w.file().Preallocate(b.end() + (1 << 20));
  if (!p.ok()) GTEST_SKIP() << "no fallocate here: " << p;
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.valid_end, b.end());
  EXPECT_EQ(s.file_size, b.end() + (1 << 20));
  EXPECT_EQ(s.free_bytes, uint64_t{1} << 20);
  ExpectNoDamage(s);
}

TEST(SegmentScanTest, WrittenZerosAfterTheLastRecordAreFreeButJunkAmongThemIsTorn) {
  SegmentWriter w("zeros");
  const Written a = w.Append("a", 1, Pattern("a", 100));
  w.Put(std::string(3 << 20, '\0'));  // more than one read chunk
  SegmentScan s = w.Scan();
  EXPECT_EQ(s.free_bytes, uint64_t{3} << 20);
  ExpectNoDamage(s);

  w.WriteAt(a.end() + (2 << 20) + 5, "x");  // one byte in the last chunk
  s = w.Scan();
  EXPECT_EQ(Seqs(s), std::vector<uint64_t>{1});
  EXPECT_EQ(s.free_bytes, 0u);
  EXPECT_EQ(s.torn_records, 1u);
  EXPECT_EQ(s.torn_bytes, uint64_t{3} << 20);
}

TEST(SegmentScanTest, ZeroPaddingBeforeAnAlignedRecordIsNotDamage) {
  SegmentWriter w("aligned");
  const Written a = w.Append("small", 1, Pattern("small", 100));
  ASSERT_NE(a.end() % kDirectAlign, 0u) << "the test needs a gap before the aligned record";
  const Written big = w.AppendAligned("big", 2, Pattern("big", 3 * kDirectAlign + 5));
  const Written c = w.Append("after", 3, Pattern("after", 10));
  const SegmentScan s = w.Scan();
  ASSERT_EQ(Seqs(s), (std::vector<uint64_t>{1, 2, 3}));
  EXPECT_EQ(big.pos % kDirectAlign, 0u);
  EXPECT_EQ(s.records[1].pos, big.pos);
  EXPECT_EQ(s.records[1].header.flags, kRecordAlignedPayload);
  EXPECT_EQ(s.records[1].header.payload_len, 3 * kDirectAlign + 5);
  EXPECT_EQ(s.valid_end, c.end());
  ExpectNoDamage(s);
}

TEST(SegmentScanTest, JunkInThePaddingBeforeAnAlignedRecordIsCorrupt) {
  SegmentWriter w("aligned-junk");
  const Written a = w.Append("small", 1, Pattern("small", 100));
  const Written big = w.AppendAligned("big", 2, Pattern("big", kDirectAlign));
  w.WriteAt(a.end() + 16, "junk");
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 2}));
  EXPECT_EQ(s.corrupt_records, 1u);
  EXPECT_EQ(s.corrupt_bytes, big.pos - a.end());
  EXPECT_EQ(s.torn_records, 0u);
}

// A record whose header is intact but whose payload is bad is named in corrupt_oids (the
// store's recovery log lists them) also when the scan reaches it by resynchronising: an
// aligned record after zero padding, or any record after junk.
TEST(SegmentScanTest, ABadAlignedPayloadAfterPaddingIsNamed) {
  SegmentWriter w("aligned-crc");
  const Written a = w.Append("small", 1, Pattern("small", 100));
  const Written big = w.AppendAligned("big", 2, Pattern("big", 2 * kDirectAlign));
  const Written c = w.Append("after", 3, Pattern("after", 10));
  w.FlipByte(big.pos + kDirectAlign + 100);  // in the payload block
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(s.records[1].pos, c.pos);
  EXPECT_EQ(s.corrupt_records, 1u) << "the padding is not damage";
  EXPECT_EQ(s.corrupt_bytes, c.pos - a.end());
  EXPECT_EQ(s.corrupt_oids, std::vector<std::string>{"big"});
  EXPECT_EQ(s.torn_records, 0u);
}

TEST(SegmentScanTest, ABadPayloadAfterJunkIsNamedAndCountedApart) {
  SegmentWriter w("junk-then-crc");
  const Written a = w.Append("a", 1, Pattern("a", 100));
  w.Put(std::string(64, '\x33'));  // junk, 8-aligned length
  const Written v = w.Append("victim", 2, Pattern("victim", 100));
  const Written c = w.Append("c", 3, Pattern("c", 100));
  w.FlipByte(v.end() - 8);
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 3}));
  EXPECT_EQ(s.corrupt_records, 2u) << "the junk, then the record";
  EXPECT_EQ(s.corrupt_bytes, c.pos - a.end());
  EXPECT_EQ(s.corrupt_oids, std::vector<std::string>{"victim"});
}

// Damage in two places, each followed by valid data: two corrupt stretches.
TEST(SegmentScanTest, EachDamagedStretchIsCountedOnce) {
  SegmentWriter w("two-stretches");
  std::vector<Written> r;
  for (uint64_t seq = 1; seq <= 6; ++seq) {
    r.push_back(w.Append("o" + std::to_string(seq), seq, Pattern("o", 128, seq)));
  }
  w.FlipByte(r[1].pos + offsetof(RecordHeader, seq));  // header: resync
  w.FlipByte(r[4].end() - 8);                           // payload: skip by length
  const SegmentScan s = w.Scan();
  EXPECT_EQ(Seqs(s), (std::vector<uint64_t>{1, 3, 4, 6}));
  EXPECT_EQ(s.corrupt_records, 2u);
  EXPECT_EQ(s.corrupt_bytes, r[1].bytes + r[4].bytes);
  EXPECT_EQ(s.corrupt_oids, std::vector<std::string>{"o5"});
  EXPECT_EQ(s.torn_records, 0u);
  EXPECT_EQ(s.valid_end, r[5].end());
}

}  // namespace
}  // namespace msgr::store

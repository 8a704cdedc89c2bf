// Compaction (osd_sim/store/object_store_compact.cc): sparse sealed segments are copied
// forward and deleted; what reads back, at run time and after reopening, never changes.
// Segments are small (64 KiB) and records sized so that the test knows which segment
// each lands in.
#include <sys/stat.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/record.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;
using testing::Put;

namespace fs = std::filesystem;

constexpr uint64_t kSegment = 64 << 10;

StoreOptions Small(const std::string& dir, Durability mode) {
  StoreOptions o = Options(dir, mode);
  o.segment_bytes = kSegment;
  o.background_compaction = false;  // each test compacts when it wants to
  return o;
}

std::vector<std::string> SegmentFiles(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("seg-", 0) == 0) out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Bytes of every file in `dir` (du -sb, without the directory itself). Compaction may
// delete a file between listing and stat: it then counts nothing.
uint64_t DirBytes(const std::string& dir) {
  uint64_t n = 0;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const uintmax_t size = fs::file_size(e.path(), ec);
    if (!ec) n += size;
  }
  return n;
}

void FlipByte(const std::string& path, uint64_t off) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(off));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x5a);
  f.seekp(static_cast<std::streamoff>(off));
  f.write(&c, 1);
}

class CompactionTest : public ::testing::TestWithParam<Durability> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = FreshDir("compaction-" + name);
    options_ = Small(dir_, GetParam());
    Reopen();
  }
  void Reopen() {
    store_.reset();
    auto s = ObjectStore::Open(options_);
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void PutDurable(std::string_view oid, std::string_view data, uint32_t flags = kTruncate) {
    auto t = Put(*store_, oid, 0, data, flags);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(store_->WaitDurable(*t).ok());
  }
  void DeleteDurable(std::string_view oid) {
    auto t = store_->Delete(oid);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(store_->WaitDurable(*t).ok());
  }
  void ExpectObject(std::string_view oid, const std::string& want) {
    auto got = store_->Read(oid);
    ASSERT_TRUE(got.ok()) << oid << ": " << got.status();
    ASSERT_EQ(got->size(), want.size()) << oid;
    EXPECT_TRUE(*got == want) << "object " << oid << " differs";
  }
  void ExpectGone(std::string_view oid) {
    EXPECT_EQ(store_->Read(oid).status().code(), absl::StatusCode::kNotFound) << oid;
  }
  // A part of a write of several records; returns its ticket.
  uint64_t Part(std::string_view oid, const std::string& data, uint64_t off, uint64_t len,
                uint32_t flags, uint32_t write_id) {
    return testing::PutPart(*store_, oid, data, off, len, flags, write_id);
  }

  std::string dir_;
  StoreOptions options_;
  std::unique_ptr<ObjectStore> store_;
};

// Compaction copies a live record with the seq of the write it copies: an object left
// alone is not dated after a watermark by being moved (a returning primary's candidates,
// osd_sim/peering.h), before or after reopen.
TEST_P(CompactionTest, ARelocatedObjectKeepsTheSeqOfItsWrite) {
  PutDurable("keep", Pattern("keep", 4096, 0));
  for (int round = 0; round < 40; ++round) PutDurable("churn", Pattern("churn", 4096, round));
  const uint64_t mark = store_->NextSeq();
  ASSERT_TRUE(store_->Compact().ok());
  ASSERT_GT(store_->GetStats().records_relocated, 0u) << "nothing was moved";
  EXPECT_TRUE(store_->ListWrittenSince("", "", mark, 10).empty());
  auto all = store_->ListWrittenSince("", "", 0, 10);
  ASSERT_EQ(all.size(), 2u);
  EXPECT_LT(all[1].seq, all[0].seq) << "keep was written before the last churn";
  if (GetParam() == Durability::kMemory) return;
  Reopen();
  EXPECT_TRUE(store_->ListWrittenSince("", "", mark, 10).empty());
  ExpectObject("keep", Pattern("keep", 4096, 0));
}

// Overwrites: the segments they leave dead are deleted (most without copying anything),
// the few live records copied; every object reads its last version, then and after reopen.
TEST_P(CompactionTest, OverwrittenSegmentsAreDeletedAndEveryObjectKeepsItsLastVersion) {
  constexpr int kObjects = 10;
  constexpr int kRounds = 20;
  for (int round = 0; round < kRounds; ++round) {
    for (int i = 0; i < kObjects; ++i) {
      const std::string oid = "o" + std::to_string(i);
      PutDurable(oid, Pattern(oid, 4096, round));
    }
  }
  const StoreStats before = store_->GetStats();
  const size_t files_before = SegmentFiles(dir_).size();
  EXPECT_GE(before.segments, 12u);
  EXPECT_GT(before.dead_bytes, before.live_bytes * 10);
  ASSERT_TRUE(store_->Compact().ok());
  const StoreStats after = store_->GetStats();
  EXPECT_GE(after.segments_freed, files_before - 3);
  EXPECT_LE(after.segments, 3u) << after.ToString();
  EXPECT_EQ(SegmentFiles(dir_).size(), after.segments);
  EXPECT_LE(after.records_relocated, static_cast<uint64_t>(kObjects));
  EXPECT_LT(after.log_bytes, before.log_bytes / 4);
  EXPECT_GT(after.bytes_reclaimed, 0u);
  EXPECT_EQ(after.live_bytes, before.live_bytes + kApplySeqBytes * after.records_relocated)
      << "the same records are live, a copy 8 bytes longer (its apply seq)";
  EXPECT_EQ(after.compaction_crc_errors, 0u);
  for (int i = 0; i < kObjects; ++i) {
    const std::string oid = "o" + std::to_string(i);
    ExpectObject(oid, Pattern(oid, 4096, kRounds - 1));
  }
  Reopen();
  EXPECT_EQ(store_->GetStats().corrupt_records, 0u);
  EXPECT_EQ(store_->GetStats().live_bytes, after.live_bytes);
  for (int i = 0; i < kObjects; ++i) {
    const std::string oid = "o" + std::to_string(i);
    ExpectObject(oid, Pattern(oid, 4096, kRounds - 1));
  }
}

// A delete record must stay while an older record of its object is left anywhere: here
// the object's first version sits in a segment that is mostly live (not compacted), and
// the delete in a dead one. Compacting the dead one writes the delete again; once the
// old version's segment is gone too, the delete is dropped.
TEST_P(CompactionTest, ADeleteOutlivesItsSegmentWhileAnOlderRecordIsLeft) {
  // Segment 1: x (1 KiB) and f, filling it (live for now).
  constexpr size_t kFill = 64360;  // x's record + f's: 56 bytes short of 64 KiB
  static_assert(RecordBytes(1, 1024) + RecordBytes(1, kFill) + RecordBytes(1, 0) > kSegment);
  PutDurable("x", Pattern("x", 1024));
  PutDurable("f", Pattern("f", kFill));
  // Segment 2: delete x, j (60 KiB). Segment 3: j again, so segment 2 is all dead.
  DeleteDurable("x");
  PutDurable("j", Pattern("j", 60 << 10, 1));
  PutDurable("j", Pattern("j", 60 << 10, 2));
  ASSERT_EQ(SegmentFiles(dir_).size(), 3u);
  ASSERT_TRUE(store_->Compact().ok());
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.segments_freed, 1u) << st.ToString();
  EXPECT_EQ(st.deletes_kept, 1u) << "x's first version is still in segment 1";
  EXPECT_EQ(st.records_relocated, 0u);
  ExpectGone("x");
  Reopen();
  ExpectGone("x");  // without the kept delete, replay would bring x back
  ExpectObject("f", Pattern("f", kFill));

  // Now the first version's segment goes too (f and j overwritten: all but the newest
  // segments are dead), and the delete with it: nothing older is left to hide.
  PutDurable("f", Pattern("f", kFill, 1));
  PutDurable("j", Pattern("j", 60 << 10, 3));
  PutDurable("k", Pattern("k", 60 << 10));
  ASSERT_TRUE(store_->Compact().ok());
  st = store_->GetStats();
  EXPECT_EQ(st.deletes_kept, 0u) << st.ToString();  // a fresh store counter since Reopen
  EXPECT_GE(st.segments_freed, 2u) << st.ToString();
  ExpectGone("x");
  Reopen();
  ExpectGone("x");
  EXPECT_EQ(store_->List("", "", 10).size(), 3u);
  ExpectObject("f", Pattern("f", kFill, 1));
  ExpectObject("j", Pattern("j", 60 << 10, 3));
}

// A write that arrives while a segment is being compacted wins over the copy of what it
// replaced, and a delete keeps the object deleted, whatever step compaction is at.
TEST_P(CompactionTest, NewerWritesAndDeletesDuringCompactionWin) {
  for (CompactionStep step : {CompactionStep::kPlanned, CompactionStep::kCopied, CompactionStep::kDurable,
                              CompactionStep::kRepointed, CompactionStep::kUnlinked}) {
    SCOPED_TRACE(static_cast<int>(step));
    dir_ = FreshDir("compaction-race-" + std::to_string(static_cast<int>(step)) +
                    (GetParam() == Durability::kDurable ? "-durable" : "-buffered"));
    options_ = Small(dir_, GetParam());
    ObjectStore* raw = nullptr;
    bool fired = false;
    options_.compaction_hook = [&](CompactionStep at, uint64_t) {
      if (at != step || fired) return;
      fired = true;
      auto t = Put(*raw, "v", 0, Pattern("v", 3000, 2), kTruncate);
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE(raw->WaitDurable(*t).ok());
      auto d = raw->Delete("d");
      ASSERT_TRUE(d.ok()) << d.status();
      ASSERT_TRUE(raw->WaitDurable(*d).ok());
    };
    Reopen();
    raw = store_.get();
    // Segment 1: v and d live, j dead (overwritten in segment 2).
    PutDurable("v", Pattern("v", 4096, 1));
    PutDurable("d", Pattern("d", 4096, 1));
    PutDurable("j", Pattern("j", 50 << 10, 1));
    PutDurable("j", Pattern("j", 50 << 10, 2));
    ASSERT_TRUE(store_->Compact().ok());
    EXPECT_TRUE(fired);
    EXPECT_GE(store_->GetStats().records_relocated, 2u) << "v and d were copied";
    ExpectObject("v", Pattern("v", 3000, 2));
    ExpectGone("d");
    Reopen();
    ExpectObject("v", Pattern("v", 3000, 2));
    ExpectGone("d");
    ExpectObject("j", Pattern("j", 50 << 10, 2));
    store_.reset();
  }
}

// A write of several records is replayed only whole: when compaction copies one of its
// parts, it copies all of them (each as a write of one record), wherever they are, and
// recovery does not count the original parts left behind as an aborted write.
TEST_P(CompactionTest, AWriteOfSeveralRecordsIsCopiedWhole) {
  const std::string m = Pattern("m", 60 << 10, 1);
  // Segment 1: j (30 KiB, overwritten later), m's first part (30 KiB).
  PutDurable("j", Pattern("j", 30 << 10, 1));
  const uint32_t id = WriteIdOf(Part("m", m, 0, 30 << 10, kTruncate | kContinued, 0));
  // Segment 2: m's last part, k (live).
  Part("m", m, 30 << 10, 30 << 10, 0, id);
  PutDurable("k", Pattern("k", 30 << 10));
  // Segment 3: j again: segment 1 is under half live (m's first part only).
  PutDurable("j", Pattern("j", 30 << 10, 2));
  ASSERT_EQ(SegmentFiles(dir_).size(), 3u);
  ExpectObject("m", m);
  ASSERT_TRUE(store_->Compact().ok());
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.segments_freed, 1u) << st.ToString();
  EXPECT_EQ(st.records_relocated, 2u) << "both parts, the one in segment 2 too";
  ExpectObject("m", m);
  Reopen();
  ExpectObject("m", m);
  EXPECT_EQ(store_->GetStats().writes_aborted, 0u);
  // Segment 2 now holds only k live (m's last part there is dead): compact it too.
  ASSERT_TRUE(store_->Compact().ok());
  EXPECT_EQ(store_->GetStats().segments_freed, 1u) << store_->GetStats().ToString();
  ExpectObject("m", m);
  ExpectObject("k", Pattern("k", 30 << 10));
  Reopen();
  ExpectObject("m", m);
  ExpectObject("k", Pattern("k", 30 << 10));
  ExpectObject("j", Pattern("j", 30 << 10, 2));
  EXPECT_EQ(store_->GetStats().writes_aborted, 0u);
}

// Partial overwrites: a copy applies at its original place in the seq order, under the
// newer writes that overlap it.
TEST_P(CompactionTest, PartlyOverwrittenObjectsReadTheSameAfterCompaction) {
  std::string want = Pattern("p", 20000, 1);
  PutDurable("p", want);
  const std::string mid = Pattern("p", 5000, 2);
  auto t = Put(*store_, "p", 7000, mid, 0);
  ASSERT_TRUE(t.ok() && store_->WaitDurable(*t).ok());
  want.replace(7000, mid.size(), mid);
  PutDurable("j", Pattern("j", 30 << 10, 1));
  PutDurable("j", Pattern("j", 60 << 10, 2));  // seals segment 1: p's two writes live
  ASSERT_TRUE(store_->Compact().ok());
  EXPECT_EQ(store_->GetStats().records_relocated, 2u) << store_->GetStats().ToString();
  ExpectObject("p", want);
  Reopen();
  ExpectObject("p", want);
}

// A live payload that fails its crc is never copied: counted, the segment kept, the
// object reading DATA_LOSS as before; once that object is overwritten, the segment goes.
TEST_P(CompactionTest, ACorruptLivePayloadIsNotCopiedAndItsSegmentIsKept) {
  PutDurable("v", Pattern("v", 4096));  // the first record of segment 1, at offset 0
  PutDurable("w", Pattern("w", 4096));
  PutDurable("j", Pattern("j", 50 << 10, 1));
  PutDurable("j", Pattern("j", 50 << 10, 2));
  const std::string seg1 = SegmentFiles(dir_).front();
  FlipByte(seg1, PayloadOffset(1, 0) + 100);
  ASSERT_TRUE(store_->Compact().ok());
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.compaction_crc_errors, 1u) << st.ToString();
  EXPECT_EQ(st.segments_freed, 0u);
  EXPECT_TRUE(fs::exists(seg1));
  EXPECT_EQ(store_->Read("v").status().code(), absl::StatusCode::kDataLoss);
  ExpectObject("w", Pattern("w", 4096));
  ASSERT_TRUE(store_->Compact().ok());
  EXPECT_EQ(store_->GetStats().compaction_crc_errors, 1u) << "not tried again";
  PutDurable("v", Pattern("v", 4096, 2));
  ASSERT_TRUE(store_->Compact().ok());
  EXPECT_EQ(store_->GetStats().segments_freed, 1u) << store_->GetStats().ToString();
  EXPECT_FALSE(fs::exists(seg1));
  ExpectObject("v", Pattern("v", 4096, 2));
  ExpectObject("w", Pattern("w", 4096));
  Reopen();
  ExpectObject("v", Pattern("v", 4096, 2));
  ExpectObject("w", Pattern("w", 4096));
}

// Large payloads in aligned buffers are copied in the aligned (O_DIRECT) layout, as they
// were written, and read back.
TEST_P(CompactionTest, AlignedRecordsAreCopiedAndReadBack) {
  store_.reset();
  options_.segment_bytes = 1 << 20;
  Reopen();
  const std::string big = Pattern("big", 256 << 10, 1);
  const testing::AlignedCopy aligned(big);
  struct iovec iov = {const_cast<char*>(aligned.data()), aligned.size()};
  auto t = store_->Append("big", 0, &iov, 1, PayloadCrc("big", big.data(), big.size()), kTruncate);
  ASSERT_TRUE(t.ok() && store_->WaitDurable(*t).ok());
  PutDurable("j", Pattern("j", 700 << 10, 1));
  PutDurable("j", Pattern("j", 700 << 10, 2));  // segment 1: big live, j dead
  const uint64_t direct_before = store_->GetStats().direct_appends;
  ASSERT_TRUE(store_->Compact().ok());
  const StoreStats st = store_->GetStats();
  EXPECT_EQ(st.segments_freed, 1u) << st.ToString();
  EXPECT_EQ(st.bytes_relocated, big.size());
  EXPECT_EQ(st.direct_appends, direct_before) << "copies are not client appends";
  ExpectObject("big", big);
  Reopen();
  ExpectObject("big", big);
  EXPECT_EQ(store_->GetStats().corrupt_records, 0u);
}

// The figure, scaled down: under a steady overwrite load the directory stays
// under twice the live bytes plus two segments, once compaction has had its turn.
TEST_P(CompactionTest, SteadyOverwritesKeepTheDirectoryBounded) {
  store_.reset();
  options_.segment_bytes = 256 << 10;
  Reopen();
  constexpr int kObjects = 64;
  constexpr size_t kSize = 16 << 10;
  const uint64_t live = kObjects * kSize;
  uint64_t worst = 0;
  for (int round = 0; round < 30; ++round) {
    // 64 overwrites of 16 KiB, pipelined: 4 segments' worth.
    std::vector<uint64_t> tickets;
    for (int i = 0; i < kObjects; ++i) {
      const std::string oid = "b" + std::to_string((i * 7 + round) % kObjects);
      auto t = Put(*store_, oid, 0, Pattern(oid, kSize, round), kTruncate);
      ASSERT_TRUE(t.ok()) << t.status();
      tickets.push_back(*t);
    }
    for (uint64_t t : tickets) ASSERT_TRUE(store_->WaitDurable(t).ok());
    ASSERT_TRUE(store_->Compact().ok());
    const uint64_t bytes = DirBytes(dir_);
    worst = std::max(worst, bytes);
    ASSERT_LE(bytes, 2 * live + 2 * options_.segment_bytes)
        << "round " << round << ": " << store_->GetStats().ToString();
  }
  std::cerr << "directory at most " << worst << " bytes for " << live << " live\n";
  EXPECT_GT(store_->GetStats().segments_freed, 20u);
  Reopen();
  for (int i = 0; i < kObjects; ++i) {
    const std::string oid = "b" + std::to_string(i);
    auto got = store_->Read(oid);
    ASSERT_TRUE(got.ok()) << oid << ": " << got.status();
    EXPECT_EQ(got->size(), kSize);
  }
}

// The same load with only the background thread compacting: the directory comes back
// under the bound once it has caught up (no speed asserted: it may lag while writes run).
TEST_P(CompactionTest, BackgroundCompactionAloneBoundsTheDirectory) {
  store_.reset();
  options_.segment_bytes = 256 << 10;
  options_.background_compaction = true;
  options_.compaction_interval = absl::Milliseconds(5);
  Reopen();
  constexpr int kObjects = 64;
  constexpr size_t kSize = 16 << 10;
  const uint64_t live = kObjects * kSize;
  const uint64_t bound = 2 * live + 2 * options_.segment_bytes;
  std::atomic<bool> done{false};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int n = 0; n < 400; ++n) {
        const std::string oid = "b" + std::to_string((n * 4 + w) % kObjects);
        auto t = Put(*store_, oid, 0, Pattern(oid, kSize, n), kTruncate);
        ASSERT_TRUE(t.ok()) << t.status();
        ASSERT_TRUE(store_->WaitDurable(*t).ok());
      }
    });
  }
  uint64_t worst = 0;
  std::thread watcher([&] {
    while (!done) {
      worst = std::max(worst, DirBytes(dir_));
      absl::SleepFor(absl::Milliseconds(20));
    }
  });
  for (auto& t : writers) t.join();
  done = true;
  watcher.join();
  uint64_t bytes = DirBytes(dir_);
  for (int i = 0; i < 600 && bytes > bound; ++i) {  // up to a minute on a loaded machine
    absl::SleepFor(absl::Milliseconds(100));
    bytes = DirBytes(dir_);
  }
  std::cerr << "during the run the directory reached " << worst << " bytes (bound " << bound
            << "); after: " << bytes << "; " << store_->GetStats().ToString() << "\n";
  EXPECT_LE(bytes, bound);
  EXPECT_GT(store_->GetStats().segments_freed, 10u);
}

std::string ModeName(const ::testing::TestParamInfo<Durability>& info) {
  return info.param == Durability::kDurable ? "Durable" : "Buffered";
}

INSTANTIATE_TEST_SUITE_P(Modes, CompactionTest,
                         ::testing::Values(Durability::kDurable, Durability::kBuffered), ModeName);

// Memory mode keeps payloads, not segments: an overwritten or deleted payload is freed at
// once, so what counts against the capacity is the live data.
TEST(MemoryCompactionTest, DeadPayloadsAreFreedAtOnce) {
  StoreOptions o = Options("", Durability::kMemory);
  o.capacity_bytes = 1 << 20;
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 2000; ++i) {  // 8 MB written into 1 MiB
    const std::string oid = "m" + std::to_string(i % 16);
    auto t = Put(**store, oid, 0, Pattern(oid, 4096, i), kTruncate);
    ASSERT_TRUE(t.ok()) << "write " << i << ": " << t.status();
    if (i % 5 == 0) {
      ASSERT_TRUE((*store)->Delete(oid).ok());
    }
  }
  const StoreStats st = (*store)->GetStats();
  EXPECT_LE(st.log_bytes, 16u * 4096) << st.ToString();
  EXPECT_EQ(st.live_bytes, st.log_bytes);
  EXPECT_EQ(st.dead_bytes, 0u);
  EXPECT_TRUE((*store)->Compact().ok());

  // An object rewritten in two halves (no truncate): the old whole is hidden by both
  // together and freed.
  const std::string whole = Pattern("h", 64 << 10, 1);
  ASSERT_TRUE(Put(**store, "h", 0, whole, kTruncate).ok());
  const uint64_t with_whole = (*store)->GetStats().log_bytes;
  const std::string halves = Pattern("h", 64 << 10, 2);
  ASSERT_TRUE(Put(**store, "h", 0, std::string_view(halves).substr(0, 32 << 10), 0).ok());
  ASSERT_TRUE(Put(**store, "h", 32 << 10, std::string_view(halves).substr(32 << 10), 0).ok());
  EXPECT_EQ((*store)->GetStats().log_bytes, with_whole);
  EXPECT_TRUE(*(*store)->Read("h") == halves);
}

}  // namespace
}  // namespace msgr::store

// The O_DIRECT path: large payloads in aligned buffers are written in the aligned record
// layout (record.h), everything else in the packed one, both in the same (preallocated)
// segment. Checks the layout on disk, round trips, recovery after torn tails at random
// cuts (file cut short, or zeros after the cut as in a preallocated file), and bit flips.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <iterator>
#include <thread>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/record.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::AlignedCopy;
using testing::FreshDir;
using testing::OnlySegment;
using testing::Options;
using testing::Pattern;
using testing::Slurp;
using testing::Spit;

namespace fs = std::filesystem;

constexpr uint64_t kSegmentBytes = 16 << 20;

struct Rec {
  std::string oid;
  std::string data;
  bool direct = false;  // expected to take the O_DIRECT path
  uint64_t pos = 0;     // record start
  uint64_t end = 0;     // record end (the next record starts here, or after padding)
};

void FlipByte(const std::string& path, uint64_t off) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

// Appends `data` to `oid` from an aligned buffer (`aligned`) or a deliberately
// misaligned one; returns the record's place in the log, following the layout rules.
Rec Write(ObjectStore& store, uint64_t* tail, std::string oid, std::string data, bool aligned,
          uint32_t flags = kTruncate, uint64_t off = 0) {
  Rec r;
  r.oid = std::move(oid);
  r.data = std::move(data);
  AlignedCopy buf(r.data, aligned ? 0 : 8);
  struct iovec iov = {const_cast<char*>(buf.data()), buf.size()};
  auto t = store.Append(r.oid, off, &iov, 1, PayloadCrc(r.oid, buf.data(), buf.size()), flags);
  EXPECT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(store.WaitDurable(*t).ok());
  r.direct = aligned && !r.data.empty() && r.data.size() % kDirectAlign == 0 &&
             r.data.size() >= StoreOptions().direct_min_bytes;
  r.pos = r.direct ? AlignUp(*tail, kDirectAlign) : *tail;
  r.end = r.pos + RecordBytes(r.oid.size(), r.data.size(), r.direct ? kRecordAlignedPayload : 0);
  *tail = r.end;
  return r;
}

// A random mix: big aligned (direct), small aligned, big and small misaligned.
std::vector<Rec> WriteMix(ObjectStore& store, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Rec> out;
  uint64_t tail = 0;
  for (int i = 0; i < n; ++i) {
    const std::string oid = "m-" + std::to_string(i);
    switch (rng() % 5) {
      case 0:
      case 1:
        out.push_back(Write(store, &tail, oid, Pattern(oid, kDirectAlign * (32 + rng() % 64)), true));
        break;
      case 2:
        out.push_back(Write(store, &tail, oid, Pattern(oid, kDirectAlign * (1 + rng() % 4)), true));
        break;
      case 3:
        out.push_back(Write(store, &tail, oid, Pattern(oid, kDirectAlign * 40), false));
        break;
      default:
        out.push_back(Write(store, &tail, oid, Pattern(oid, rng() % 9000), false));
    }
  }
  return out;
}

StoreOptions MixOptions(const std::string& dir, Durability mode) {
  StoreOptions o = Options(dir, mode);
  o.segment_bytes = kSegmentBytes;
  return o;
}

// Skips the calling test when this filesystem has no O_DIRECT (the buffered path then
// handles everything, which the other store tests cover).
#define SKIP_WITHOUT_DIRECT(store, want)                                                  \
  if ((want) > 0 && (store).GetStats().direct_appends == 0) {                             \
    GTEST_SKIP() << "the test directory's filesystem refuses O_DIRECT: aligned layout untested"; \
  }

TEST(DirectIoTest, AlignedAndUnalignedMixRoundTripsWithTheDocumentedLayout) {
  const std::string dir = FreshDir("direct-mix");
  std::vector<Rec> recs;
  size_t want_direct = 0;
  {
    auto store = ObjectStore::Open(MixOptions(dir, Durability::kDurable));
    ASSERT_TRUE(store.ok()) << store.status();
    recs = WriteMix(**store, 40, 11);
    for (const Rec& r : recs) want_direct += r.direct;
    ASSERT_GT(want_direct, 5u);
    ASSERT_LT(want_direct, recs.size());
    SKIP_WITHOUT_DIRECT(**store, want_direct);
    EXPECT_EQ((*store)->GetStats().direct_appends, want_direct);
    for (const Rec& r : recs) {
      auto got = (*store)->Read(r.oid);
      ASSERT_TRUE(got.ok()) << r.oid << ": " << got.status();
      ASSERT_TRUE(*got == r.data) << r.oid;
    }
  }
  // On disk: each record where the layout rules put it, then free (zero) space.
  const std::string image = Slurp(OnlySegment(dir));
  ASSERT_EQ(image.size(), kSegmentBytes) << "segment preallocated";
  ASSERT_EQ(image.find_first_not_of('\0', recs.back().end), std::string::npos);
  for (const Rec& r : recs) {
    RecordHeader h;
    std::memcpy(&h, image.data() + r.pos, sizeof(h));
    ASSERT_TRUE(HeaderCrcValid(h, image.substr(r.pos + sizeof(h), h.oid_len))) << r.oid;
    EXPECT_EQ(image.substr(r.pos + sizeof(h), h.oid_len), r.oid);
    EXPECT_EQ((h.flags & kRecordAlignedPayload) != 0, r.direct) << r.oid;
    const uint64_t at = r.pos + PayloadOffset(r.oid.size(), h.flags);
    if (r.direct) {
      EXPECT_EQ(r.pos % kDirectAlign, 0u) << r.oid;
      EXPECT_EQ(at, r.pos + kDirectAlign) << r.oid;
    }
    EXPECT_TRUE(image.compare(at, r.data.size(), r.data) == 0) << r.oid;
  }
  auto store = ObjectStore::Open(MixOptions(dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  const StoreStats st = (*store)->GetStats();
  EXPECT_EQ(st.recovered_records, recs.size());
  EXPECT_EQ(st.torn_records, 0u) << "padding and preallocated zeros are not damage";
  EXPECT_EQ(st.corrupt_records, 0u);
  for (const Rec& r : recs) {
    auto got = (*store)->Read(r.oid);
    ASSERT_TRUE(got.ok()) << r.oid << ": " << got.status();
    ASSERT_TRUE(*got == r.data) << r.oid;
  }
  // A small unaligned write into a direct object, and a direct write over a buffered one.
  uint64_t tail = recs.back().end;
  Rec big;
  for (const Rec& r : recs) {
    if (r.direct) big = r;
  }
  Write(**store, &tail, big.oid, "patched", false, 0, 1000);
  big.data.replace(1000, 7, "patched");
  const Rec small = recs[0].direct ? recs[1] : recs[0];
  const std::string over = Pattern("over", 256 << 10);
  Write(**store, &tail, small.oid, over, true);
  EXPECT_EQ((*store)->GetStats().direct_appends, 1u);
  store->reset();
  store = ObjectStore::Open(MixOptions(dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(*(*store)->Read(big.oid) == big.data);
  EXPECT_TRUE(*(*store)->Read(small.oid) == over);
}

TEST(DirectIoTest, TornTailAtRandomCutsInMixedLayout) {
  const std::string src = FreshDir("direct-torn-src");
  std::vector<Rec> recs;
  {
    auto store = ObjectStore::Open(MixOptions(src, Durability::kBuffered));
    ASSERT_TRUE(store.ok()) << store.status();
    recs = WriteMix(**store, 24, 5);
    size_t want = 0;
    for (const Rec& r : recs) want += r.direct;
    SKIP_WITHOUT_DIRECT(**store, want);
  }
  const std::string seg_name = fs::path(OnlySegment(src)).filename().string();
  std::string image = Slurp(OnlySegment(src));
  ASSERT_EQ(image.find_first_not_of('\0', recs.back().end), std::string::npos);
  const size_t full_size = image.size();
  image.resize(recs.back().end);
  std::mt19937_64 rng(3);
  for (int iter = 0; iter < 48; ++iter) {
    // Cuts anywhere; now and then at a record's start, end, or inside its header block.
    uint64_t cut = rng() % (image.size() + 1);
    const Rec& pick = recs[rng() % recs.size()];
    if (iter % 8 == 1) cut = pick.end;
    if (iter % 8 == 2) cut = pick.pos;
    if (iter % 8 == 3) cut = pick.pos + 100 + rng() % 3000;
    // Odd iterations: the file is cut short. Even: it keeps its preallocated size and
    // everything after the cut reads as zeros (the writes never reached the disk).
    const bool zero_fill = iter % 2 == 0;
    SCOPED_TRACE("cut at " + std::to_string(cut) + (zero_fill ? ", zero-filled" : ", truncated"));
    bool clean = cut == 0 || cut >= recs.back().end;  // no partial record left behind
    for (size_t i = 0; i < recs.size(); ++i) {
      const uint64_t next = i + 1 < recs.size() ? recs[i + 1].pos : recs[i].end;
      clean |= cut >= recs[i].end && cut <= next;
    }
    const std::string dir = FreshDir("direct-torn-" + std::to_string(iter));
    std::string bytes = image.substr(0, cut);
    if (zero_fill) bytes.resize(full_size, '\0');
    Spit(dir + "/" + seg_name, bytes);
    {
      auto store = ObjectStore::Open(MixOptions(dir, Durability::kDurable));
      ASSERT_TRUE(store.ok()) << store.status();
      size_t kept = 0;
      for (const Rec& r : recs) {
        auto got = (*store)->Read(r.oid);
        if (r.end <= cut) {
          ASSERT_TRUE(got.ok()) << r.oid << ": " << got.status();
          ASSERT_TRUE(*got == r.data) << r.oid;
          ++kept;
        } else {
          ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound) << r.oid;
        }
      }
      const StoreStats st = (*store)->GetStats();
      EXPECT_EQ(st.recovered_records, kept);
      EXPECT_EQ(st.torn_records > 0, !clean);
      EXPECT_EQ(st.corrupt_records, 0u);
      // New appends (either layout) follow the valid data and survive a reopen.
      uint64_t tail = 0;
      Write(**store, &tail, "after-big", Pattern("after-big", 160 << 10), true);
      Write(**store, &tail, "after-small", Pattern("after-small", 3001), false);
    }
    auto store = ObjectStore::Open(MixOptions(dir, Durability::kDurable));
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_TRUE(*(*store)->Read("after-big") == Pattern("after-big", 160 << 10));
    EXPECT_TRUE(*(*store)->Read("after-small") == Pattern("after-small", 3001));
    EXPECT_EQ((*store)->GetStats().torn_records, 0u);
    EXPECT_EQ((*store)->GetStats().corrupt_records, 0u);
    fs::remove_all(dir);
  }
}

// v1 of "x" (direct), a small record ending off the 4 KiB grid, v2 of "x" (direct, so
// preceded by padding), "y" (direct), a filler.
struct FlipLog {
  std::string dir, seg;
  Rec x1, gap, x2, y, tailer;
};

FlipLog WriteFlipLog(const std::string& name, bool* has_direct) {
  FlipLog m;
  m.dir = FreshDir(name);
  auto store = ObjectStore::Open(MixOptions(m.dir, Durability::kBuffered));
  EXPECT_TRUE(store.ok());
  uint64_t tail = 0;
  m.x1 = Write(**store, &tail, "x", Pattern("x", 128 << 10, 1), true);
  m.gap = Write(**store, &tail, "g", Pattern("g", 1000), false);
  m.x2 = Write(**store, &tail, "x", Pattern("x", 192 << 10, 2), true);
  m.y = Write(**store, &tail, "y", Pattern("y", 128 << 10), true);
  m.tailer = Write(**store, &tail, "t", Pattern("t", 500), false);
  EXPECT_GT(m.x2.pos, m.gap.end) << "x2 is preceded by padding";
  *has_direct = (*store)->GetStats().direct_appends == 3;
  m.seg = OnlySegment(m.dir);
  return m;
}

void ExpectIntact(ObjectStore& store, const FlipLog& m, bool x2_intact) {
  for (const Rec* r : {&m.gap, &m.y, &m.tailer}) {
    auto got = store.Read(r->oid);
    ASSERT_TRUE(got.ok()) << r->oid << ": " << got.status();
    EXPECT_TRUE(*got == r->data) << r->oid;
  }
  auto x = store.Read("x");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(*x == (x2_intact ? m.x2.data : m.x1.data)) << "x: wrong version";
}

TEST(DirectIoTest, BitFlipsInAlignedRecordsAreSkippedNeverServed) {
  struct Case {
    const char* what;
    uint64_t (*where)(const FlipLog&);
    bool x2_intact;
  };
  const Case cases[] = {
      {"payload of x v2", [](const FlipLog& m) { return m.x2.pos + kDirectAlign + 70000; }, false},
      {"header of x v2", [](const FlipLog& m) { return m.x2.pos + 20; }, false},
      {"oid in x v2's header block", [](const FlipLog& m) { return m.x2.pos + sizeof(RecordHeader); }, false},
      {"padding before x v2", [](const FlipLog& m) { return m.gap.end + 5; }, true},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    bool has_direct = false;
    const FlipLog m = WriteFlipLog("direct-flip", &has_direct);
    if (!has_direct) GTEST_SKIP() << "the test directory's filesystem refuses O_DIRECT";
    FlipByte(m.seg, c.where(m));
    auto store = ObjectStore::Open(MixOptions(m.dir, Durability::kDurable));
    ASSERT_TRUE(store.ok()) << store.status();
    ExpectIntact(**store, m, c.x2_intact);
    // Damage is counted (the padding flip too: it loses nothing but is not zero).
    EXPECT_EQ((*store)->GetStats().corrupt_records, 1u);
    EXPECT_EQ((*store)->GetStats().torn_records, 0u);
  }
}

TEST(DirectIoTest, RuntimeCorruptionOfAnAlignedPayloadIsDataLoss) {
  bool has_direct = false;
  const FlipLog m = WriteFlipLog("direct-runtime", &has_direct);
  if (!has_direct) GTEST_SKIP() << "the test directory's filesystem refuses O_DIRECT";
  auto store = ObjectStore::Open(MixOptions(m.dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  FlipByte(m.seg, m.y.pos + kDirectAlign + 4096 * 7 + 3);
  auto y = (*store)->Read("y");
  EXPECT_EQ(y.status().code(), absl::StatusCode::kDataLoss) << y.status();
  EXPECT_EQ((*store)->GetStats().read_crc_errors, 1u);
}

// A large record from several aligned buffers of unequal sizes, written as 1-4 parallel
// pwritev: the parts meet exactly, whatever buffer boundary they fall on.
TEST(DirectIoTest, ParallelStreamsSplitAcrossBuffers) {
  const size_t sizes[] = {4096, (1 << 20) + 8192, 12288, 2 << 20, 65536};
  std::string whole;
  std::vector<AlignedCopy> bufs;
  for (size_t i = 0; i < std::size(sizes); ++i) {
    const std::string part = Pattern("part" + std::to_string(i), sizes[i]);
    whole += part;
    bufs.emplace_back(part);
  }
  std::vector<struct iovec> iov;
  for (const AlignedCopy& b : bufs) iov.push_back({const_cast<char*>(b.data()), b.size()});
  for (int streams = 1; streams <= 4; ++streams) {
    SCOPED_TRACE("streams " + std::to_string(streams));
    StoreOptions o = MixOptions(FreshDir("direct-split"), Durability::kDurable);
    o.direct_write_streams = streams;
    {
      auto store = ObjectStore::Open(o);
      ASSERT_TRUE(store.ok()) << store.status();
      uint64_t tail = 0;
      Write(**store, &tail, "lead", "unaligned lead-in", false);
      auto t = (*store)->Append("big", 0, iov.data(), static_cast<int>(iov.size()),
                                PayloadCrc("big", whole.data(), whole.size()), 0);
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE((*store)->WaitDurable(*t).ok());
      SKIP_WITHOUT_DIRECT(**store, 1);
      auto got = (*store)->Read("big");
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(*got == whole);
    }
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->GetStats().recovered_records, 2u);
    EXPECT_EQ((*store)->GetStats().corrupt_records + (*store)->GetStats().torn_records, 0u);
    EXPECT_TRUE(*(*store)->Read("big") == whole);
  }
}

// A pipelined stream of large direct records shares fdatasyncs (the flusher holds a
// round while direct writes keep coming) instead of one flush per record.
TEST(DirectIoTest, PipelinedLargeRecordsShareFlushes) {
  StoreOptions o = MixOptions(FreshDir("direct-batch"), Durability::kDurable);
  o.segment_bytes = 64 << 20;
  o.flush_threads = 1;
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string data = Pattern("batch", 1 << 20);
  const AlignedCopy buf(data);
  struct iovec iov = {const_cast<char*>(buf.data()), buf.size()};
  constexpr int kRecords = 24;
  std::atomic<int> fired{0};
  for (int i = 0; i < kRecords; ++i) {
    const std::string oid = "b" + std::to_string(i);
    ASSERT_TRUE((*store)->Append(oid, 0, &iov, 1, PayloadCrc(oid, buf.data(), buf.size()), 0,
                                 [&](absl::Status s) { fired += s.ok(); }).ok());
  }
  for (int spins = 0; fired.load() < kRecords && spins < 20000; ++spins) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(fired.load(), kRecords);
  const StoreStats st = (*store)->GetStats();
  SKIP_WITHOUT_DIRECT(**store, kRecords);
  EXPECT_EQ(st.direct_appends, static_cast<uint64_t>(kRecords));
  EXPECT_EQ(st.payload_bytes_copied, 0u) << "O_DIRECT writes go from the caller's memory";
  EXPECT_GT(st.max_batch, 1u) << st.ToString();
  EXPECT_LT(st.flushes, static_cast<uint64_t>(kRecords)) << st.ToString();
}

TEST(DirectIoTest, DisabledDirectIoKeepsThePackedLayout) {
  StoreOptions o = MixOptions(FreshDir("direct-off"), Durability::kDurable);
  o.direct_io = false;
  o.preallocate = false;
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  uint64_t tail = 0;
  const Rec r = Write(**store, &tail, "big", Pattern("big", 256 << 10), true);
  EXPECT_EQ((*store)->GetStats().direct_appends, 0u);
  store->reset();
  EXPECT_EQ(fs::file_size(OnlySegment(o.dir)), RecordBytes(3, 256 << 10));
  store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_TRUE(*(*store)->Read("big") == r.data);
}

}  // namespace
}  // namespace msgr::store

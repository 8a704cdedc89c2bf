// Torn tails and corruption: what recovery keeps, discards and reports.
#include <fcntl.h>
#include <unistd.h>

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

using testing::FreshDir;
using testing::OnlySegment;
using testing::Options;
using testing::Pattern;
using testing::Slurp;
using testing::Spit;
using testing::Put;

namespace fs = std::filesystem;

struct Written {
  std::string oid;
  std::string data;
  uint64_t pos = 0;  // record start in the (single) segment
  uint64_t end = 0;
};

// Writes `n` single-record objects of assorted sizes into a fresh store; returns where
// each record landed (one writer, one segment: records are back to back).
std::vector<Written> WriteObjects(const std::string& dir, int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<Written> out;
  StoreOptions o = Options(dir, Durability::kBuffered);
  o.segment_bytes = 4 << 20;  // one segment, preallocated: zeros after the last record
  auto store = ObjectStore::Open(o);
  EXPECT_TRUE(store.ok()) << store.status();
  uint64_t pos = 0;
  for (int i = 0; i < n; ++i) {
    Written w;
    w.oid = "obj-" + std::to_string(i);
    w.data = Pattern(w.oid, rng() % 3 == 0 ? 0 : rng() % 20000);
    w.pos = pos;
    w.end = pos + RecordBytes(w.oid.size(), w.data.size());
    pos = w.end;
    EXPECT_TRUE(Put(**store, w.oid, 0, w.data).ok());
    out.push_back(std::move(w));
  }
  return out;
}

TEST(RecoveryTest, TornTailAtRandomCutsKeepsEveryCompleteRecord) {
  const std::string src = FreshDir("torn-src");
  const std::vector<Written> objs = WriteObjects(src, 30, 1);
  std::string image = Slurp(OnlySegment(src));
  ASSERT_GE(image.size(), objs.back().end);
  // Past the last record: preallocated space, all zeros (and the scan calls it free).
  ASSERT_EQ(image.find_first_not_of('\0', objs.back().end), std::string::npos);
  image.resize(objs.back().end);
  std::mt19937_64 rng(7);
  for (int iter = 0; iter < 60; ++iter) {
    // Cuts anywhere, plus exact record boundaries now and then.
    uint64_t cut = rng() % (image.size() + 1);
    if (iter % 6 == 0) cut = objs[rng() % objs.size()].end;
    SCOPED_TRACE("cut at " + std::to_string(cut));
    const std::string dir = FreshDir("torn-" + std::to_string(iter));
    const std::string seg = dir + "/" + fs::path(OnlySegment(src)).filename().string();
    Spit(seg, std::string_view(image).substr(0, cut));
    {
      auto store = ObjectStore::Open(Options(dir, Durability::kDurable));
      ASSERT_TRUE(store.ok()) << store.status();
      size_t kept = 0;
      bool boundary = cut == 0;
      for (const Written& w : objs) {
        auto got = (*store)->Read(w.oid);
        if (w.end <= cut) {
          ASSERT_TRUE(got.ok()) << w.oid << ": " << got.status();
          ASSERT_TRUE(*got == w.data) << w.oid;
          ++kept;
          boundary |= w.end == cut;
        } else {
          ASSERT_EQ(got.status().code(), absl::StatusCode::kNotFound) << w.oid;
        }
      }
      const StoreStats st = (*store)->GetStats();
      EXPECT_EQ(st.recovered_records, kept);
      EXPECT_EQ(st.torn_records > 0, !boundary);
      EXPECT_EQ(st.corrupt_records, 0u);
      // The tail was cut: a new append follows valid data and survives a reopen.
      ASSERT_TRUE(Put(**store, "after", 0, Pattern("after", 5000)).ok());
    }
    auto store = ObjectStore::Open(Options(dir, Durability::kDurable));
    ASSERT_TRUE(store.ok()) << store.status();
    auto after = (*store)->Read("after");
    ASSERT_TRUE(after.ok()) << after.status();
    EXPECT_TRUE(*after == Pattern("after", 5000));
    EXPECT_EQ((*store)->GetStats().torn_records, 0u);
    fs::remove_all(dir);
  }
}

void FlipByte(const std::string& path, uint64_t off) {
  const int fd = ::open(path.c_str(), O_RDWR);
  ASSERT_GE(fd, 0);
  char c;
  ASSERT_EQ(::pread(fd, &c, 1, static_cast<off_t>(off)), 1);
  c ^= 0x10;
  ASSERT_EQ(::pwrite(fd, &c, 1, static_cast<off_t>(off)), 1);
  ::close(fd);
}

// Layout: v1 of "x", then filler, then v2 of "x", then "y", then more filler.
struct MidLog {
  std::string dir, seg;
  uint64_t x2_pos = 0, y_pos = 0;
};

MidLog WriteMidLog(const std::string& name) {
  MidLog m;
  m.dir = FreshDir(name);
  auto store = ObjectStore::Open(Options(m.dir, Durability::kBuffered));
  EXPECT_TRUE(store.ok());
  uint64_t pos = 0;
  auto put = [&](const std::string& oid, const std::string& data) {
    EXPECT_TRUE(Put(**store, oid, 0, data, kTruncate).ok());
    const uint64_t at = pos;
    pos += RecordBytes(oid.size(), data.size());
    return at;
  };
  put("x", Pattern("x", 3000, 1));
  for (int i = 0; i < 5; ++i) put("f" + std::to_string(i), Pattern("f", 4096, i));
  m.x2_pos = put("x", Pattern("x", 5000, 2));
  m.y_pos = put("y", Pattern("y", 7000));
  for (int i = 5; i < 10; ++i) put("f" + std::to_string(i), Pattern("f", 4096, i));
  m.seg = OnlySegment(m.dir);
  return m;
}

void ExpectFillers(ObjectStore& store) {
  for (int i = 0; i < 10; ++i) {
    auto got = store.Read("f" + std::to_string(i));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == Pattern("f", 4096, i));
  }
}

TEST(RecoveryTest, PayloadBitFlipMidLogServesPreviousVersion) {
  MidLog m = WriteMidLog("flip-payload");
  FlipByte(m.seg, m.x2_pos + sizeof(RecordHeader) + 1 + 2500);  // inside x v2's payload
  auto store = ObjectStore::Open(Options(m.dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  auto x = (*store)->Read("x");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(*x == Pattern("x", 3000, 1)) << "must be the previous valid version, not v2";
  auto y = (*store)->Read("y");
  ASSERT_TRUE(y.ok()) << y.status();
  EXPECT_TRUE(*y == Pattern("y", 7000));
  ExpectFillers(**store);
  EXPECT_EQ((*store)->GetStats().corrupt_records, 1u);
  EXPECT_EQ((*store)->GetStats().torn_records, 0u);
}

TEST(RecoveryTest, HeaderBitFlipMidLogResyncsOnNextRecord) {
  MidLog m = WriteMidLog("flip-header");
  FlipByte(m.seg, m.y_pos + 20);  // inside y's header (object offset field)
  auto store = ObjectStore::Open(Options(m.dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->Read("y").status().code(), absl::StatusCode::kNotFound);
  auto x = (*store)->Read("x");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_TRUE(*x == Pattern("x", 5000, 2));
  ExpectFillers(**store);  // the records after the damage are all still there
  EXPECT_EQ((*store)->GetStats().corrupt_records, 1u);
  EXPECT_GE((*store)->GetStats().corrupt_bytes, RecordBytes(1, 7000));
}

// A write of several records whose middle part is lost (corrupt, or never synced while
// the last part was) is not applied at all by recovery: the object keeps its previous
// version instead of reading zeros where the part was.
TEST(RecoveryTest, WriteOfSeveralRecordsMissingAMiddlePartIsDropped) {
  const std::string dir = FreshDir("multi-part-hole");
  StoreOptions o = Options(dir, Durability::kBuffered);
  o.segment_bytes = 4 << 20;
  const std::string v1 = Pattern("m", 3000, 1), v2 = Pattern("m", 3 * 2000, 2);
  uint64_t part1_pos = 0;
  {
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE(Put(**store, "m", 0, v1, kTruncate).ok());
    auto part = [&](int i, uint32_t flags, uint32_t id) {
      struct iovec iov = {const_cast<char*>(v2.data() + i * 2000), 2000};
      return (*store)->AppendPart("m", i * 2000, &iov, 1,
                                  PayloadCrc("m", v2.data() + i * 2000, 2000), flags, id,
                                  [](absl::Status) {});
    };
    auto first = part(0, kTruncate | kContinued, 0);
    ASSERT_TRUE(first.ok()) << first.status();
    const uint32_t id = WriteIdOf(*first);
    ASSERT_TRUE(part(1, kContinued, id).ok());
    ASSERT_TRUE(part(2, 0, id).ok());
    auto got = (*store)->Read("m");
    ASSERT_TRUE(got.ok() && *got == v2) << "complete before the damage";
    part1_pos = RecordBytes(1, v1.size()) + RecordBytes(1, 2000);
  }
  FlipByte(OnlySegment(dir), part1_pos + sizeof(RecordHeader) + 1 + 100);  // part 1's payload
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  auto got = (*store)->Read("m");
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(*got == v1) << "must be the previous version, not v2 with a hole";
  EXPECT_EQ((*store)->GetStats().corrupt_records, 1u);
  EXPECT_EQ((*store)->GetStats().writes_aborted, 1u);
}

TEST(RecoveryTest, CorruptionAfterOpenIsDataLossNotData) {
  MidLog m = WriteMidLog("flip-runtime");
  auto store = ObjectStore::Open(Options(m.dir, Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  FlipByte(m.seg, m.y_pos + sizeof(RecordHeader) + 1 + 10);
  auto y = (*store)->Read("y");
  EXPECT_EQ(y.status().code(), absl::StatusCode::kDataLoss) << y.status();
  EXPECT_NE(y.status().message().find("crc"), absl::string_view::npos);
  EXPECT_EQ((*store)->GetStats().read_crc_errors, 1u);
  ExpectFillers(**store);
}

// The store's format version (store_format.h, the FORMAT file): a new store records
// format 3 (delete records, relocated records); a store of a format this build does not
// read is refused before any segment is read, naming both; a format-1 or -2 store, or one
// made before the FORMAT file existed, opens and is marked format 3 (an older build would
// misread deletes or relocated records).
StoreOptions SmallSegments(const std::string& dir, Durability mode = Durability::kDurable) {
  StoreOptions o = Options(dir, mode);
  o.segment_bytes = 1 << 20;  // preallocated: keep the segment small enough to compare
  return o;
}

std::string MakeStoreWithObjects(const std::string& name) {
  const std::string dir = FreshDir(name);
  auto store = ObjectStore::Open(SmallSegments(dir));
  EXPECT_TRUE(store.ok()) << store.status();
  if (!store.ok()) return dir;
  for (const char* oid : {"a", "b"}) {
    auto t = Put(**store, oid, 0, Pattern(oid, 3000));
    EXPECT_TRUE(t.ok()) << t.status();
    if (t.ok()) {
      EXPECT_TRUE((*store)->WaitDurable(*t).ok());
    }
  }
  return dir;
}

void ExpectObjects(const std::string& dir) {
  auto store = ObjectStore::Open(SmallSegments(dir));
  ASSERT_TRUE(store.ok()) << store.status();
  for (const char* oid : {"a", "b"}) {
    auto got = (*store)->Read(oid);
    ASSERT_TRUE(got.ok()) << oid << ": " << got.status();
    EXPECT_TRUE(*got == Pattern(oid, 3000)) << oid;
  }
}

TEST(StoreFormatTest, NewStoreRecordsFormat3) {
  const std::string dir = MakeStoreWithObjects("format-new");
  EXPECT_EQ(Slurp(dir + "/FORMAT"), "msgr object store format 3\n");
}

TEST(StoreFormatTest, Format1StoreOpensAndIsMarkedFormat3) {
  const std::string dir = MakeStoreWithObjects("format-1");
  Spit(dir + "/FORMAT", "msgr object store format 1\n");
  ExpectObjects(dir);
  EXPECT_EQ(Slurp(dir + "/FORMAT"), "msgr object store format 3\n");
}

TEST(StoreFormatTest, Format2StoreOpensAndIsMarkedFormat3) {
  const std::string dir = MakeStoreWithObjects("format-2");
  Spit(dir + "/FORMAT", "msgr object store format 2\n");
  ExpectObjects(dir);
  EXPECT_EQ(Slurp(dir + "/FORMAT"), "msgr object store format 3\n");
}

TEST(StoreFormatTest, StoreOfAFutureFormatIsRefusedNamingBothVersionsAndLeftAlone) {
  const std::string dir = MakeStoreWithObjects("format-future");
  const std::string seg = OnlySegment(dir);
  const std::string before = Slurp(seg);
  Spit(dir + "/FORMAT", "msgr object store format 4\n");
  for (Durability mode : {Durability::kDurable, Durability::kBuffered}) {
    auto store = ObjectStore::Open(SmallSegments(dir, mode));
    ASSERT_FALSE(store.ok()) << "a format-4 store must not be opened by a format-3 build";
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
    EXPECT_EQ(std::string(store.status().message()),
              "store in " + dir +
                  " has format 4, this OSD reads formats 1 to 3: use a matching msgr build or "
                  "a new --data-dir");
  }
  EXPECT_TRUE(Slurp(seg) == before) << "refused before recovery touched a segment";
  EXPECT_EQ(Slurp(dir + "/FORMAT"), "msgr object store format 4\n") << "its FORMAT stays";
  Spit(dir + "/FORMAT", "msgr object store format 3\n");
  ExpectObjects(dir);
}

TEST(StoreFormatTest, StoreMadeBeforeTheFormatFileOpensAndIsMarkedFormat3) {
  // What the previous code left in a data directory: LOCK and segments, no FORMAT.
  const std::string dir = MakeStoreWithObjects("format-old");
  ASSERT_TRUE(fs::remove(dir + "/FORMAT"));
  ExpectObjects(dir);
  EXPECT_EQ(Slurp(dir + "/FORMAT"), "msgr object store format 3\n") << "written on open";
  ExpectObjects(dir);
}

TEST(StoreFormatTest, UnreadableFormatFileIsRefused) {
  const std::string dir = MakeStoreWithObjects("format-garbage");
  for (const char* text : {"", "msgr object store format \n", "msgr object store format x1\n",
                           "some other program's FORMAT\n"}) {
    Spit(dir + "/FORMAT", text);
    auto store = ObjectStore::Open(SmallSegments(dir));
    ASSERT_FALSE(store.ok()) << "'" << text << "'";
    EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition) << store.status();
    EXPECT_NE(store.status().message().find("unreadable FORMAT file"), absl::string_view::npos)
        << store.status();
    EXPECT_NE(store.status().message().find(dir), absl::string_view::npos) << store.status();
  }
}

}  // namespace
}  // namespace msgr::store

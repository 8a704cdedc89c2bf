// Zeroing ahead of the log's tail (StoreOptions::zero_ahead_bytes): a flusher writes
// zeros over the active segment ahead of its tail after rounds of small records, never
// after rounds of large ones; a record never lands in a range while it is being zeroed
// (the zeros would erase it); what was appended reads back, before and after a reopen.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/record.h"
#include "osd_sim/store/segment_file.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;
using testing::Put;

StoreOptions ZeroOptions(const std::string& dir) {
  StoreOptions o = Options(dir, Durability::kDurable);
  o.segment_bytes = 16 << 20;
  o.zero_ahead_bytes = 1 << 20;
  o.zero_chunk_bytes = 256 << 10;
  o.zero_round_max_bytes = 64 << 10;
  return o;
}

std::string Oid(int i) { return "obj-" + std::to_string(i); }

void ExpectAllReadBack(ObjectStore& store, int n, size_t len) {
  for (int i = 0; i < n; ++i) {
    auto got = store.Read(Oid(i));
    ASSERT_TRUE(got.ok()) << Oid(i) << ": " << got.status();
    ASSERT_TRUE(*got == Pattern(Oid(i), len)) << Oid(i) << " differs";
  }
}

#define SKIP_WITHOUT_UNWRITTEN_EXTENTS(dir)                                                 \
  if (!HasUnwrittenExtents(dir))                                                           \
  GTEST_SKIP() << (dir) << " is not on ext2/3/4 or XFS: the store does not zero ahead there"

// Holds the store's first zeroing (its hook blocks until `release`) and says which range
// it claimed. Declared before the store: the store's flusher calls it.
struct HeldZeroing {
  std::atomic<uint64_t> begin{0}, end{0};
  std::atomic<int> calls{0};
  absl::Notification claimed, release;

  void Install(StoreOptions* o) {
    o->zero_hook = [this](uint64_t, uint64_t b, uint64_t e) {
      if (calls.fetch_add(1) != 0) return;  // hold the first chunk only
      begin = b;
      end = e;
      claimed.Notify();
      release.WaitForNotificationWithTimeout(absl::Seconds(60));
    };
  }
};

// Waits (up to 30 s) until `n` appends have waited for a zeroing; returns how many have.
uint64_t WaitForZeroWaits(ObjectStore& store, uint64_t n) {
  for (int i = 0; i < 3000 && store.GetStats().zero_waits < n; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return store.GetStats().zero_waits;
}

TEST(ZeroAheadTest, SmallRecordsAreZeroedAheadAndReadBackAfterAReopen) {
  const std::string dir = FreshDir("zero-small");
  SKIP_WITHOUT_UNWRITTEN_EXTENTS(dir);
  constexpr int kRecords = 800;  // 4 KiB each: the tail passes several zeroed chunks
  {
    auto opened = ObjectStore::Open(ZeroOptions(dir));
    ASSERT_TRUE(opened.ok()) << opened.status();
    for (int i = 0; i < kRecords; ++i) {
      auto t = Put(**opened, Oid(i), 0, Pattern(Oid(i), 4096));
      ASSERT_TRUE(t.ok()) << t.status();
      ASSERT_TRUE((*opened)->WaitDurable(*t).ok());  // one small round per record
    }
    const StoreStats st = (*opened)->GetStats();
    // 3.2 MiB of records, each round 4 KiB: zeroing keeps up to 1 MiB ahead.
    EXPECT_GE(st.zeroed_bytes, uint64_t{3} << 20) << st.ToString();
    EXPECT_EQ(st.zeroed_bytes % (256 << 10), 0u) << st.ToString();
    ExpectAllReadBack(**opened, kRecords, 4096);
  }
  auto reopened = ObjectStore::Open(ZeroOptions(dir));
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  const StoreStats st = (*reopened)->GetStats();
  EXPECT_EQ(st.recovered_records, static_cast<uint64_t>(kRecords)) << st.ToString();
  EXPECT_EQ(st.torn_records, 0u) << st.ToString();
  EXPECT_EQ(st.corrupt_records, 0u) << st.ToString();
  ExpectAllReadBack(**reopened, kRecords, 4096);
  // And appends go on after the zeroed range the last run left.
  auto t = Put(**reopened, Oid(kRecords), 0, Pattern(Oid(kRecords), 4096));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*reopened)->WaitDurable(*t).ok());
  ExpectAllReadBack(**reopened, kRecords + 1, 4096);
}

TEST(ZeroAheadTest, RoundsOfLargeRecordsZeroNothing) {
  StoreOptions o = ZeroOptions(FreshDir("zero-large"));
  auto opened = ObjectStore::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  for (int i = 0; i < 40; ++i) {  // 128 KiB rounds: above zero_round_max_bytes
    auto t = Put(**opened, Oid(i), 0, Pattern(Oid(i), 128 << 10));
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*opened)->WaitDurable(*t).ok());
  }
  const StoreStats st = (*opened)->GetStats();
  EXPECT_EQ(st.zeroed_bytes, 0u) << st.ToString();
  EXPECT_GE(st.flushes, 40u) << st.ToString();
  ExpectAllReadBack(**opened, 40, 128 << 10);
}

TEST(ZeroAheadTest, OffWritesNoZeros) {
  StoreOptions o = ZeroOptions(FreshDir("zero-off"));
  o.zero_ahead_bytes = 0;
  auto opened = ObjectStore::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  for (int i = 0; i < 100; ++i) {
    auto t = Put(**opened, Oid(i), 0, Pattern(Oid(i), 4096));
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE((*opened)->WaitDurable(*t).ok());
  }
  EXPECT_EQ((*opened)->GetStats().zeroed_bytes, 0u);
}

// The zeroing of the first chunk is held (the hook blocks) while a writer appends past
// its start: the writer must wait at the range's edge until the zeros are written, then
// go on into it. Without that wait its records would land first and the zeros after.
TEST(ZeroAheadTest, AnAppendWaitsForTheZeroingOfItsRange) {
  StoreOptions o = ZeroOptions(FreshDir("zero-race"));
  SKIP_WITHOUT_UNWRITTEN_EXTENTS(o.dir);
  HeldZeroing held;
  held.Install(&o);
  auto opened = ObjectStore::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ObjectStore& store = **opened;
  auto first = Put(store, Oid(0), 0, Pattern(Oid(0), 4096));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(store.WaitDurable(*first).ok());  // a small round: the zeroing starts
  ASSERT_TRUE(held.claimed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_GT(held.end.load(), held.begin.load());

  // Enough 4 KiB records to reach past the held range's end.
  const int records = static_cast<int>(held.end.load() / 4096) + 8;
  std::atomic<int> appended{1};
  std::atomic<int> errors{0};
  std::thread writer([&] {
    for (int i = 1; i < records; ++i) {
      if (!Put(store, Oid(i), 0, Pattern(Oid(i), 4096)).ok()) ++errors;
      appended = i + 1;
    }
  });
  // The writer stops at the range's edge and waits there.
  EXPECT_GE(WaitForZeroWaits(store, 1), 1u);
  const int before = appended.load();
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_EQ(appended.load(), before) << "appends went on while their range was being zeroed";
  EXPECT_LT(static_cast<uint64_t>(before) * 4096, held.end.load());
  held.release.Notify();
  writer.join();
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(appended.load(), records);
  auto last = Put(store, Oid(records), 0, Pattern(Oid(records), 4096));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_TRUE(store.WaitDurable(*last).ok());
  ExpectAllReadBack(store, records + 1, 4096);
}

// Appends that waited at the edge of a range being zeroed are checked against the
// capacity when they go on, not before they waited: with room for two more records, two of
// four waiting writers succeed and two are refused as full.
TEST(ZeroAheadTest, AppendsThatWaitedForAZeroingStillRespectTheCapacity) {
  StoreOptions o = ZeroOptions(FreshDir("zero-capacity"));
  SKIP_WITHOUT_UNWRITTEN_EXTENTS(o.dir);
  auto oid = [](int i) {
    char b[16];
    std::snprintf(b, sizeof b, "w%04d", i);
    return std::string(b);
  };
  const uint64_t rb = RecordBytes(oid(0).size(), 4096);
  // The store zeroes its first chunk from AlignUp(rb, page) + chunk after record 0's round;
  // record n waits if AlignUp(n * rb, 4 KiB) + rb passes that.
  const uint64_t chunk = std::min(o.zero_chunk_bytes, o.zero_ahead_bytes / 2);
  const uint64_t begin = AlignUp(rb, 4096) + chunk;
  int n = 1;
  while (AlignUp(n * rb, 4096) + rb <= begin) ++n;
  o.capacity_bytes = (n + 2) * rb;
  HeldZeroing held;
  held.Install(&o);
  auto opened = ObjectStore::Open(o);
  ASSERT_TRUE(opened.ok()) << opened.status();
  ObjectStore& store = **opened;
  auto first = Put(store, oid(0), 0, Pattern(oid(0), 4096));
  ASSERT_TRUE(first.ok()) << first.status();
  ASSERT_TRUE(store.WaitDurable(*first).ok());
  ASSERT_TRUE(held.claimed.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(held.begin.load(), begin);
  for (int i = 1; i < n; ++i) ASSERT_TRUE(Put(store, oid(i), 0, Pattern(oid(i), 4096)).ok());
  std::atomic<int> ok{0}, full{0}, other{0};
  std::vector<std::thread> writers;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      auto t = Put(store, oid(n + w), 0, Pattern(oid(n + w), 4096));
      if (t.ok()) {
        ++ok;
      } else if (absl::IsResourceExhausted(t.status())) {
        ++full;
      } else {
        ++other;
      }
    });
  }
  EXPECT_EQ(WaitForZeroWaits(store, 4), 4u) << "the writers did not all wait at the edge";
  held.release.Notify();
  for (auto& t : writers) t.join();
  EXPECT_EQ(ok.load(), 2);
  EXPECT_EQ(full.load(), 2);
  EXPECT_EQ(other.load(), 0);
  const StoreStats st = store.GetStats();
  EXPECT_LE(st.log_bytes, o.capacity_bytes) << st.ToString();
}

}  // namespace
}  // namespace msgr::store

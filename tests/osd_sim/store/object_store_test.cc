// Round trips, offsets, overwrites and reopen, in every durability mode.
#include "osd_sim/store/object_store.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "msg/base/thread_cpu.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;
using testing::Put;

std::string ModeName(const ::testing::TestParamInfo<Durability>& info) {
  switch (info.param) {
    case Durability::kDurable: return "Durable";
    case Durability::kBuffered: return "Buffered";
    default: return "Memory";
  }
}

class ObjectStoreTest : public ::testing::TestWithParam<Durability> {
 protected:
  void SetUp() override {
    std::string name = ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = FreshDir("store-" + name);
    Reopen();
  }
  void Reopen() {
    store_.reset();
    auto s = ObjectStore::Open(Options(dir_, GetParam()));
    ASSERT_TRUE(s.ok()) << s.status();
    store_ = std::move(*s);
  }
  void PutDurable(std::string_view oid, uint64_t off, std::string_view data, uint32_t flags = 0) {
    auto t = Put(*store_, oid, off, data, flags);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(store_->WaitDurable(*t).ok());
  }
  void ExpectObject(std::string_view oid, const std::string& want) {
    auto got = store_->Read(oid);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size());
    EXPECT_TRUE(*got == want) << "object " << oid << " differs";
  }
  bool persistent() const { return GetParam() != Durability::kMemory; }

  std::string dir_;
  std::unique_ptr<ObjectStore> store_;
};

TEST_P(ObjectStoreTest, RoundTripSizes) {
  for (size_t len : {size_t{0}, size_t{1}, size_t{4096}, size_t{4} << 20}) {
    const std::string oid = "obj-" + std::to_string(len);
    PutDurable(oid, 0, Pattern(oid, len));
    ExpectObject(oid, Pattern(oid, len));
  }
  StoreStats st = store_->GetStats();
  EXPECT_EQ(st.appends, 4u);
  EXPECT_EQ(st.objects, 4u);
  EXPECT_EQ(st.append_bytes, 1u + 4096u + (4u << 20));
  if (GetParam() != Durability::kDurable) {  // memory: its own copy; buffered: page cache
    EXPECT_EQ(st.payload_bytes_copied, st.append_bytes);
  } else {
    EXPECT_GT(st.thread_cpu_ns, 0u) << "the store threads' CPU";
  }
  if (!persistent()) return;
  Reopen();
  for (size_t len : {size_t{0}, size_t{1}, size_t{4096}, size_t{4} << 20}) {
    const std::string oid = "obj-" + std::to_string(len);
    ExpectObject(oid, Pattern(oid, len));
  }
  EXPECT_EQ(store_->GetStats().recovered_records, 4u);
  EXPECT_EQ(store_->GetStats().torn_records, 0u);
}

// thread_cpu_ns (perf dump store.thread_cpu_ns) is the CPU of the store's threads, read
// from their clocks by whoever asks: the flusher's is there as soon as a durable write is
// acknowledged, and the asker's own CPU is not counted.
TEST_P(ObjectStoreTest, ThreadCpuIsTheStoreThreadsNotTheReaders) {
  if (GetParam() != Durability::kDurable) GTEST_SKIP() << "only durable mode has flushers";
  PutDurable("cpu", 0, Pattern("cpu", 4096));
  const uint64_t after_write = store_->GetStats().thread_cpu_ns;
  EXPECT_GT(after_write, 0u) << "the flusher synced the write";
  // The store is idle now (its threads wait); this thread burns 50 ms of its own.
  const uint64_t until = ThisThreadCpuNs() + 50'000'000;
  volatile uint64_t x = 0;
  while (ThisThreadCpuNs() < until) {
    for (int i = 0; i < 1000; ++i) x = x + i;
  }
  EXPECT_LT(store_->GetStats().thread_cpu_ns - after_write, 10'000'000u)
      << "the reader's CPU counted as the store's";
}

TEST_P(ObjectStoreTest, ChunkedWritesAtOffsetsAndIovecs) {
  const std::string whole = Pattern("chunky", 1 << 20);
  // Out of order, 64 KiB chunks, each chunk as three iovecs.
  std::vector<uint64_t> offs;
  for (uint64_t o = 0; o < whole.size(); o += 65536) offs.push_back(o);
  std::reverse(offs.begin(), offs.end());
  for (uint64_t o : offs) {
    struct iovec iov[3] = {{const_cast<char*>(whole.data() + o), 1000},
                           {const_cast<char*>(whole.data() + o + 1000), 0},
                           {const_cast<char*>(whole.data() + o + 1000), 65536 - 1000}};
    auto t = store_->Append("chunky", o, iov, 3, PayloadCrc("chunky", whole.data() + o, 65536), 0);
    ASSERT_TRUE(t.ok()) << t.status();
    ASSERT_TRUE(store_->WaitDurable(*t).ok());
  }
  ExpectObject("chunky", whole);
  // A write past the end leaves a hole of zeros.
  PutDurable("holey", 100, "abc");
  ExpectObject("holey", std::string(100, '\0') + "abc");
  if (!persistent()) return;
  Reopen();
  ExpectObject("chunky", whole);
  ExpectObject("holey", std::string(100, '\0') + "abc");
}

TEST_P(ObjectStoreTest, OverwriteAndTruncate) {
  PutDurable("o", 0, std::string(8192, 'a'));
  PutDurable("o", 4096, std::string(100, 'b'));  // partial overwrite keeps the size
  std::string want = std::string(8192, 'a');
  want.replace(4096, 100, std::string(100, 'b'));
  ExpectObject("o", want);
  PutDurable("o", 0, "short", kTruncate);  // replaces the object
  ExpectObject("o", "short");
  PutDurable("o", 0, "", kTruncate);
  ExpectObject("o", "");
  PutDurable("p", 0, std::string(10, 'x'));
  PutDurable("p", 0, std::string(20, 'y'));  // fully covers: older extent pruned
  ExpectObject("p", std::string(20, 'y'));
  if (!persistent()) return;
  Reopen();
  ExpectObject("o", "");
  ExpectObject("p", std::string(20, 'y'));
}

TEST_P(ObjectStoreTest, NotFoundAndBadArguments) {
  auto r = store_->Read("nope");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("nope"), absl::string_view::npos);
  EXPECT_EQ(Put(*store_, "", 0, "x").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Put(*store_, std::string(kMaxOidBytes + 1, 'o'), 0, "x").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Put(*store_, "o", 1, "x", kTruncate).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Put(*store_, "o", 0, "x", 0x80).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->WaitDurable(12345).code(), absl::StatusCode::kInvalidArgument);
}

TEST_P(ObjectStoreTest, CallbackFiresOnceWithOk) {
  int fired = 0;
  absl::Status got = absl::UnknownError("not fired");
  std::string data = Pattern("cb", 4096);
  struct iovec iov = {data.data(), data.size()};
  auto t = store_->Append("cb", 0, &iov, 1, PayloadCrc("cb", data.data(), data.size()), 0,
                          [&](absl::Status s) { ++fired; got = s; });
  ASSERT_TRUE(t.ok());
  ASSERT_TRUE(store_->WaitDurable(*t).ok());  // callbacks for one ticket fire in order
  EXPECT_EQ(fired, 1);
  EXPECT_TRUE(got.ok()) << got;
  if (GetParam() == Durability::kDurable) {
    EXPECT_GE(store_->GetStats().flushes, 1u);
  }
}

// Appends issued together, then waited for together: all durable and readable; an unknown
// ticket among them is the error returned, the others are still waited for.
TEST_P(ObjectStoreTest, WaitDurableOfSeveralTickets) {
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 8; ++i) {
    const std::string oid = "batch-" + std::to_string(i);
    auto t = Put(*store_, oid, 0, Pattern(oid, 4096));
    ASSERT_TRUE(t.ok()) << t.status();
    tickets.push_back(*t);
  }
  ASSERT_TRUE(store_->WaitDurable(tickets).ok());
  for (uint64_t t : tickets) {  // each one durable already: its callback runs right here
    bool fired = false;
    store_->WhenDurable(t, [&](absl::Status s) { fired = s.ok(); });
    EXPECT_TRUE(fired) << "ticket " << t << " not durable after WaitDurable(tickets)";
  }
  for (int i = 0; i < 8; ++i) {
    const std::string oid = "batch-" + std::to_string(i);
    auto r = store_->Read(oid);
    ASSERT_TRUE(r.ok()) << r.status();
    EXPECT_EQ(*r, Pattern(oid, 4096));
  }
  auto t = Put(*store_, "batch-last", 0, "x");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(store_->WaitDurable({tickets[0], 12345678, *t}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->WaitDurable(std::vector<uint64_t>{}).ok());
}

TEST_P(ObjectStoreTest, SecondOpenOfSameDirectoryFails) {
  if (!persistent()) GTEST_SKIP() << "memory mode has no directory";
  auto second = ObjectStore::Open(Options(dir_, GetParam()));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
}

TEST_P(ObjectStoreTest, SegmentsRollOver) {
  if (!persistent()) GTEST_SKIP() << "memory mode has no segments";
  store_.reset();
  StoreOptions o = Options(dir_, GetParam());
  o.segment_bytes = 64 << 10;
  auto s = ObjectStore::Open(o);
  ASSERT_TRUE(s.ok()) << s.status();
  store_ = std::move(*s);
  for (int i = 0; i < 40; ++i) PutDurable("r" + std::to_string(i), 0, Pattern("r", 10000, i));
  PutDurable("big", 0, Pattern("big", 200000));  // larger than a segment: a segment of its own
  EXPECT_GT(store_->GetStats().segments, 5u);
  store_.reset();
  s = ObjectStore::Open(o);
  ASSERT_TRUE(s.ok()) << s.status();
  store_ = std::move(*s);
  for (int i = 0; i < 40; ++i) ExpectObject("r" + std::to_string(i), Pattern("r", 10000, i));
  ExpectObject("big", Pattern("big", 200000));
  EXPECT_EQ(store_->GetStats().recovered_records, 41u);
}

// ---- Writes of several records (AppendPart): atomic.

class MultiPartTest : public ObjectStoreTest {
 protected:
  // Appends one part of `data`'s [off, off + len) and waits until it is durable; returns
  // its ticket (the write id of a first part is WriteIdOf(ticket)).
  uint64_t Part(std::string_view oid, const std::string& data, uint64_t off, uint64_t len,
                uint32_t flags, uint32_t write_id) {
    return testing::PutPart(*store_, oid, data, off, len, flags, write_id);
  }
  // Begins a write of `data` in `parts` equal parts and appends all but the last part;
  // returns its id.
  uint32_t BeginAllButLast(std::string_view oid, const std::string& data, int parts) {
    const uint64_t step = data.size() / parts;
    const uint32_t id = WriteIdOf(Part(oid, data, 0, step, kTruncate | kContinued, 0));
    for (int i = 1; i + 1 < parts; ++i) Part(oid, data, i * step, step, kContinued, id);
    return id;
  }
  void Finish(std::string_view oid, const std::string& data, int parts, uint32_t id) {
    const uint64_t step = data.size() / parts;
    Part(oid, data, (parts - 1) * step, data.size() - (parts - 1) * step, 0, id);
  }
};

TEST_P(MultiPartTest, PartsAreInvisibleUntilTheLastOneThenTheWholeWriteIs) {
  const std::string v1 = Pattern("big", 40000, 1), v2 = Pattern("big", 90000, 2);
  PutDurable("big", 0, v1, kTruncate);
  const uint32_t id = BeginAllButLast("big", v2, 3);
  ExpectObject("big", v1);  // two of three parts durable: still the old version
  if (persistent()) {
    // The writer dies here: on reopen the unfinished write is dropped.
    Reopen();
    ExpectObject("big", v1);
    EXPECT_EQ(store_->GetStats().writes_aborted, 1u);
    return;
  }
  Finish("big", v2, 3, id);
  ExpectObject("big", v2);
}

TEST_P(MultiPartTest, CompletedWriteSurvivesReopen) {
  const std::string v1 = Pattern("obj", 5000, 1), v2 = Pattern("obj", 30000, 2);
  PutDurable("obj", 0, v1, kTruncate);
  Finish("obj", v2, 4, BeginAllButLast("obj", v2, 4));
  ExpectObject("obj", v2);
  if (!persistent()) return;
  Reopen();
  ExpectObject("obj", v2);
  EXPECT_EQ(store_->GetStats().writes_aborted, 0u);
}

TEST_P(MultiPartTest, AbortedWriteNeverBecomesVisibleAndRefusesMoreParts) {
  const std::string v1 = Pattern("a", 3000, 1), v2 = Pattern("a", 6000, 2);
  PutDurable("a", 0, v1, kTruncate);
  const uint32_t id = BeginAllButLast("a", v2, 2);
  const uint64_t bytes_before = store_->GetStats().log_bytes;
  store_->AbortWrite("a", id);
  EXPECT_EQ(store_->GetStats().writes_aborted, 1u);
  if (!persistent()) {
    EXPECT_LT(store_->GetStats().log_bytes, bytes_before) << "memory freed";
  }
  struct iovec iov = {const_cast<char*>(v2.data() + 3000), 3000};
  auto t = store_->AppendPart("a", 3000, &iov, 1, PayloadCrc("a", v2.data() + 3000, 3000), 0,
                              id, [](absl::Status) {});
  EXPECT_EQ(t.status().code(), absl::StatusCode::kFailedPrecondition) << t.status();
  ExpectObject("a", v1);
  if (!persistent()) return;
  Reopen();
  ExpectObject("a", v1);
}

// Two writers' parts interleave in the log; the write whose last part lands last wins,
// whole -- at run time and after recovery alike.
TEST_P(MultiPartTest, InterleavedWritesOfOneObjectEachApplyWhole) {
  const std::string a = Pattern("x", 20000, 1), b = Pattern("x", 12000, 2);
  const uint32_t ida = BeginAllButLast("x", a, 2);
  const uint32_t idb = BeginAllButLast("x", b, 2);
  EXPECT_NE(ida, idb);
  Finish("x", b, 2, idb);
  ExpectObject("x", b);
  Finish("x", a, 2, ida);  // began first, completes last: it is the object now
  ExpectObject("x", a);
  if (!persistent()) return;
  Reopen();
  ExpectObject("x", a);
}

TEST_P(MultiPartTest, BadPartsAreRefused) {
  const std::string d = Pattern("p", 2000);
  struct iovec iov = {const_cast<char*>(d.data()), d.size()};
  const uint32_t crc = PayloadCrc("p", d.data(), d.size());
  auto none = [](absl::Status) {};
  // A later part of a write never begun.
  EXPECT_EQ(store_->AppendPart("p", 0, &iov, 1, crc, kContinued, 12345, none).status().code(),
            absl::StatusCode::kFailedPrecondition);
  // kTruncate on a later part.
  const uint32_t id = BeginAllButLast("p", d + d, 2);
  EXPECT_EQ(store_->AppendPart("p", 0, &iov, 1, crc, kTruncate, id, none).status().code(),
            absl::StatusCode::kInvalidArgument);
  // A last part that does not start where the previous one ended (a gap) is refused --
  // not stored, dropped, and reported written -- and the write with it.
  EXPECT_EQ(store_->AppendPart("p", 3000, &iov, 1, crc, 0, id, none).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->AppendPart("p", 2000, &iov, 1, crc, 0, id, none).status().code(),
            absl::StatusCode::kFailedPrecondition)
      << "the write must be dropped with its bad part";
  EXPECT_EQ(store_->Read("p").status().code(), absl::StatusCode::kNotFound);
}

// Delete, ranged reads, stat and listing (the object CLI's store side).
TEST_P(ObjectStoreTest, DeletedObjectIsGoneAfterReopenUntilWrittenAgain) {
  PutDurable("doomed", 0, Pattern("doomed", 5000));
  PutDurable("kept", 0, Pattern("kept", 100));
  auto t = store_->Delete("doomed");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(store_->WaitDurable(*t).ok());
  EXPECT_EQ(store_->Read("doomed").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Stat("doomed").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->Delete("doomed").status().code(), absl::StatusCode::kNotFound)
      << "a second delete finds nothing";
  EXPECT_EQ(store_->Delete("never").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(store_->GetStats().objects, 1u);
  if (persistent()) {
    Reopen();  // recovery replays the delete record after the write it deletes
    EXPECT_EQ(store_->Read("doomed").status().code(), absl::StatusCode::kNotFound);
    ExpectObject("kept", Pattern("kept", 100));
    EXPECT_EQ(store_->GetStats().objects, 1u);
  }
  PutDurable("doomed", 0, Pattern("doomed", 30, 2), kTruncate);
  ExpectObject("doomed", Pattern("doomed", 30, 2));
  if (persistent()) {
    Reopen();
    ExpectObject("doomed", Pattern("doomed", 30, 2));
  }
}

TEST_P(ObjectStoreTest, RangedReadsCutAtTheEndAndCheckEveryOverlappingWrite) {
  const std::string base = Pattern("r", 10000);
  PutDurable("r", 0, base);
  const std::string patch = Pattern("patch", 1000, 1);
  PutDurable("r", 4000, patch);  // a newer write inside the first
  std::string want = base;
  want.replace(4000, patch.size(), patch);
  for (auto [off, len] : std::vector<std::pair<uint64_t, uint64_t>>{
           {0, 10000}, {0, 1}, {3999, 2}, {4500, 100}, {4900, 5000}, {9999, 50}, {0, UINT64_MAX}}) {
    auto got = store_->Read("r", off, len);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_TRUE(*got == want.substr(off, len)) << "range " << off << "+" << len;
  }
  auto past = store_->Read("r", 10000, 10);
  ASSERT_TRUE(past.ok()) << past.status();
  EXPECT_TRUE(past->empty());
  auto size = store_->Stat("r");
  ASSERT_TRUE(size.ok()) << size.status();
  EXPECT_EQ(*size, 10000u);
  EXPECT_EQ(store_->Read("absent", 0, 10).status().code(), absl::StatusCode::kNotFound);
}

TEST_P(ObjectStoreTest, ListingPagesThroughExistingObjectsOfAPrefixInOrder) {
  for (int i = 0; i < 25; ++i) PutDurable("a/" + std::to_string(100 + i), 0, Pattern("x", i));
  PutDurable("b/1", 0, "b");
  auto t = store_->Delete("a/105");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE(store_->WaitDurable(*t).ok());
  std::vector<std::string> seen;
  std::string after;
  for (;;) {
    auto page = store_->List("a/", after, 10);
    if (page.empty()) break;
    EXPECT_LE(page.size(), 10u);
    for (const auto& o : page) {
      seen.push_back(o.oid);
      EXPECT_EQ(o.size, std::stoul(o.oid.substr(2)) - 100) << o.oid;
    }
    after = page.back().oid;
  }
  ASSERT_EQ(seen.size(), 24u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_EQ(std::count(seen.begin(), seen.end(), "a/105"), 0) << "deleted";
  EXPECT_EQ(store_->List("", "", 1000).size(), 25u);
  EXPECT_EQ(store_->List("c", "", 1000).size(), 0u);
}

// NextSeq orders the writes of later runs after a value kept from an earlier one (a
// returning primary's watermark, osd_sim/peering.h), and ListWrittenSince finds exactly
// the objects written or deleted since.
TEST_P(ObjectStoreTest, WritesAfterANextSeqAreListedSinceItAcrossReopen) {
  PutDurable("a/1", 0, "one");
  PutDurable("a/2", 0, "two");
  PutDurable("b/1", 0, "other prefix");
  const uint64_t mark = store_->NextSeq();
  EXPECT_TRUE(store_->ListWrittenSince("a/", "", mark, 10).empty());
  PutDurable("a/2", 0, "TWO", kTruncate);
  PutDurable("a/3", 0, "three");
  auto del = store_->Delete("a/1");
  ASSERT_TRUE(del.ok());
  ASSERT_TRUE(store_->WaitDurable(*del).ok());
  EXPECT_GT(store_->NextSeq(), mark);
  auto names = [&] {
    std::vector<std::string> out;
    for (const auto& w : store_->ListWrittenSince("a/", "", mark, 10)) {
      EXPECT_GE(w.seq, mark) << w.oid;
      out.push_back(w.oid + (w.deleted ? "-" : "+") + std::to_string(w.size));
    }
    return out;
  };
  const std::vector<std::string> want{"a/1-0", "a/2+3", "a/3+5"};
  EXPECT_EQ(names(), want);
  if (!persistent()) return;
  Reopen();
  EXPECT_GE(store_->NextSeq(), mark + 3) << "recovery continues after the log's seqs";
  EXPECT_EQ(names(), want);
  PutDurable("a/4", 0, "four");
  EXPECT_EQ(store_->ListWrittenSince("a/", "a/3", mark, 10).back().oid, "a/4");
}

INSTANTIATE_TEST_SUITE_P(Modes, MultiPartTest,
                         ::testing::Values(Durability::kDurable, Durability::kBuffered,
                                           Durability::kMemory),
                         ModeName);

INSTANTIATE_TEST_SUITE_P(Modes, ObjectStoreTest,
                         ::testing::Values(Durability::kDurable, Durability::kBuffered,
                                           Durability::kMemory),
                         ModeName);

}  // namespace
}  // namespace msgr::store

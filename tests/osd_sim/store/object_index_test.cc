// The index applies writes by seq, whatever order they arrive in.
#include "osd_sim/store/object_index.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "osd_sim/store/record.h"

namespace msgr::store {
namespace {

Extent E(uint64_t seq, uint64_t off, uint64_t len) {
  Extent e;
  e.seq = seq;
  e.object_off = off;
  e.len = len;
  return e;
}

TEST(ObjectIndexTest, OutOfOrderArrivalMatchesSeqOrder) {
  ObjectIndex a, b;
  // seq 2 overwrites seq 1 completely; seq 3 truncates; seq 4 extends.
  a.Apply("o", E(1, 0, 100), false);
  a.Apply("o", E(2, 0, 200), false);
  b.Apply("o", E(2, 0, 200), false);
  b.Apply("o", E(1, 0, 100), false);  // late arrival of an older, covered write: dropped
  for (ObjectIndex* ix : {&a, &b}) {
    auto e = ix->Lookup("o");
    ASSERT_TRUE(e.has_value());
    ASSERT_EQ(e->extents.size(), 1u);
    EXPECT_EQ(e->extents[0].seq, 2u);
    EXPECT_EQ(e->Size(), 200u);
  }
  a.Apply("o", E(4, 50, 10), false);
  a.Apply("o", E(3, 0, 20), true);  // truncate arrives after a newer write
  auto e = a.Lookup("o");
  ASSERT_EQ(e->extents.size(), 2u);
  EXPECT_EQ(e->extents[0].seq, 3u);
  EXPECT_EQ(e->extents[1].seq, 4u);
  EXPECT_EQ(e->Size(), 60u);
  a.Apply("o", E(1, 0, 1000), false);  // older than the truncate: ignored
  EXPECT_EQ(a.Lookup("o")->Size(), 60u);
  EXPECT_FALSE(a.Lookup("missing").has_value());
}

TEST(ObjectIndexTest, DeleteAppliesBySeqWhateverTheArrivalOrder) {
  ObjectIndex a;
  a.Apply("o", E(1, 0, 100), false);
  EXPECT_EQ(a.Delete("o", 2), 100u) << "the deleted write's bytes are freed";
  EXPECT_FALSE(a.Lookup("o").has_value());
  EXPECT_EQ(a.object_count(), 0u);
  EXPECT_EQ(a.Apply("o", E(1, 0, 100), false), 100u) << "older than the delete: dropped";
  EXPECT_FALSE(a.Lookup("o").has_value());
  a.Apply("o", E(3, 0, 7), false);  // newer: the object exists again
  ASSERT_TRUE(a.Lookup("o").has_value());
  EXPECT_EQ(a.Lookup("o")->Size(), 7u);
  EXPECT_EQ(a.object_count(), 1u);

  ObjectIndex b;  // a delete that arrives after a newer write leaves that write
  b.Apply("o", E(1, 0, 100), false);
  b.Apply("o", E(3, 0, 5), false);
  b.Delete("o", 2);
  ASSERT_TRUE(b.Lookup("o").has_value());
  EXPECT_EQ(b.Lookup("o")->Size(), 5u);
  EXPECT_EQ(b.object_count(), 1u);
  b.Delete("never", 4);  // recovery may meet a delete of an object it has not seen
  EXPECT_EQ(b.Apply("never", E(1, 0, 9), false), 9u);
  EXPECT_FALSE(b.Lookup("never").has_value());
  EXPECT_EQ(b.object_count(), 1u);
  EXPECT_EQ(b.List("", "", 10).size(), 1u);
}

TEST(ObjectIndexTest, ListPagesThroughOnePrefixInOrderSkippingDeleted) {
  ObjectIndex ix;
  // Inserted out of order, around the prefix's range on both sides.
  for (const char* oid : {"b/3", "a/9", "b/1", "c/1", "b/2", "b/5", "b", "b/4", "b0"}) {
    ix.Apply(oid, E(1, 0, 10), false);
  }
  ix.Delete("b/4", 2);
  std::vector<std::string> seen;
  std::string after;
  for (;;) {
    auto page = ix.List("b/", after, 2);
    ASSERT_LE(page.size(), 2u);
    for (const auto& o : page) {
      seen.push_back(o.oid);
      EXPECT_EQ(o.size, 10u);
    }
    if (page.size() < 2) break;
    after = page.back().oid;
  }
  EXPECT_EQ(seen, (std::vector<std::string>{"b/1", "b/2", "b/3", "b/5"}));
  EXPECT_EQ(ix.List("b/", "b/2", 10).size(), 2u) << "after an id in the range";
  EXPECT_EQ(ix.List("b/", "a", 10).size(), 4u) << "after an id before the range";
  EXPECT_TRUE(ix.List("b/", "b/9", 10).empty()) << "after the range";
  EXPECT_EQ(ix.List("", "", 100).size(), 8u);
  EXPECT_TRUE(ix.List("", "", 0).empty());
}

// A returning primary's candidates (osd_sim/peering.h): every object of a prefix whose
// current state -- a write or a delete -- applies at or after a seq, deleted ones included.
TEST(ObjectIndexTest, ListWrittenSinceDatesEachObjectByItsNewestWriteOrDelete) {
  ObjectIndex ix;
  ix.Apply("p/old", E(1, 0, 10), false);
  ix.Apply("p/rewritten", E(2, 0, 10), false);
  ix.Apply("p/gone", E(3, 0, 10), false);
  ix.Apply("q/new", E(4, 0, 10), false);
  ix.Apply("p/rewritten", E(5, 0, 4), false);  // partly over: both extents stay
  ix.Delete("p/gone", 6);
  ix.Apply("p/new", E(7, 0, 20), false);
  auto since = [&](uint64_t seq, std::string_view after = "") {
    std::vector<std::string> out;
    for (const auto& w : ix.ListWrittenSince("p/", after, seq, 10)) {
      out.push_back(absl::StrCat(w.oid, w.deleted ? "(deleted)" : "", "@", w.seq, ":", w.size));
    }
    return out;
  };
  EXPECT_EQ(since(5), (std::vector<std::string>{"p/gone(deleted)@6:0", "p/new@7:20",
                                                 "p/rewritten@5:10"}));
  EXPECT_EQ(since(7), (std::vector<std::string>{"p/new@7:20"}));
  EXPECT_TRUE(since(8).empty());
  EXPECT_EQ(since(0).size(), 4u) << "every entry of the prefix, q/ left out";
  EXPECT_EQ(since(0, "p/new"), (std::vector<std::string>{"p/old@1:10", "p/rewritten@5:10"}));
  EXPECT_EQ(ix.ListWrittenSince("p/", "", 0, 1).size(), 1u) << "a page of at most max";
  // Written again after its delete: it exists, dated by the new write.
  ix.Apply("p/gone", E(8, 0, 3), true);
  EXPECT_EQ(since(8), (std::vector<std::string>{"p/gone@8:3"}));
}

TEST(ObjectIndexTest, PartialOverlapsKeepBothAndZeroLengthSetsSize) {
  ObjectIndex ix;
  ix.Apply("o", E(1, 0, 100), false);
  ix.Apply("o", E(2, 50, 100), false);
  ix.Apply("o", E(3, 500, 0), false);
  auto e = ix.Lookup("o");
  ASSERT_EQ(e->extents.size(), 3u);
  EXPECT_EQ(e->Size(), 500u);
  EXPECT_EQ(ix.object_count(), 1u);
}

// An older write hidden by several newer ones together is dropped, whichever arrives
// first, and its bytes are freed (memory mode keeps only what can still be read).
TEST(ObjectIndexTest, AWriteHiddenByNewerOnesTogetherIsDropped) {
  for (bool old_last : {false, true}) {
    ObjectIndex ix;
    uint64_t freed = 0;
    if (!old_last) freed += ix.Apply("o", E(1, 0, 100), false);
    freed += ix.Apply("o", E(2, 0, 60), false);
    freed += ix.Apply("o", E(4, 90, 30), false);
    EXPECT_EQ(ix.Lookup("o")->extents.size(), old_last ? 2u : 3u);
    freed += ix.Apply("o", E(3, 50, 45), false);  // with 2 and 4, covers all of 1
    if (old_last) freed += ix.Apply("o", E(1, 0, 100), false);
    auto e = ix.Lookup("o");
    ASSERT_EQ(e->extents.size(), 3u) << old_last;
    EXPECT_EQ(e->extents[0].seq, 2u);
    EXPECT_EQ(freed, 100u) << old_last;
    EXPECT_EQ(e->Size(), 120u);
  }
  ObjectIndex ix;  // a gap keeps it
  ix.Apply("o", E(1, 0, 100), false);
  ix.Apply("o", E(2, 0, 50), false);
  ix.Apply("o", E(3, 51, 49), false);
  EXPECT_EQ(ix.Lookup("o")->extents.size(), 3u);
}

// In segment `seg`, a record of `bytes`.
Extent At(Extent e, uint64_t seg, uint64_t file_off, uint64_t bytes) {
  e.segment_id = seg;
  e.file_off = file_off;
  e.record_bytes = bytes;
  return e;
}

TEST(ObjectIndexTest, LiveBytesFollowTheExtentsPerSegment) {
  ObjectIndex ix;
  ix.Apply("a", At(E(1, 0, 100), 1, 48, 160), false);
  ix.Apply("b", At(E(2, 0, 100), 1, 208, 160), false);
  ix.Apply("a", At(E(3, 50, 10), 2, 48, 64), false);  // partial overlap: both stay
  EXPECT_EQ(ix.LiveBytes(1), 320u);
  EXPECT_EQ(ix.LiveBytes(2), 64u);
  EXPECT_EQ(ix.live_bytes(), 384u);
  ix.Apply("a", At(E(4, 0, 0), 2, 200, 56), true);  // truncate to 0: a's old extents go
  EXPECT_EQ(ix.LiveBytes(1), 160u);
  EXPECT_EQ(ix.LiveBytes(2), 56u);
  ix.Delete("b", 5);
  EXPECT_EQ(ix.LiveBytes(1), 0u);
  EXPECT_EQ(ix.live_bytes(), 56u);
  // An older write that arrives late and is covered never counts.
  ix.Apply("a", At(E(6, 0, 10), 3, 48, 64), false);
  ix.Apply("a", At(E(5, 2, 3), 3, 200, 56), false);
  EXPECT_EQ(ix.LiveBytes(3), 64u);
}

TEST(ObjectIndexTest, RelocateMovesALiveExtentAndRefusesAReplacedOne) {
  ObjectIndex ix;
  const Extent old = At(E(1, 0, 100), 1, 48, 160);
  ix.Apply("o", old, false);
  EXPECT_TRUE(ix.Relocate("o", old, 7, 1000, 168));
  EXPECT_EQ(ix.LiveBytes(1), 0u);
  EXPECT_EQ(ix.LiveBytes(7), 168u);
  const Extent moved = ix.Lookup("o")->extents[0];
  EXPECT_EQ(moved.segment_id, 7u);
  EXPECT_EQ(moved.file_off, 1000u);
  EXPECT_EQ(moved.seq, 1u) << "a copy keeps the seq of the write it copies";
  EXPECT_FALSE(ix.Relocate("o", old, 8, 0, 168)) << "not there any more: moved";
  ix.Apply("o", At(E(2, 0, 100), 2, 48, 160), false);  // a newer write covers it
  EXPECT_FALSE(ix.Relocate("o", moved, 8, 0, 168)) << "replaced: the copy is dead";
  EXPECT_EQ(ix.LiveBytes(7), 0u);
  ix.Delete("o", 3);
  EXPECT_FALSE(ix.Relocate("o", moved, 8, 0, 1)) << "deleted";
  EXPECT_FALSE(ix.Relocate("none", moved, 8, 0, 1));
}

// Recovery may find a write and its copy (a crash came between copying and unlinking the
// old segment): in either order, one extent remains, counted once.
TEST(ObjectIndexTest, ACopyBesideItsOriginalIsOneExtent) {
  for (bool copy_first : {false, true}) {
    ObjectIndex ix;
    const Extent original = At(E(5, 0, 100), 1, 48, 160);
    const Extent copy = At(E(5, 0, 100), 9, 56, 168);
    ix.Apply("o", copy_first ? copy : original, true);
    ix.Apply("o", copy_first ? original : copy, true);
    auto e = ix.Lookup("o");
    ASSERT_EQ(e->extents.size(), 1u) << copy_first;
    EXPECT_EQ(ix.live_bytes(), copy_first ? 168u : 160u);
    EXPECT_EQ(e->trunc_seq, 5u);
  }
  // A write of several records, committed from its parts, and copies of its parts, which
  // are writes of one record each at the write's seq.
  ObjectIndex ix;
  Extent first = At(E(10, 0, 100), 1, 48, 160);
  const uint32_t id = WriteIdOf(10);
  ix.BeginWrite("m", id, first, /*truncate=*/true);
  EXPECT_TRUE(ix.HasOpenParts(1));
  uint64_t dropped = 0;
  ASSERT_TRUE(ix.Commit("m", id, At(E(12, 100, 50), 2, 48, 104), &dropped).has_value());
  EXPECT_FALSE(ix.HasOpenParts(1));
  auto e = ix.Lookup("m");
  ASSERT_EQ(e->extents.size(), 2u);
  EXPECT_EQ(e->extents[0].first_seq, 10u);
  EXPECT_EQ(e->extents[1].first_seq, 10u);
  EXPECT_EQ(e->trunc_seq, 12u);
  EXPECT_EQ(e->trunc_first_seq, 10u) << "the write's records span seqs 10..12";
  ix.Apply("m", At(E(12, 100, 50), 3, 56, 112), true);  // copy of the second part
  ix.Apply("m", At(E(12, 0, 100), 3, 200, 168), true);  // copy of the first part
  e = ix.Lookup("m");
  ASSERT_EQ(e->extents.size(), 2u);
  EXPECT_EQ(e->Size(), 150u);
  EXPECT_EQ(ix.live_bytes(), 160u + 104u);
}

TEST(ObjectIndexTest, OpenPartsAreCountedPerSegmentUntilCommitOrAbort) {
  ObjectIndex ix;
  const uint32_t id = WriteIdOf(1);
  ix.BeginWrite("p", id, At(E(1, 0, 10), 4, 0, 64), false);
  uint64_t dropped = 0;
  ASSERT_TRUE(ix.AddPart("p", id, At(E(2, 10, 10), 5, 0, 64), &dropped));
  EXPECT_TRUE(ix.HasOpenParts(4));
  EXPECT_TRUE(ix.HasOpenParts(5));
  EXPECT_EQ(ix.live_bytes(), 0u) << "an open write is not live yet";
  EXPECT_EQ(ix.OpenWrites().size(), 1u);
  ix.Abort("p", id);
  EXPECT_FALSE(ix.HasOpenParts(4));
  EXPECT_FALSE(ix.HasOpenParts(5));
  ix.BeginWrite("p", WriteIdOf(3), At(E(3, 0, 10), 6, 0, 64), false);
  EXPECT_EQ(ix.DropOpenWrites(), 1u);
  EXPECT_FALSE(ix.HasOpenParts(6));
}

}  // namespace
}  // namespace msgr::store

// The index applies writes by seq, whatever order they arrive in.
#include "osd_sim/store/object_index.h"

#include "gtest/gtest.h"

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

}  // namespace
}  // namespace msgr::store

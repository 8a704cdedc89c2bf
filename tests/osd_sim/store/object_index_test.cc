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

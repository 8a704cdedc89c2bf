#include "osd_sim/pg_log.h"

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace msgr::osd {
namespace {

const PgId kPg{1, 7};
const PgId kOtherPg{1, 8};

// MissedBy, sorted (its order is unspecified); {"<unknown>"} for nullopt.
std::vector<std::string> Missed(const PgLog& log, int osd, const PgId& pg = kPg) {
  std::optional<std::vector<std::string>> m = log.MissedBy(pg, osd);
  if (!m.has_value()) return {"<unknown>"};
  std::sort(m->begin(), m->end());
  return *m;
}

using Names = std::vector<std::string>;

TEST(PgLogTest, AMemberThatTookEveryCopyMissesNothing) {
  PgLog log;
  log.MarkInSync(kPg, 1, 0);
  log.MarkInSync(kPg, 2, 0);
  for (const char* oid : {"a", "b", "a"}) {
    PgLog::Ticket t = log.Append(kPg, oid, {1, 2});
    t.Resolved(1, true);
    t.Resolved(2, true);
  }
  EXPECT_EQ(Missed(log, 1), Names{});
  EXPECT_EQ(Missed(log, 2), Names{});
  EXPECT_EQ(log.stats().entries, 2u);  // "a" once: its newer entry stands for both
}

TEST(PgLogTest, AMemberLeftOutMissesExactlyTheObjectsWrittenMeanwhile) {
  PgLog log;
  log.MarkInSync(kPg, 1, 0);
  log.MarkInSync(kPg, 2, 0);
  {
    PgLog::Ticket t = log.Append(kPg, "before", {1, 2});
    t.Resolved(1, true);
    t.Resolved(2, true);
  }
  // osd.2 is down: the copies go to osd.1 only.
  for (const char* oid : {"x", "y", "x", "deleted"}) log.Append(kPg, oid, {1}).Resolved(1, true);
  EXPECT_EQ(Missed(log, 2), (Names{"deleted", "x", "y"}));
  EXPECT_EQ(Missed(log, 1), Names{});
  // Another PG's writes are not this PG's.
  log.Append(kOtherPg, "z", {}).Resolved(2, true);
  EXPECT_EQ(Missed(log, 2), (Names{"deleted", "x", "y"}));
}

TEST(PgLogTest, ARefusedLostOrUnreportedCopyCountsAsMissed) {
  PgLog log;
  for (int osd : {1, 2, 3}) log.MarkInSync(kPg, osd, 0);
  PgLog::Ticket a = log.Append(kPg, "a", {1, 2, 3});
  a.Resolved(1, false);  // refused
  a.Resolved(2, true);
  {
    PgLog::Ticket b = log.Append(kPg, "b", {1, 2, 3});
    b.Resolved(1, true);
    b.Resolved(2, true);
    // osd.3 never reports: the write is dropped (its store refused it, the OSD stopped).
  }
  EXPECT_EQ(Missed(log, 1), (Names{"a", "b"}));  // from its first miss on
  EXPECT_EQ(Missed(log, 2), Names{});
  // osd.3's "a" is still in flight: it holds its frontier before "a".
  EXPECT_EQ(Missed(log, 3), (Names{"a", "b"}));
  a.Resolved(3, true);
  EXPECT_EQ(Missed(log, 3), Names{"b"});
}

TEST(PgLogTest, AWriteTheLocalStoreFailedIsMissedEvenWhereItWasTaken) {
  PgLog log;
  log.MarkInSync(kPg, 1, 0);
  PgLog::Ticket t = log.Append(kPg, "a", {1});
  t.Resolved(1, true);
  t.Diverged();
  EXPECT_EQ(Missed(log, 1), Names{"a"});
}

TEST(PgLogTest, OnlyTrackedMembersOfTheLogsCopyAreKnown) {
  PgLog log;
  PgLog::Ticket t = log.Append(kPg, "a", {1});
  t.Resolved(1, true);
  EXPECT_EQ(Missed(log, 1), Names{"<unknown>"});  // never synced with this copy
  EXPECT_EQ(Missed(log, 5), Names{"<unknown>"});  // not a member at all
  log.MarkInSync(kPg, 1, 0);
  log.Append(kPg, "b", {}).Resolved(1, true);  // not sent: left out
  EXPECT_EQ(Missed(log, 1), Names{"b"});
  // The copy here stops being the PG's authority: everything is forgotten, and outcomes of
  // writes logged before are ignored.
  PgLog::Ticket late = log.Append(kPg, "c", {1});
  log.Reset(kPg);
  EXPECT_EQ(Missed(log, 1), Names{"<unknown>"});
  EXPECT_EQ(log.stats().entries, 0u);
  log.MarkInSync(kPg, 1, log.Head());
  late.Resolved(1, false);
  EXPECT_EQ(Missed(log, 1), Names{});
}

TEST(PgLogTest, ASyncForgetsWhatTheMemberMissedUpToItsPointOnly) {
  PgLog log;
  log.MarkInSync(kPg, 1, 0);
  log.Append(kPg, "a", {});  // missed
  PgLog::Ticket in_flight = log.Append(kPg, "b", {1});
  const uint64_t through = log.Head();
  log.Append(kPg, "c", {});  // missed, after the sync's point
  log.MarkInSync(kPg, 1, through);
  // "a" is synced; "b" is still in flight (a copy that fails later still counts); "c" came
  // after the point.
  EXPECT_EQ(Missed(log, 1), (Names{"b", "c"}));
  in_flight.Resolved(1, false);
  EXPECT_EQ(Missed(log, 1), (Names{"b", "c"}));
  log.MarkInSync(kPg, 1, log.Head());
  EXPECT_EQ(Missed(log, 1), Names{});
}

TEST(PgLogTest, AMemberWhoseMissedEntriesWereTrimmedIsUnknownUntilSynced) {
  PgLog log(/*max_entries=*/64);  // one PG: 64 entries
  log.MarkInSync(kPg, 1, 0);
  log.MarkInSync(kPg, 2, 0);
  // Rewriting the same objects never trims.
  for (int i = 0; i < 1000; ++i) {
    PgLog::Ticket t = log.Append(kPg, std::to_string(i % 10), {1, 2});
    t.Resolved(1, true);
    t.Resolved(2, true);
  }
  EXPECT_EQ(log.stats().trimmed, 0u);
  // osd.2 misses 100 distinct objects: more than the log keeps.
  for (int i = 0; i < 100; ++i) log.Append(kPg, "n" + std::to_string(i), {1}).Resolved(1, true);
  EXPECT_EQ(log.stats().entries, 64u);
  EXPECT_GT(log.stats().trimmed, 0u);
  EXPECT_EQ(Missed(log, 2), Names{"<unknown>"});
  EXPECT_EQ(Missed(log, 1), Names{});  // took every copy: the trim does not matter to it
  log.MarkInSync(kPg, 2, log.Head());  // a whole-copy sync
  log.Append(kPg, "after", {1});
  EXPECT_EQ(Missed(log, 2), Names{"after"});
}

TEST(PgLogTest, AMemberGoneForLongIsNoLongerFollowedUntilSynced) {
  PgLog log;
  log.MarkInSync(kPg, 1, 0);
  log.MarkInSync(kPg, 2, 0);
  // osd.2 misses 10,000 writes of the same ten objects: the log keeps ten entries, and
  // osd.2's marks stop at a bound.
  for (int i = 0; i < 10000; ++i) log.Append(kPg, std::to_string(i % 10), {1}).Resolved(1, true);
  EXPECT_EQ(log.stats().entries, 10u);
  EXPECT_EQ(Missed(log, 2), Names{"<unknown>"});
  EXPECT_EQ(Missed(log, 1), Names{});
  log.MarkInSync(kPg, 2, 0);  // trusted complete is not enough to know again
  EXPECT_EQ(Missed(log, 2), Names{"<unknown>"});
  log.MarkInSync(kPg, 2, log.Head());  // a sync as of a point is
  log.Append(kPg, "x", {1});
  EXPECT_EQ(Missed(log, 2), Names{"x"});
}

TEST(PgLogTest, WithNoEntriesAllowedNothingIsLoggedOrKnown) {
  PgLog log(/*max_entries=*/0);
  log.MarkInSync(kPg, 1, 0);
  PgLog::Ticket t = log.Append(kPg, "a", {1});
  t.Resolved(1, true);
  EXPECT_EQ(t.pos(), 0u);
  EXPECT_EQ(log.stats().entries, 0u);
  EXPECT_EQ(Missed(log, 1), Names{"<unknown>"});  // every returning member is backfilled
}

// A member down when this OSD starts to lead the PG (its previous primary): tracked from
// the log's start, asked only by that member returning as the primary, once the log is
// retired, and only if its copy was complete up to the map before the log began.
TEST(PgLogTest, AMemberDownAtTheStartIsKnownOnlyToItsReturnAsPrimary) {
  PgLog log;
  ASSERT_TRUE(log.TrackAbsent(kPg, 0, /*since_epoch=*/10));
  EXPECT_FALSE(log.TrackAbsent(kPg, 0, 10)) << "tracked already";
  log.MarkInSync(kPg, 1, 0);
  for (const char* oid : {"x", "y", "x"}) log.Append(kPg, oid, {1}).Resolved(1, true);
  EXPECT_FALSE(log.TrackAbsent(kPg, 3, 10)) << "entries before it would not be marked";
  // As a returning replica, its own writes are unknown here: backfill.
  EXPECT_EQ(Missed(log, 0), Names{"<unknown>"});
  EXPECT_FALSE(log.MissedByReturning(kPg, 0, 9).has_value()) << "this OSD still leads";
  log.Retire(kPg);
  EXPECT_EQ(Missed(log, 1), Names{"<unknown>"}) << "a retired log syncs no replica";
  auto missed = log.MissedByReturning(kPg, 0, /*as_of=*/9);
  ASSERT_TRUE(missed.has_value());
  std::sort(missed->begin(), missed->end());
  EXPECT_EQ(*missed, (Names{"x", "y"}));
  EXPECT_FALSE(log.MissedByReturning(kPg, 0, 8).has_value())
      << "complete only up to epoch 8: a map before 10 may have had writes it lacks";
  EXPECT_FALSE(log.MissedByReturning(kPg, 2, 9).has_value()) << "never tracked";
  // A member tracked while up needs no epoch.
  EXPECT_TRUE(log.MissedByReturning(kPg, 1, 1).has_value());
  // Another OSD's primary wrote to this copy: the log no longer describes it.
  log.CopyChanged(kOtherPg);
  EXPECT_TRUE(log.MissedByReturning(kPg, 0, 9).has_value());
  log.CopyChanged(kPg);
  EXPECT_FALSE(log.MissedByReturning(kPg, 0, 9).has_value());
  EXPECT_EQ(log.stats().entries, 0u);
}

TEST(PgLogTest, LeadingAgainDropsARetiredLogAndASyncEndsTrackingFromTheStart) {
  PgLog log;
  ASSERT_TRUE(log.TrackAbsent(kPg, 0, 5));
  log.Append(kPg, "a", {1}).Resolved(1, true);
  log.Retire(kPg);
  log.Retire(kPg);  // once is enough
  log.Reset(kPg);   // this OSD leads it again
  EXPECT_FALSE(log.MissedByReturning(kPg, 0, 5).has_value());
  log.CopyChanged(kPg);  // nothing retired left: nothing happens
  ASSERT_TRUE(log.TrackAbsent(kPg, 0, 7));
  log.MarkInSync(kPg, 0, log.Head());  // it came back as a replica and was backfilled
  log.Append(kPg, "b", {});
  EXPECT_EQ(Missed(log, 0), Names{"b"});
}

// The watermark: the store seq before which every write the primary logged was taken by
// every member it was sent to and by its own store.
TEST(PgLogTest, TheWatermarkStaysBeforeEveryWriteNotTakenEverywhere) {
  PgLog log;
  EXPECT_EQ(log.Watermark(kPg), 0u) << "no store seqs known";
  uint64_t seq = 100;
  log.SetSequenceSource([&seq] { return seq; });
  EXPECT_EQ(log.Watermark(kPg), 100u);
  PgLog::Ticket a = log.Append(kPg, "a", {1, 2});
  seq = 101;  // "a" is stored at 100
  PgLog::Ticket b = log.Append(kPg, "b", {1, 2});
  seq = 102;
  EXPECT_EQ(log.Watermark(kPg), 100u);
  EXPECT_EQ(log.Watermark(kOtherPg), 102u) << "another PG's writes do not hold it";
  a.Resolved(1, true);
  a.Resolved(2, true);
  a.Resolved(2, true);  // a repeated answer counts once
  EXPECT_EQ(log.Watermark(kPg), 100u) << "the local store has not answered for a";
  a.LocalDone();
  EXPECT_EQ(log.Watermark(kPg), 101u);
  b.LocalDone();
  b.Resolved(1, true);
  b.Resolved(2, false);  // refused: b's object may differ between members
  seq = 110;
  EXPECT_EQ(log.Watermark(kPg), 101u) << "a failed write holds it";
  {
    PgLog::Ticket c = log.Append(kPg, "c", {1});
    c.LocalDone();  // dropped before osd.1 answered
  }
  {
    PgLog::Ticket alone = log.Append(kOtherPg, "d", {});  // no member was sent a copy
  }
  EXPECT_EQ(log.Watermark(kOtherPg), 110u);
  // This copy was replaced from an authority's: everything before is settled.
  log.Resynced(kPg);
  seq = 120;
  EXPECT_EQ(log.Watermark(kPg), 120u);
  a.Resolved(1, false);  // late outcomes of forgotten writes are ignored
  EXPECT_EQ(log.Watermark(kPg), 120u);
  // The local store failed a write the members took.
  PgLog::Ticket e = log.Append(kPg, "e", {1});
  seq = 121;
  e.Resolved(1, true);
  e.Diverged();
  seq = 130;
  EXPECT_EQ(log.Watermark(kPg), 120u);
}

TEST(PgLogTest, ARestoredWatermarkHoldsUntilTheCopyIsResynced) {
  PgLog log;
  uint64_t seq = 500;
  log.SetSequenceSource([&seq] { return seq; });
  log.RestoreWatermark(kPg, 40);
  {
    PgLog::Ticket t = log.Append(kPg, "a", {1});
    t.Resolved(1, true);
    t.LocalDone();
  }
  seq = 600;
  EXPECT_EQ(log.Watermark(kPg), 40u) << "writes before the restart may not be anywhere else";
  log.Reset(kPg);
  EXPECT_EQ(log.Watermark(kPg), 40u) << "it is about this OSD's store, not the log's entries";
  log.Resynced(kPg);
  EXPECT_EQ(log.Watermark(kPg), 600u);
  PgLog none(/*max_entries=*/0);
  none.SetSequenceSource([] { return uint64_t{7}; });
  EXPECT_EQ(none.Watermark(kPg), 0u) << "without a log, nothing is tracked: unknown";
}

}  // namespace
}  // namespace msgr::osd

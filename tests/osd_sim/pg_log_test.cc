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

}  // namespace
}  // namespace msgr::osd

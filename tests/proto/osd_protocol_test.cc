#include "proto/osd_protocol.h"

#include <gtest/gtest.h>

namespace msgr::osd {
namespace {

TEST(OsdProtocolTest, ReadRoundTrip) {
  auto q = DecodeReadRequest(Encode(ReadRequest{5, "obj"}));
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->oid, "obj");
  ReadReply r{5, absl::StatusCode::kOk, "", std::string(100000, 'z')};
  auto p = DecodeReadReply(Encode(r));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->data, r.data);
}

TEST(OsdProtocolTest, TruncatedAndGarbageInputIsRejected) {
  Message m = Encode(ReadReply{5, absl::StatusCode::kOk, "", "data"});
  for (size_t n = 0; n < m.payload.size(); ++n) {
    Message cut{m.type, m.payload.substr(0, n)};
    EXPECT_FALSE(DecodeReadReply(cut).ok()) << "prefix " << n;
  }
  Message trailing{m.type, m.payload + "x"};
  EXPECT_FALSE(DecodeReadReply(trailing).ok());
  EXPECT_FALSE(DecodeReadRequest(Encode(ReadRequest{1, ""})).ok()) << "empty oid";
  EXPECT_FALSE(DecodeReadRequest(Message{kReadReply, ""}).ok()) << "wrong type";
}

TEST(OsdProtocolTest, RangedReadsRoundTripAndWholeReadsKeepTheOldWireForm) {
  Message whole = Encode(ReadRequest{5, "obj"});
  EXPECT_EQ(whole.payload.size(), 8u + 4u + 3u) << "tid and oid only, as before ranges";
  auto q = DecodeReadRequest(whole);
  ASSERT_TRUE(q.ok());
  EXPECT_EQ(q->offset, 0u);
  EXPECT_EQ(q->length, kToEnd);
  auto r = DecodeReadRequest(Encode(ReadRequest{6, "obj", 1 << 20, 4096}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->tid, 6u);
  EXPECT_EQ(r->offset, 1u << 20);
  EXPECT_EQ(r->length, 4096u);
  Message half = Encode(ReadRequest{6, "obj", 1, 2});
  half.payload.resize(half.payload.size() - 4);
  EXPECT_FALSE(DecodeReadRequest(half).ok()) << "a range cut short";
}

TEST(OsdProtocolTest, StatDeleteAndListRoundTrip) {
  for (MsgType t : {kStat, kDelete}) {
    auto q = DecodeObjectRequest(Encode(ObjectRequest{t, 9, "o"}));
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->type, t);
    EXPECT_EQ(q->tid, 9u);
    EXPECT_EQ(q->oid, "o");
  }
  EXPECT_FALSE(DecodeObjectRequest(Encode(ObjectRequest{kStat, 9, ""})).ok()) << "empty oid";
  EXPECT_FALSE(DecodeObjectRequest(Encode(ReadRequest{1, "o"})).ok()) << "wrong type";
  auto l = DecodeListRequest(Encode(ListRequest{3, "pre", "pre/7", 50}));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->prefix, "pre");
  EXPECT_EQ(l->after, "pre/7");
  EXPECT_EQ(l->max, 50u);

  auto st = DecodeStatBody(EncodeBody(StatBody{123456789012}));
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->size, 123456789012u);
  EXPECT_FALSE(DecodeStatBody("1234567").ok());
  ListBody lb{{{"a", 1}, {"b", 0}, {std::string(kMaxOidBytes, 'c'), 1ull << 40}}, true};
  const std::string enc = EncodeBody(lb);
  auto back = DecodeListBody(enc);
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->entries.size(), 3u);
  EXPECT_EQ(back->entries[2].size, 1ull << 40);
  EXPECT_TRUE(back->more);
  for (size_t n = 0; n < enc.size(); ++n) {
    EXPECT_FALSE(DecodeListBody(enc.substr(0, n)).ok()) << "prefix " << n;
  }
  std::string huge_count = enc;
  huge_count[3] = '\x7f';  // claims ~2^30 entries
  EXPECT_FALSE(DecodeListBody(huge_count).ok());

  Reply rep{4, absl::StatusCode::kNotFound, "no such object", ""};
  for (MsgType t : {kReadReply, kStatReply, kDeleteReply, kListReply}) {
    auto p = DecodeReply(Encode(rep, t));
    ASSERT_TRUE(p.ok()) << t;
    EXPECT_EQ(p->code, absl::StatusCode::kNotFound);
    EXPECT_EQ(p->error, "no such object");
  }
  EXPECT_FALSE(DecodeReadReply(Encode(rep, kStatReply)).ok()) << "only a read reply";
  EXPECT_FALSE(DecodeReply(Encode(ReadRequest{1, "o"})).ok()) << "a request is no reply";
}

// The pool id is a trailing u32 written only for pools other than 0: a message without it
// (every message of a build before pools) is a default-pool request, and a default-pool
// request is encoded byte for byte as before.
TEST(OsdProtocolTest, PoolIdRoundTripsAndTheOldEncodingMeansPoolZero) {
  EXPECT_EQ(Encode(ReadRequest{5, "obj"}).payload.size(), 8u + 4u + 3u);
  EXPECT_EQ(Encode(ObjectRequest{kStat, 5, "obj"}).payload.size(), 8u + 4u + 3u);
  EXPECT_EQ(Encode(ListRequest{5, "p", "", 10}).payload.size(), 8u + 4u + 1u + 4u + 4u);

  auto whole = DecodeReadRequest(Encode(ReadRequest{5, "obj", 0, kToEnd, 7}));
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(whole->pool, 7u);
  EXPECT_EQ(whole->offset, 0u);
  EXPECT_EQ(whole->length, kToEnd);
  auto ranged = DecodeReadRequest(Encode(ReadRequest{5, "obj", 10, 20, 3}));
  ASSERT_TRUE(ranged.ok());
  EXPECT_EQ(ranged->pool, 3u);
  EXPECT_EQ(ranged->offset, 10u);
  EXPECT_EQ(ranged->length, 20u);
  auto old_ranged = DecodeReadRequest(Encode(ReadRequest{5, "obj", 10, 20}));
  ASSERT_TRUE(old_ranged.ok());
  EXPECT_EQ(old_ranged->pool, 0u);
  for (MsgType t : {kStat, kDelete}) {
    auto q = DecodeObjectRequest(Encode(ObjectRequest{t, 9, "o", 12}));
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->pool, 12u);
    auto old = DecodeObjectRequest(Encode(ObjectRequest{t, 9, "o"}));
    ASSERT_TRUE(old.ok());
    EXPECT_EQ(old->pool, 0u);
  }
  auto l = DecodeListRequest(Encode(ListRequest{3, "pre", "pre/7", 50, 4}));
  ASSERT_TRUE(l.ok());
  EXPECT_EQ(l->pool, 4u);
  EXPECT_EQ(l->max, 50u);
  auto old_list = DecodeListRequest(Encode(ListRequest{3, "pre", "", 50}));
  ASSERT_TRUE(old_list.ok());
  EXPECT_EQ(old_list->pool, 0u);

  // An explicit pool 0, or a pool field cut short, is malformed: one encoding per request.
  Message stat = Encode(ObjectRequest{kStat, 9, "o", 1});
  Message zero = stat;
  zero.payload[zero.payload.size() - 4] = 0;
  EXPECT_FALSE(DecodeObjectRequest(zero).ok());
  Message cut = stat;
  cut.payload.resize(cut.payload.size() - 1);
  EXPECT_FALSE(DecodeObjectRequest(cut).ok());
  Message list = Encode(ListRequest{3, "pre", "", 50, 2});
  list.payload += "x";
  EXPECT_FALSE(DecodeListRequest(list).ok());
}

TEST(OsdProtocolTest, ScrubPagesCarryEachObjectsCrcAndListsStayAsTheyWere) {
  ListRequest q{9, "pre", "after", 64, 3, /*digest=*/true};
  const Message m = Encode(q);
  EXPECT_EQ(m.type, kScrub);
  auto back = DecodeListRequest(m);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(back->digest);
  EXPECT_EQ(back->prefix, "pre");
  EXPECT_EQ(back->pool, 3u);
  q.digest = false;
  const Message plain = Encode(q);
  EXPECT_EQ(plain.type, kList);
  EXPECT_EQ(plain.payload, m.payload) << "a scrub page is a list page by another type";
  EXPECT_FALSE(DecodeListRequest(plain)->digest);

  ListBody b;
  b.entries = {{"a", 4096, 0xdeadbeef}, {"b", 0, 7}};
  b.more = true;
  auto got = DecodeListBody(EncodeBody(b, /*digest=*/true), /*digest=*/true);
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->entries.size(), 2u);
  EXPECT_EQ(got->entries[0].crc32c, 0xdeadbeefu);
  EXPECT_EQ(got->entries[1].crc32c, 7u);
  EXPECT_TRUE(got->more);
  // A list body has no crcs: read as a scrub page (or the other way round) it is malformed.
  EXPECT_FALSE(DecodeListBody(EncodeBody(b), /*digest=*/true).ok());
  EXPECT_FALSE(DecodeListBody(EncodeBody(b, /*digest=*/true)).ok());
  EXPECT_EQ(DecodeListBody(EncodeBody(b))->entries[0].crc32c, 0u);
  EXPECT_TRUE(IsReply(kScrubReply));
}

TEST(OsdProtocolTest, PeeringRequestsRoundTripAndTheirRepliesAreReplies) {
  for (MsgType t : {kPgQuery, kPgList, kPgPush, kPgActivate, kPgRemove, kPgMissed}) {
    PgRequest r;
    r.type = t;
    r.tid = 9;
    r.pool = 2;
    r.pg = 0x1f;
    r.pg_num = 64;
    r.epoch = 77;
    const Message m = Encode(r);
    EXPECT_TRUE(IsPgRequest(m.type)) << t;
    auto back = DecodePgRequest(m);
    ASSERT_TRUE(back.ok()) << t << ": " << back.status();
    EXPECT_EQ(back->type, t);
    EXPECT_EQ(back->tid, 9u);
    EXPECT_EQ(back->pool, 2u);
    EXPECT_EQ(back->pg, 0x1fu);
    EXPECT_EQ(back->epoch, 77u);
    EXPECT_TRUE(IsReply(static_cast<uint16_t>(t + 1))) << "reply of " << t;
    EXPECT_FALSE(IsPgRequest(static_cast<uint16_t>(t + 1)));
  }
  EXPECT_FALSE(DecodePgRequest(Message{kRead, ""}).ok()) << "not a peering request";
}

// A returning primary's question to the OSD that led its PG meanwhile, and the answer.
TEST(OsdProtocolTest, PgMissedQueriesAndRepliesRoundTripAndRejectGarbage) {
  PgMissedQuery q;
  q.as_of_epoch = 41;
  q.candidates = {"a", "bb", ""};
  auto qb = DecodePgMissedQuery(EncodeBody(q));
  ASSERT_TRUE(qb.ok()) << qb.status();
  EXPECT_EQ(qb->as_of_epoch, 41u);
  EXPECT_EQ(qb->candidates, q.candidates);
  EXPECT_TRUE(DecodePgMissedQuery(EncodeBody(PgMissedQuery{})).ok()) << "no candidates";

  PgMissedBody b;
  b.known = true;
  b.present = {{"x", 4096, 0}, {"y", 0, 0}};
  b.absent = {"gone"};
  auto bb = DecodePgMissedBody(EncodeBody(b));
  ASSERT_TRUE(bb.ok()) << bb.status();
  EXPECT_TRUE(bb->known);
  ASSERT_EQ(bb->present.size(), 2u);
  EXPECT_EQ(bb->present[0].oid, "x");
  EXPECT_EQ(bb->present[0].size, 4096u);
  EXPECT_EQ(bb->absent, std::vector<std::string>{"gone"});
  PgMissedBody unknown;
  unknown.why = "osd.3 was not tracked";
  auto ub = DecodePgMissedBody(EncodeBody(unknown));
  ASSERT_TRUE(ub.ok());
  EXPECT_FALSE(ub->known);
  EXPECT_EQ(ub->why, unknown.why);

  // Truncated, trailing bytes, a count larger than the data: malformed, not read past.
  const std::string enc = EncodeBody(b);
  EXPECT_FALSE(DecodePgMissedBody(enc.substr(0, enc.size() - 1)).ok());
  EXPECT_FALSE(DecodePgMissedBody(enc + "x").ok());
  std::string huge = EncodeBody(PgMissedQuery{});
  huge[8] = '\xff';  // the candidates' count
  EXPECT_FALSE(DecodePgMissedQuery(huge).ok());
  EXPECT_FALSE(DecodePgMissedQuery("").ok());
  EXPECT_TRUE(IsPgRequest(kPgMissed));
  EXPECT_TRUE(IsReply(kPgMissedReply));
}

TEST(OsdProtocolTest, WriteFailuresAreDescribedForUsers) {
  EXPECT_NE(DescribeWriteFailure(absl::StatusCode::kResourceExhausted).find("full"),
            std::string::npos);
  EXPECT_NE(DescribeWriteFailure(absl::StatusCode::kInternal).find("INTERNAL"),
            std::string::npos);
}

}  // namespace
}  // namespace msgr::osd

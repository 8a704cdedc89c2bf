// The accepting side's session rule (msg/session/session_table.h), without sockets: what a
// peer that authenticated gets -- its session resumed, a new one, or a refusal -- and which
// sessions a new one ends.
#include "msg/session/session_table.h"

#include <memory>

#include "gtest/gtest.h"

namespace msgr::session {
namespace {

// What the table needs of a backend's connection.
struct FakeSession {
  EntityName name;
  uint64_t cookie_ = 0;
  bool lossless_ = true;
  bool connected = true;
  bool closed_ = false;
  EntityName peer_name() const { return name; }
  uint64_t cookie() const { return cookie_; }
  bool lossless() const { return lossless_; }
  bool is_connected() const { return connected; }
  bool closed() const { return closed_; }
};

const EntityName kClient4{EntityType::kClient, 4};
const EntityName kClient5{EntityType::kClient, 5};
const EntityName kOsd1{EntityType::kOsd, 1};

std::shared_ptr<FakeSession> Session(EntityName name, uint64_t cookie, bool lossless = true) {
  auto s = std::make_shared<FakeSession>();
  s->name = name;
  s->cookie_ = cookie;
  s->lossless_ = lossless;
  return s;
}

SessionRequest Request(EntityName peer, uint64_t cookie, bool had_session, bool lossless = true) {
  return SessionRequest{peer, cookie, lossless, had_session};
}

TEST(SessionTableTest, APeerThatHadTheSessionResumesItByCookie) {
  SessionTable<FakeSession> t;
  auto s = Session(kClient4, 77);
  s->connected = false;  // its link broke; the peer reconnects
  t.Insert(s);
  auto a = t.Admit(Request(kClient4, 77, /*had_session=*/true));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->resume, s);
  EXPECT_TRUE(a->replaced.empty());
}

TEST(SessionTableTest, AResumeUnderAnotherNameIsRefused) {
  SessionTable<FakeSession> t;
  t.Insert(Session(kClient4, 77));
  auto a = t.Admit(Request(kClient5, 77, /*had_session=*/true));
  ASSERT_FALSE(a.ok());
  EXPECT_EQ(a.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(a.status().message(), "session cookie belongs to client.4, not to client.5");
}

TEST(SessionTableTest, APeerThatNeverSawItsSessionOpenGetsANewOne) {
  // Its first handshake was cut after the server had made the session: the half-made one
  // goes, and a new one takes its cookie.
  SessionTable<FakeSession> t;
  auto half = Session(kClient4, 77);
  half->connected = false;
  t.Insert(half);
  auto a = t.Admit(Request(kClient4, 77, /*had_session=*/false));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->resume, nullptr);
  ASSERT_EQ(a->replaced.size(), 1u);
  EXPECT_EQ(a->replaced[0], half);
  auto fresh = Session(kClient4, 77);
  t.Insert(fresh);
  EXPECT_EQ(t.size(), 1u);
  t.Erase(half.get());  // the replaced one ending later does not remove its successor
  ASSERT_EQ(t.size(), 1u);
  EXPECT_EQ(t.All()[0], fresh);
}

TEST(SessionTableTest, APeerBackWithANewCookieReplacesItsUnlinkedSessionsOnly) {
  SessionTable<FakeSession> t;
  auto old_unlinked = Session(kClient4, 1);
  old_unlinked->connected = false;
  auto old_linked = Session(kClient4, 2);  // still connected: ends by its own fault
  auto other = Session(kClient5, 3);
  other->connected = false;
  auto osd = Session(kOsd1, 4);
  osd->connected = false;
  for (const auto& s : {old_unlinked, old_linked, other, osd}) t.Insert(s);
  auto a = t.Admit(Request(kClient4, 99, /*had_session=*/false));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->resume, nullptr);
  ASSERT_EQ(a->replaced.size(), 1u);
  EXPECT_EQ(a->replaced[0], old_unlinked);
  // The same rule for any peer type (an OSD that restarted).
  auto b = t.Admit(Request(kOsd1, 100, /*had_session=*/false));
  ASSERT_TRUE(b.ok());
  ASSERT_EQ(b->replaced.size(), 1u);
  EXPECT_EQ(b->replaced[0], osd);
}

TEST(SessionTableTest, AnEndedSessionIsNotResumed) {
  SessionTable<FakeSession> t;
  auto s = Session(kClient4, 77);
  s->closed_ = true;
  s->connected = false;
  t.Insert(s);
  auto a = t.Admit(Request(kClient4, 77, /*had_session=*/true));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->resume, nullptr);
}

TEST(SessionTableTest, LossySessionsAreListedButNeverResumedOrReplaced) {
  SessionTable<FakeSession> t;
  auto lossy = Session(kClient4, 77, /*lossless=*/false);
  lossy->connected = false;
  t.Insert(lossy);
  auto a = t.Admit(Request(kClient4, 77, /*had_session=*/true, /*lossless=*/false));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->resume, nullptr);
  EXPECT_TRUE(a->replaced.empty());
  // Two lossy sessions with one cookie are two sessions.
  t.Insert(Session(kClient4, 77, /*lossless=*/false));
  EXPECT_EQ(t.All().size(), 2u);
  t.Erase(lossy.get());
  EXPECT_EQ(t.All().size(), 1u);
  t.Clear();
  EXPECT_EQ(t.size(), 0u);
}

TEST(SessionTableTest, OneOpenSessionPerPeerAddressOnTheConnectingSide) {
  SessionTable<FakeSession> t;
  EXPECT_EQ(t.Outgoing("10.0.0.1:6800"), nullptr);
  auto s = Session(kOsd1, 5);
  t.InsertOutgoing("10.0.0.1:6800", s);
  EXPECT_EQ(t.Outgoing("10.0.0.1:6800"), s);
  EXPECT_EQ(t.Outgoing("10.0.0.2:6800"), nullptr);
  s->closed_ = true;  // over: Connect makes a new one, which takes its place
  EXPECT_EQ(t.Outgoing("10.0.0.1:6800"), nullptr);
  auto next = Session(kOsd1, 6);
  t.InsertOutgoing("10.0.0.1:6800", next);
  EXPECT_FALSE(t.Erase(s.get()));  // the ended one was already replaced
  EXPECT_EQ(t.Outgoing("10.0.0.1:6800"), next);
  // Outgoing sessions are listed with the accepted ones, but never admit a peer.
  t.Insert(Session(kClient4, 77));
  EXPECT_EQ(t.All().size(), 2u);
  EXPECT_EQ(t.Accepted().size(), 1u);
  auto a = t.Admit(Request(kOsd1, 6, /*had_session=*/true));
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->resume, nullptr);
  EXPECT_TRUE(t.Erase(next.get()));
  EXPECT_EQ(t.Outgoing("10.0.0.1:6800"), nullptr);
  EXPECT_EQ(t.size(), 1u);
}

}  // namespace
}  // namespace msgr::session

// The client's op engine against the fake backend: record splitting, acks, many ops in
// flight, OSD down/up, restart (OnRemoteReset), PG moves, timeouts, exactly-once.
#include "client/objecter.h"

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "tests/client/fake_backend.h"

namespace msgr::client {
namespace {

using testing::FakeCluster;

constexpr size_t kMaxPayload = 1000;

std::string Addr(int i) { return absl::StrCat("fake:", i); }

class ObjecterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    FakeCluster::Get().Reset(kMaxPayload);
    for (int i = 0; i < 3; ++i) {
      FakeCluster::Get().AddOsd(Addr(i));
      osds_.push_back(OsdEntry{static_cast<uint32_t>(i), Addr(i), true, true, 1.0, 1, {}});
    }
  }
  std::unique_ptr<Objecter> Make(absl::Duration timeout = absl::Seconds(10),
                                 size_t max_in_flight = 64, bool block = true,
                                 size_t queue_depth = 0) {
    ObjecterOptions o;
    o.queue_depth = queue_depth;
    o.messenger.type = "fake";
    o.messenger.name = EntityName{EntityType::kClient, 7};
    o.messenger.auth = AuthConfig::None();
    o.op_timeout = timeout;
    o.max_in_flight = max_in_flight;
    o.block_when_full = block;
    auto r = Objecter::Create(o);
    EXPECT_TRUE(r.ok()) << r.status();
    return std::move(*r);
  }
  void Publish(Objecter& o) { o.HandleMap(PlacementMap::Build(++epoch_, 64, osds_)); }
  // An oid whose primary is `osd` under the current entries.
  std::string OidOn(int osd, int n = 0) {
    PlacementMap m = PlacementMap::Build(1, 64, osds_);
    for (int i = 0;; ++i) {
      std::string oid = absl::StrCat("obj_", i);
      if (m.OsdOf(oid) == osd && n-- == 0) return oid;
    }
  }
  static std::shared_ptr<const std::string> Data(size_t n, char seed) {
    std::string s(n, '\0');
    for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(seed + i * 7);
    return std::make_shared<const std::string>(std::move(s));
  }

  std::vector<OsdEntry> osds_;
  uint64_t epoch_ = 0;
};

TEST_F(ObjecterTest, UnknownBackendErrorPassesThrough) {
  ObjecterOptions o;
  o.messenger.type = "carrier-pigeon";
  auto r = Objecter::Create(o);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("carrier-pigeon"), std::string::npos) << r.status();
}

TEST_F(ObjecterTest, LargeObjectIsSplitIntoRecordsAndReadsBack) {
  auto o = Make();
  Publish(*o);
  std::string oid = OidOn(1);
  auto data = Data(3 * kMaxPayload + 17, 'a');
  ASSERT_TRUE(o->Write(oid, data).ok());
  auto st = FakeCluster::Get().Stats(Addr(1));
  ASSERT_EQ(st.records, 4u);
  EXPECT_EQ(st.flags[0], kRecordFlagTruncate);
  EXPECT_EQ(st.flags[1], 0);
  EXPECT_EQ(st.flags[3], kRecordFlagLast);
  EXPECT_EQ(FakeCluster::Get().Object(Addr(1), oid), *data);
  auto back = o->Read(oid);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(*back, *data);
  // Rewriting with a smaller object replaces it.
  ASSERT_TRUE(o->Write(oid, Data(10, 'z')).ok());
  EXPECT_EQ(*o->Read(oid), *Data(10, 'z'));
  EXPECT_TRUE(o->Write(OidOn(1, 1), std::make_shared<const std::string>()).ok());
  EXPECT_EQ(FakeCluster::Get().Stats(Addr(1)).flags.back(),
            kRecordFlagTruncate | kRecordFlagLast);
  EXPECT_EQ(o->Read("missing").status().code(), absl::StatusCode::kNotFound);
}

TEST_F(ObjecterTest, ManyOpsInFlightCompleteExactlyOnce) {
  auto o = Make(absl::Seconds(10), 16);
  Publish(*o);
  constexpr int kOps = 500;
  std::vector<std::atomic<int>> calls(kOps);
  std::atomic<int> ok{0};
  absl::Notification all;
  std::atomic<int> remaining{kOps};
  for (int i = 0; i < kOps; ++i) {
    o->AsyncWrite(absl::StrCat("o", i), Data(100 + i * 5, static_cast<char>(i)),
                  [&, i](absl::Status s) {
                    calls[i]++;
                    if (s.ok()) ok++;
                    if (--remaining == 0) all.Notify();
                  });
    EXPECT_LE(o->in_flight(), 16u);
  }
  ASSERT_TRUE(all.WaitForNotificationWithTimeout(absl::Seconds(20)));
  EXPECT_EQ(ok.load(), kOps);
  for (int i = 0; i < kOps; ++i) EXPECT_EQ(calls[i].load(), 1) << i;
  for (int i = 0; i < kOps; i += 37) {
    EXPECT_EQ(*o->Read(absl::StrCat("o", i)), *Data(100 + i * 5, static_cast<char>(i)));
  }
}

// Each record tells its OSD how deep the client's queue to it is (RecordDesc::writer_depth):
// the other ops pending to that OSD, or the application's declared queue depth spread over
// the up OSDs, whichever is larger.
TEST_F(ObjecterTest, RecordsCarryTheClientsQueueDepthToTheirOsd) {
  const std::string addr = Addr(1);
  {
    auto o = Make();
    Publish(*o);
    // Acks held: the first write to osd.1 finds no other op pending there, the fourth
    // finds three.
    FakeCluster::Get().HoldAcks(addr, true);
    std::atomic<int> done{0};
    for (int i = 0; i < 4; ++i) {
      o->AsyncWrite(OidOn(1, i), Data(10, 'a'), [&](absl::Status s) {
        EXPECT_TRUE(s.ok()) << s;
        ++done;
      });
    }
    EXPECT_EQ(FakeCluster::Get().Stats(addr).writer_depths, (std::vector<uint16_t>{0, 1, 2, 3}));
    FakeCluster::Get().HoldAcks(addr, false);
    FakeCluster::Get().ReleaseAcks(addr);
    for (int i = 0; i < 500 && done.load() < 4; ++i) absl::SleepFor(absl::Milliseconds(10));
    ASSERT_EQ(done.load(), 4);
    // Completed ops no longer count: a lone write finds nothing pending.
    ASSERT_TRUE(o->Write(OidOn(1, 4), Data(10, 'b')).ok());
    EXPECT_EQ(FakeCluster::Get().Stats(addr).writer_depths.back(), 0);
  }
  {
    // A declared queue of 16 over 3 up OSDs: 5 per OSD, even for a lone write.
    auto o = Make(absl::Seconds(10), 64, true, /*queue_depth=*/16);
    Publish(*o);
    ASSERT_TRUE(o->Write(OidOn(1, 5), Data(10, 'c')).ok());
    EXPECT_EQ(FakeCluster::Get().Stats(addr).writer_depths.back(), 5);
    // One OSD down: the share grows to 8.
    osds_[2].up = false;
    Publish(*o);
    ASSERT_TRUE(o->Write(OidOn(1, 6), Data(10, 'd')).ok());
    EXPECT_EQ(FakeCluster::Get().Stats(addr).writer_depths.back(), 8);
  }
}

TEST_F(ObjecterTest, DownButInOsdKeepsOpsUntilItIsBack) {
  auto o = Make();
  osds_[2].up = false;
  Publish(*o);
  std::string oid = OidOn(2);
  absl::Notification done;
  absl::Status result = absl::UnknownError("unset");
  o->AsyncWrite(oid, Data(2500, 'q'), [&](absl::Status s) {
    result = s;
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(300)));
  EXPECT_FALSE(FakeCluster::Get().HasObject(Addr(2), oid));  // nothing moved elsewhere
  EXPECT_FALSE(FakeCluster::Get().HasObject(Addr(0), oid));
  osds_[2].up = true;
  osds_[2].up_from = 5;
  Publish(*o);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(FakeCluster::Get().Object(Addr(2), oid), *Data(2500, 'q'));
}

TEST_F(ObjecterTest, UnackedWritesAreResentAfterRemoteReset) {
  auto o = Make();
  Publish(*o);
  std::string oid = OidOn(0);
  FakeCluster::Get().HoldAcks(Addr(0), true);
  absl::Notification done;
  std::atomic<int> calls{0};
  o->AsyncWrite(oid, Data(1500, 'r'), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    calls++;
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  EXPECT_EQ(FakeCluster::Get().Stats(Addr(0)).records, 2u);
  // The OSD restarts: held acks are gone, the client must send the whole object again.
  FakeCluster::Get().HoldAcks(Addr(0), false);
  FakeCluster::Get().Restart(Addr(0));
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_EQ(FakeCluster::Get().Stats(Addr(0)).records, 4u);
  EXPECT_GE(o->counters().resends, 1u);
  FakeCluster::Get().ReleaseAcks(Addr(0));  // stale acks of the first attempt: ignored
  absl::SleepFor(absl::Milliseconds(50));
  EXPECT_EQ(calls.load(), 1);
}

TEST_F(ObjecterTest, DeadOsdTimesOutWithAClearError) {
  auto o = Make(absl::Milliseconds(600));
  osds_[1].up = false;
  Publish(*o);
  std::string oid = OidOn(1);
  absl::Time start = absl::Now();
  absl::Status s = o->Write(oid, Data(10, 'x'));
  absl::Duration took = absl::Now() - start;
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(s.message(), absl::StrCat("write of ", oid, " timed out after 600ms (osd.1 down)"));
  EXPECT_GE(took, absl::Milliseconds(590));
  EXPECT_LT(took, absl::Seconds(2));
  // An OSD that is up but never answers also times out.
  FakeCluster::Get().HoldAcks(Addr(0), true);
  s = o->Write(OidOn(0), Data(10, 'x'));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("osd.0 up, no reply"), std::string::npos) << s;
  EXPECT_EQ(o->counters().ops_timed_out, 2u);
}

// An OSD that is up but refuses the session (e.g. its RDMA registered-memory budget is
// full): the op's timeout error carries the OSD's reason, not just "no reply".
TEST_F(ObjecterTest, RefusedSessionTimesOutWithTheOsdsReason) {
  FakeCluster::Get().RefuseConnections(
      Addr(2), absl::ResourceExhaustedError("peer refused the connection: budget exhausted"));
  auto o = Make(absl::Milliseconds(500));
  Publish(*o);
  absl::Status s = o->Write(OidOn(2), Data(10, 'x'));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("osd.2 up, but connecting to it fails: RESOURCE_EXHAUSTED: peer "
                             "refused the connection: budget exhausted"),
            std::string::npos)
      << s;
  EXPECT_TRUE(o->Write(OidOn(0), Data(10, 'y')).ok()) << "other OSDs are served";
}

TEST_F(ObjecterTest, OpsFollowAPgThatMovesWhenTheOsdGoesOut) {
  auto o = Make();
  Publish(*o);
  std::string oid = OidOn(1);
  FakeCluster::Get().SetAlive(Addr(1), false);  // crashed; the map does not know yet
  absl::Notification done;
  absl::Status result;
  o->AsyncWrite(oid, Data(1200, 'm'), [&](absl::Status s) {
    result = s;
    done.Notify();
  });
  EXPECT_FALSE(done.WaitForNotificationWithTimeout(absl::Milliseconds(200)));
  osds_[1].up = false;
  osds_[1].in = false;  // the operator marks it out: its PGs move
  Publish(*o);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(result.ok()) << result;
  int now_on = PlacementMap::Build(9, 64, osds_).OsdOf(oid);
  ASSERT_NE(now_on, 1);
  EXPECT_EQ(FakeCluster::Get().Object(Addr(now_on), oid), *Data(1200, 'm'));
  EXPECT_EQ(*o->Read(oid), *Data(1200, 'm'));
}

// An OSD that died while the map still says up leaves its sender waiting for ring credit.
// Once the map marks it down the op parks -- the sending thread (here the caller's, often
// the retry thread that re-sends every OSD's ops) is free again -- and it is re-sent when
// the OSD is back, completing once.
TEST_F(ObjecterTest, SenderWaitingForCreditParksWhenTheMapMarksTheOsdDown) {
  auto o = Make(absl::Seconds(20));
  Publish(*o);
  const std::string oid = OidOn(1);
  FakeCluster::Get().StallWrites(Addr(1), true);
  absl::Notification returned, done;
  std::atomic<int> callbacks{0};
  absl::Status result;
  std::thread submitter([&] {
    o->AsyncWrite(oid, Data(10, 's'), [&](absl::Status s) {
      result = s;
      if (callbacks.fetch_add(1) == 0) done.Notify();
    });
    returned.Notify();
  });
  EXPECT_FALSE(returned.WaitForNotificationWithTimeout(absl::Milliseconds(300)))
      << "the fake should hold the sender as a ring without credit does";
  osds_[1].up = false;  // the monitor notices: down, still in (its PGs stay)
  Publish(*o);
  const absl::Time marked = absl::Now();
  const bool freed = returned.WaitForNotificationWithTimeout(absl::Seconds(3));
  EXPECT_TRUE(freed) << "the sender still waits for credit from an OSD the map says is down";
  if (freed) {
    EXPECT_LT(absl::Now() - marked, absl::Seconds(1));
    EXPECT_FALSE(done.HasBeenNotified()) << "parked, not failed: " << result;
  }
  FakeCluster::Get().StallWrites(Addr(1), false);
  submitter.join();
  osds_[1].up = true;
  Publish(*o);
  ASSERT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(result.ok()) << result;
  EXPECT_EQ(FakeCluster::Get().Object(Addr(1), oid), *Data(10, 's'));
  absl::SleepFor(absl::Milliseconds(300));  // a second callback would come by now
  EXPECT_EQ(callbacks.load(), 1);
}

// A map that moves an OSD (restart on a new address) while the client is connecting to
// the old one: that connection is dropped, not kept as the OSD's session.
TEST_F(ObjecterTest, ConnectionToAnAddressTheMapLeftMeanwhileIsNotUsed) {
  auto o = Make(absl::Seconds(5));
  Publish(*o);
  const std::string oid = OidOn(1);
  const std::string new_addr = "fake:1-restarted";
  FakeCluster::Get().AddOsd(new_addr);
  FakeCluster::Get().SetAlive(Addr(1), false);  // the old incarnation is gone
  bool moved = false;  // only the sending thread connects
  FakeCluster::Get().SetConnectHook([&](const std::string& addr) {
    if (addr != Addr(1) || moved) return;
    moved = true;
    osds_[1].addr = new_addr;
    osds_[1].up_from = 2;
    Publish(*o);
  });
  absl::Status s = o->Write(oid, Data(10, 'a'));
  FakeCluster::Get().SetConnectHook(nullptr);
  ASSERT_TRUE(moved);
  EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(FakeCluster::Get().Object(new_addr, oid), *Data(10, 'a'));
}

TEST_F(ObjecterTest, OpsSubmittedBeforeTheFirstMapWaitForIt) {
  auto o = Make();
  absl::Notification done;
  o->AsyncWrite("early", Data(5, 'e'), [&](absl::Status s) {
    EXPECT_TRUE(s.ok()) << s;
    done.Notify();
  });
  absl::SleepFor(absl::Milliseconds(50));
  Publish(*o);
  EXPECT_TRUE(done.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST_F(ObjecterTest, FullWithoutBlockingFailsFastAndShutdownCancelsPending) {
  auto o = Make(absl::Seconds(30), 2, /*block=*/false);
  Publish(*o);
  FakeCluster::Get().HoldAcks(Addr(0), true);
  std::atomic<int> cancelled{0};
  for (int i = 0; i < 2; ++i) {
    o->AsyncWrite(OidOn(0, i), Data(5, 'h'), [&](absl::Status s) {
      EXPECT_EQ(s.code(), absl::StatusCode::kCancelled) << s;
      cancelled++;
    });
  }
  absl::Status third;
  o->AsyncWrite(OidOn(0, 2), Data(5, 'h'), [&](absl::Status s) { third = s; });
  EXPECT_EQ(third.code(), absl::StatusCode::kResourceExhausted) << third;
  o->Shutdown();
  EXPECT_EQ(cancelled.load(), 2);
  o->Shutdown();  // idempotent
  EXPECT_EQ(o->Write("after", Data(1, 'a')).code(), absl::StatusCode::kCancelled);
}

TEST_F(ObjecterTest, OsdThatDoesNotServeTheBackendFailsClearly) {
  auto o = Make();
  for (auto& e : osds_) e.ms_types = {"tcp"};
  Publish(*o);
  absl::Status s = o->Write("x", Data(5, 'a'));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("does not serve ms_type fake"), std::string::npos) << s;
  EXPECT_EQ(o->Write("", Data(1, 'a')).code(), absl::StatusCode::kInvalidArgument);
}

// A map of another pool: writes go to that pool's placement with the pool-qualified name
// as the record's oid; an oid that would alias another pool's name, or that is too long
// once qualified, is refused before anything is sent.
TEST_F(ObjecterTest, WritesOfAPoolCarryItsQualifiedNameToItsPlacement) {
  auto o = Make();
  const PlacementMap pool9 = PlacementMap::Build(++epoch_, 64, osds_, {1, 1}, 9);
  o->HandleMap(pool9);
  EXPECT_EQ(o->pool_id(), 9u);
  const std::string oid = "obj_in_9";
  auto data = Data(50, 'q');
  ASSERT_TRUE(o->Write(oid, data).ok());
  const std::string addr = Addr(pool9.OsdOf(oid));
  EXPECT_EQ(FakeCluster::Get().Object(addr, placement::PoolObjectName(9, oid)), *data);
  EXPECT_EQ(FakeCluster::Get().Object(addr, oid), "") << "stored under its pool's name only";
  EXPECT_EQ(o->Write(std::string("\x01") + "9\x01x", data).code(),
            absl::StatusCode::kInvalidArgument);
  absl::Status too_long = o->Write(std::string(kMaxOidBytes - 2, 'l'), data);
  EXPECT_EQ(too_long.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(too_long.message().find("object id must be 1..253 bytes"), std::string::npos)
      << too_long;
}

}  // namespace
}  // namespace msgr::client

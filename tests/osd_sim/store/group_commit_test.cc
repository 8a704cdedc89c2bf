// Group commit: appends from many threads share fdatasync rounds, and no completion
// fires before the round covering it has finished.
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;

TEST(GroupCommitTest, ManyThreadsShareFlushes) {
  constexpr int kThreads = 8;
  constexpr int kPerThread = 50;
  constexpr int kTotal = kThreads * kPerThread;
  auto opened = ObjectStore::Open(Options(FreshDir("group"), Durability::kDurable));
  ASSERT_TRUE(opened.ok()) << opened.status();
  ObjectStore& store = **opened;

  std::atomic<int> fired{0};
  std::atomic<int> fired_before_flush{0};
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kPerThread; ++i) {
        const std::string oid = "t" + std::to_string(t) + "-" + std::to_string(i);
        std::string data = Pattern(oid, 4096);
        struct iovec iov = {data.data(), data.size()};
        auto ticket = store.Append(oid, 0, &iov, 1, PayloadCrc(oid, data.data(), data.size()), 0,
                                   [&](absl::Status s) {
                                     if (!s.ok()) ++errors;
                                     // The flush counter moves before its completions fire.
                                     if (store.GetStats().flushes == 0) ++fired_before_flush;
                                     ++fired;
                                   });
        if (!ticket.ok()) ++errors;
      }
    });
  }
  for (auto& th : threads) th.join();
  // Wait for the last completions.
  for (int spins = 0; fired.load() < kTotal && spins < 10000; ++spins) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(fired.load(), kTotal);
  EXPECT_EQ(errors.load(), 0);
  EXPECT_EQ(fired_before_flush.load(), 0);
  const StoreStats st = store.GetStats();
  EXPECT_EQ(st.appends, static_cast<uint64_t>(kTotal));
  EXPECT_EQ(st.flushed_appends, static_cast<uint64_t>(kTotal));
  EXPECT_LT(st.flushes, static_cast<uint64_t>(kTotal)) << st.ToString();
  EXPECT_GT(st.max_batch, 1u) << st.ToString();
  // Writers that keep several appends pending: rounds wait the window for them.
  EXPECT_LT(st.flushes_at_once * 4, st.flushes) << st.ToString();
  EXPECT_EQ(st.flush_latency.count, st.flushes);
  EXPECT_GT(st.flush_latency.sum_ns, 0u);
  for (int t = 0; t < kThreads; ++t) {
    for (int i = 0; i < kPerThread; ++i) {
      const std::string oid = "t" + std::to_string(t) + "-" + std::to_string(i);
      auto got = store.Read(oid);
      ASSERT_TRUE(got.ok()) << got.status();
      ASSERT_TRUE(*got == Pattern(oid, 4096));
    }
  }
}

// A writer with one append in flight at a time: each round has that append only, so after
// a few rounds the flusher stops waiting the window for others (with a 50 ms window, each
// append would otherwise wait 50 ms for nobody). Adaptive off: every round waits it.
int RoundsAtOnceOfALoneWriter(bool adaptive) {
  StoreOptions o = Options(FreshDir(adaptive ? "lone-adaptive" : "lone-fixed"), Durability::kDurable);
  o.group_commit_window = absl::Milliseconds(50);
  o.adaptive_group_commit = adaptive;
  auto opened = ObjectStore::Open(o);
  EXPECT_TRUE(opened.ok()) << opened.status();
  if (!opened.ok()) return -1;
  ObjectStore& store = **opened;
  for (int i = 0; i < 30; ++i) {
    const std::string oid = "lone-" + std::to_string(i);
    std::string data = Pattern(oid, 4096);
    struct iovec iov = {data.data(), data.size()};
    absl::Mutex mu;
    bool done = false;
    absl::Status status;
    auto ticket = store.Append(oid, 0, &iov, 1, PayloadCrc(oid, data.data(), data.size()), 0,
                               [&](absl::Status s) {
                                 absl::MutexLock l(&mu);
                                 status = std::move(s);
                                 done = true;
                               });
    EXPECT_TRUE(ticket.ok()) << ticket.status();
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(&done));
    EXPECT_TRUE(status.ok()) << status;
  }
  const StoreStats st = store.GetStats();
  EXPECT_EQ(st.flushes, 30u) << st.ToString();
  return static_cast<int>(st.flushes_at_once);
}

TEST(GroupCommitTest, ALoneWriterStopsWaitingTheWindow) {
  // The bet starts at "writes come in groups" and moves 1/16 per write toward what it
  // sees: below the bar after 11 lone writes.
  EXPECT_GE(RoundsAtOnceOfALoneWriter(/*adaptive=*/true), 18);
  EXPECT_EQ(RoundsAtOnceOfALoneWriter(/*adaptive=*/false), 0);
}

TEST(GroupCommitTest, DestructorFlushesAndFiresPendingCallbacks) {
  std::atomic<int> fired{0};
  {
    StoreOptions o = Options(FreshDir("group-dtor"), Durability::kDurable);
    o.group_commit_window = absl::Milliseconds(500);  // nothing flushes before the dtor
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok());
    std::string data = "payload";
    struct iovec iov = {data.data(), data.size()};
    for (int i = 0; i < 5; ++i) {
      const std::string oid = "d" + std::to_string(i);
      ASSERT_TRUE((*store)->Append(oid, 0, &iov, 1, PayloadCrc(oid, data.data(), data.size()), 0,
                                   [&](absl::Status s) { fired += s.ok(); }).ok());
    }
  }
  EXPECT_EQ(fired.load(), 5);
}

}  // namespace
}  // namespace msgr::store

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

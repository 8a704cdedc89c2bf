// The write run and the read-back check over a fake asynchronous object store (callbacks
// on another thread after a delay, like messenger workers): counted runs write exactly N
// objects with the right contents and log each acked id once, failures are counted and
// not logged, never more than -t writes are outstanding, latency is recorded per op,
// progress lines appear in timed runs, and verify finds a corrupted object.
#include "client/bench/bench_runner.h"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/bench/bench_args.h"
#include "client/bench/pattern.h"
#include "client/bench/send_pool.h"
#include "gtest/gtest.h"
#include "tests/client/bench/delayed_executor.h"

namespace msgr::bench {
namespace {

using namespace std::chrono_literals;
using testing::DelayedExecutor;

class FakeStore {
 public:
  explicit FakeStore(std::chrono::nanoseconds delay) : delay_(delay) {}

  ObjectOps Ops() {
    ObjectOps ops;
    ops.alloc = [this](size_t size) {
      ++allocs_;
      return MakeHeapRecordBuffer(size);
    };
    ops.write = [this](std::string oid, RecordBufferRef data, client::WriteCallback cb) {
      int now = ++in_flight_;
      int m = max_in_flight_.load();
      while (now > m && !max_in_flight_.compare_exchange_weak(m, now)) {
      }
      bool fail = fail_every_ > 0 && ++writes_ % fail_every_ == 0;
      exec_.After(delay_, [this, oid, data, cb = std::move(cb), fail] {
        if (!fail) {
          std::lock_guard<std::mutex> l(mu_);
          objects_[oid] = std::string(data->view());
        }
        --in_flight_;
        cb(fail ? absl::UnavailableError(absl::StrCat("write of ", oid, " failed"))
                : absl::OkStatus());
      });
    };
    ops.read = [this](std::string oid, client::ReadCallback cb) {
      exec_.After(delay_, [this, oid, cb = std::move(cb)] {
        absl::StatusOr<std::string> r = absl::NotFoundError(oid);
        {
          std::lock_guard<std::mutex> l(mu_);
          auto it = objects_.find(oid);
          if (it != objects_.end()) r = it->second;
        }
        cb(std::move(r));
      });
    };
    return ops;
  }

  void FailEvery(int k) { fail_every_ = k; }
  int max_in_flight() const { return max_in_flight_.load(); }
  int allocs() const { return allocs_.load(); }
  std::map<std::string, std::string> objects() {
    std::lock_guard<std::mutex> l(mu_);
    return objects_;
  }
  void Corrupt(const std::string& oid, size_t at) {
    std::lock_guard<std::mutex> l(mu_);
    objects_[oid][at] ^= 0x5a;
  }

 private:
  const std::chrono::nanoseconds delay_;
  std::mutex mu_;
  std::map<std::string, std::string> objects_;
  std::atomic<int> in_flight_{0}, max_in_flight_{0};
  std::atomic<int> writes_{0};
  std::atomic<int> allocs_{0};
  int fail_every_ = 0;
  DelayedExecutor exec_;  // last: its thread stops before the members above go
};

std::string TmpFile(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base ? base : "/tmp", "/", name, "_", getpid());
}

std::vector<std::string> Lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> out;
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// A counted run of `count` objects of `size` bytes, `concurrency` in flight, no progress.
WriteRunOptions Counted(const std::string& prefix, size_t size, int concurrency,
                        uint64_t count) {
  WriteRunOptions o;
  o.prefix = prefix;
  o.object_size = size;
  o.concurrency = concurrency;
  o.count = count;
  o.progress = false;
  return o;
}

TEST(BenchRunnerTest, CountedRunWritesExactlyNAndLogsEachAck) {
  FakeStore store(300us);
  std::string acked = TmpFile("acked.txt");
  WriteRunOptions o = Counted("c", 3000, 6, 300);
  o.acked_log = acked;
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ops, 300u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_EQ(r->bytes, 300u * 3000);
  EXPECT_EQ(r->latency.count(), 300u);
  EXPECT_GE(r->latency.min(), 300'000u);  // every op waited for its delay
  EXPECT_GT(r->seconds, 0);
  EXPECT_EQ(r->driver.max_in_flight, 6);
  EXPECT_LE(store.max_in_flight(), 6);
  EXPECT_EQ(out.str(), "");  // progress off

  auto objects = store.objects();
  ASSERT_EQ(objects.size(), 300u);
  for (uint64_t n : {0, 17, 299}) {
    std::string oid = ObjectId("c", n);
    ASSERT_TRUE(objects.count(oid)) << oid;
    EXPECT_TRUE(VerifyPattern(oid, objects[oid]).ok());
    EXPECT_EQ(objects[oid].size(), 3000u);
  }
  auto lines = Lines(acked);
  ASSERT_EQ(lines.size(), 300u);
  std::set<std::string> unique(lines.begin(), lines.end());
  EXPECT_EQ(unique.size(), 300u);
  EXPECT_TRUE(unique.count("c_299"));
  std::set<uint64_t> acked_idx(r->acked.begin(), r->acked.end());
  EXPECT_EQ(acked_idx.size(), 300u);
  EXPECT_EQ(*acked_idx.rbegin(), 299u);
}

TEST(BenchRunnerTest, FailedWritesAreCountedAndNotLogged) {
  FakeStore store(100us);
  store.FailEvery(10);
  std::string acked = TmpFile("acked_fail.txt");
  WriteRunOptions o = Counted("f", 100, 4, 100);
  o.acked_log = acked;
  o.spin = 0us;
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->ops + r->errors, 100u);
  EXPECT_EQ(r->errors, 10u);
  EXPECT_EQ(r->acked.size(), 90u);
  EXPECT_EQ(Lines(acked).size(), 90u);
  ASSERT_FALSE(r->error_samples.empty());
  EXPECT_LE(r->error_samples.size(), 5u);
  EXPECT_NE(r->error_samples[0].find("failed"), std::string::npos);
}

TEST(BenchRunnerTest, UnwritableAckedLogIsAnError) {
  FakeStore store(1us);
  WriteRunOptions o;
  o.prefix = "x";
  o.object_size = 10;
  o.count = 1;
  o.acked_log = "/nonexistent-dir/acked.txt";
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  EXPECT_TRUE(absl::IsInvalidArgument(r.status())) << r.status();
}

TEST(BenchRunnerTest, TimedRunPrintsAProgressLinePerSecond) {
  FakeStore store(500us);
  WriteRunOptions o;
  o.prefix = "p";
  o.object_size = 4096;
  o.concurrency = 2;
  o.seconds = 1.3;
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok());
  EXPECT_GT(r->ops, 10u);
  EXPECT_GE(r->seconds, 1.2);  // from the first submission, which starts just after the clock
  EXPECT_NE(out.str().find("cur lat(us)"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("\n    1 "), std::string::npos) << out.str();
  EXPECT_EQ(out.str().find("\n    3 "), std::string::npos) << out.str();
}

TEST(BenchRunnerTest, VerifyReadsBackAndFindsACorruptObject) {
  FakeStore store(200us);
  WriteRunOptions o = Counted("v", 20000, 8, 50);
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok());
  auto oid_of = [](uint64_t i) { return ObjectId("v", i); };
  VerifyResult v = VerifyObjects(store.Ops(), 50, oid_of, 8, o.object_size);
  EXPECT_EQ(v.checked, 50u);
  EXPECT_EQ(v.mismatches, 0u);

  store.Corrupt("v_33", 12345);
  v = VerifyObjects(store.Ops(), 51, oid_of, 8, o.object_size, /*spin=*/0us);  // v_50: absent
  EXPECT_EQ(v.checked, 51u);
  EXPECT_EQ(v.mismatches, 2u);
  std::string all;
  for (const auto& s : v.samples) all += s + "\n";
  EXPECT_NE(all.find("v_33: content differs from its pattern at offset 12345"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("v_50"), std::string::npos) << all;

  EXPECT_EQ(VerifyObjects(store.Ops(), 0, oid_of, 8).checked, 0u);
}

// verify -b SIZE: an object of another size (an older version, a different run) is bad and
// named, though its bytes follow its pattern.
TEST(BenchRunnerTest, VerifyWithASizeFlagsObjectsOfAnotherSize) {
  FakeStore store(100us);
  std::ostringstream out;
  ASSERT_TRUE(RunWrites(store.Ops(), Counted("s", 4096, 4, 10), out).ok());
  auto oid_of = [](uint64_t i) { return ObjectId("s", i); };
  VerifyResult ok = VerifyObjects(store.Ops(), 10, oid_of, 4, 4096, 0us, /*expect_size=*/4096);
  EXPECT_EQ(ok.checked, 10u);
  EXPECT_EQ(ok.mismatches, 0u);
  VerifyResult bad = VerifyObjects(store.Ops(), 10, oid_of, 4, 8192, 0us, /*expect_size=*/8192);
  EXPECT_EQ(bad.checked, 10u);
  EXPECT_EQ(bad.mismatches, 10u);
  ASSERT_FALSE(bad.samples.empty());
  EXPECT_NE(bad.samples[0].find(": 4096 bytes, expected 8192"), std::string::npos)
      << bad.samples[0];
  // Without a size only the pattern counts: the same objects pass.
  EXPECT_EQ(VerifyObjects(store.Ops(), 10, oid_of, 4).mismatches, 0u);
}

TEST(BenchRunnerTest, SubmitThreadsWriteExactlyNWithinConcurrency) {
  FakeStore store(200us);
  WriteRunOptions o = Counted("p", 5000, 8, 400);
  o.submit_threads = 2;
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ops, 400u);
  EXPECT_EQ(r->errors, 0u);
  EXPECT_LE(store.max_in_flight(), 8);
  auto objs = store.objects();
  ASSERT_EQ(objs.size(), 400u);
  for (const auto& [oid, data] : objs) ASSERT_EQ(data, MakePattern(oid, 5000)) << oid;
  EXPECT_EQ(store.allocs(), 400) << "one buffer per object written";
}

TEST(BenchRunnerTest, MaxObjectsOverwritesABoundedSet) {
  FakeStore store(100us);
  std::string acked = TmpFile("acked_max.txt");
  WriteRunOptions o = Counted("m", 2000, 4, 100);
  o.max_objects = 7;
  o.acked_log = acked;
  std::ostringstream out;
  auto r = RunWrites(store.Ops(), o, out);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->ops, 100u);
  auto objs = store.objects();
  ASSERT_EQ(objs.size(), 7u);
  for (const auto& [oid, data] : objs) EXPECT_EQ(data, MakePattern(oid, 2000)) << oid;
  EXPECT_EQ(store.allocs(), 7) << "each object's contents made once, in its own buffer";
  EXPECT_EQ(Lines(acked).size(), 100u) << "one line per acknowledged write";
  for (uint64_t i : r->acked) EXPECT_LT(i, 7u);
  auto a = ParseBenchArgs({"--mon", "h:1", "--max-objects", "64"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->max_objects, 64u);
  EXPECT_FALSE(ParseBenchArgs({"--mon", "h:1", "--max-objects", "0"}).ok());
  std::remove(acked.c_str());
}

TEST(BenchArgsSpinTest, SubmitThreadsFlag) {
  auto a = ParseBenchArgs({"--mon", "h:1", "--submit-threads", "3"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->submit_threads, 3);
  EXPECT_EQ(ParseBenchArgs({"--mon", "h:1"})->submit_threads, -1) << "default: by size";
  EXPECT_EQ(DefaultSubmitThreads(4096), 0);
  EXPECT_EQ(DefaultSubmitThreads(4 << 20), 2);
  auto b = ParseBenchArgs({"--mon", "h:1", "--submit-threads", "-2"});
  ASSERT_FALSE(b.ok());
  EXPECT_NE(b.status().message().find("--submit-threads"), std::string::npos) << b.status();
}

TEST(BenchArgsSpinTest, SpinUsFlag) {
  auto a = ParseBenchArgs({"--mon", "h:1"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(std::chrono::microseconds(a->spin_us), kDefaultSpin);
  a = ParseBenchArgs({"--mon", "h:1", "--spin-us", "0"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->spin_us, 0);
  a = ParseBenchArgs({"verify", "--mon", "h:1", "--oids", "f", "--spin-us=200"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->spin_us, 200);
  for (const char* bad : {"-1", "x", "1.5", "2000000"}) {
    auto b = ParseBenchArgs({"--mon", "h:1", "--spin-us", bad});
    ASSERT_FALSE(b.ok()) << bad;
    EXPECT_NE(b.status().message().find("--spin-us"), std::string::npos) << b.status();
  }
  EXPECT_NE(BenchUsage().find("--spin-us"), std::string::npos);
}

}  // namespace
}  // namespace msgr::bench

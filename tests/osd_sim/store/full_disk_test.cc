// Full store: capacity_bytes and a real ENOSPC (small tmpfs). Earlier objects stay
// readable, and the store keeps taking writes that fit.
#include <sched.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "osd_sim/store/record.h"
#include "osd_sim/store/segment_file.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using testing::FreshDir;
using testing::Options;
using testing::Pattern;
using testing::Put;

void ExpectAll(ObjectStore& store, const std::vector<std::string>& oids, size_t len) {
  for (const std::string& oid : oids) {
    auto got = store.Read(oid);
    ASSERT_TRUE(got.ok()) << oid << ": " << got.status();
    ASSERT_TRUE(*got == Pattern(oid, len)) << oid;
  }
}

// Memory mode holds live payloads only: overwriting the same objects never fills it, and
// new objects still do, with the same clear error.
TEST(FullDiskTest, MemoryModeCapacityCountsLiveObjects) {
  StoreOptions o = Options("", Durability::kMemory);
  o.capacity_bytes = 10 * RecordBytes(2, 4096);
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 200; ++i) {  // 20x the capacity, over 8 names
    const std::string oid = "m" + std::to_string(i % 8);
    auto t = Put(**store, oid, 0, Pattern(oid, 4096), kTruncate);
    ASSERT_TRUE(t.ok()) << "write " << i << ": " << t.status();
  }
  EXPECT_LE((*store)->GetStats().log_bytes, 8u * 4096);
  absl::Status full;
  for (int i = 0; i < 20 && full.ok(); ++i) {
    auto t = Put(**store, "n" + std::to_string(i), 0, Pattern("n", 4096));
    if (!t.ok()) full = t.status();
  }
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_TRUE(*(*store)->Read("m3") == Pattern("m3", 4096));
}

// A flush that fails -- here with ENOSPC, as thin-provisioned storage can -- fails its
// round with that error, and then the store refuses writes with an error that says a
// restart is needed: freeing space does not bring back pages the kernel dropped. Reads of
// what was durable go on.
TEST(FullDiskTest, FailedFlushRefusesLaterWritesUntilRestartAndKeepsReads) {
  auto store = ObjectStore::Open(Options(FreshDir("failed-flush"), Durability::kDurable));
  ASSERT_TRUE(store.ok()) << store.status();
  auto a = Put(**store, "a", 0, Pattern("a", 4096), kTruncate);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE((*store)->WaitDurable(*a).ok());

  SetFdatasyncForTest([](int) {
    errno = ENOSPC;
    return -1;
  });
  auto b = Put(**store, "b", 0, Pattern("b", 4096), kTruncate);
  ASSERT_TRUE(b.ok()) << b.status();  // written to the page cache; the flush fails
  const absl::Status b_durable = (*store)->WaitDurable(*b);
  SetFdatasyncForTest(nullptr);
  EXPECT_EQ(b_durable.code(), absl::StatusCode::kResourceExhausted) << b_durable;

  auto c = Put(**store, "c", 0, Pattern("c", 4096), kTruncate);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kFailedPrecondition) << c.status();
  EXPECT_NE(c.status().message().find("restart the OSD"), std::string::npos) << c.status();
  ExpectAll(**store, {"a"}, 4096);
}

TEST(FullDiskTest, CapacityLimit) {
  StoreOptions o = Options(FreshDir("full-capacity"), Durability::kDurable);
  const uint64_t rec = RecordBytes(2, 4096);
  o.capacity_bytes = 10 * rec + 200;
  std::vector<std::string> written;
  {
    auto store = ObjectStore::Open(o);
    ASSERT_TRUE(store.ok());
    absl::Status full;
    for (int i = 0; i < 100 && full.ok(); ++i) {
      const std::string oid = "c" + std::to_string(i % 10);
      auto t = Put(**store, oid, 0, Pattern(oid, 4096));
      if (t.ok()) {
        ASSERT_TRUE((*store)->WaitDurable(*t).ok());
        written.push_back(oid);
      } else {
        full = t.status();
      }
    }
    EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
    EXPECT_EQ(full.message().rfind("store full: ", 0), 0u) << full;
    EXPECT_EQ(written.size(), 10u);
    ExpectAll(**store, written, 4096);
    // Still usable: a smaller write fits, reads keep working.
    auto small = Put(**store, "s", 0, "tiny");
    ASSERT_TRUE(small.ok()) << small.status();
    ASSERT_TRUE((*store)->WaitDurable(*small).ok());
    const StoreStats st = (*store)->GetStats();
    EXPECT_EQ(st.full_errors, 1u);
    EXPECT_LE(st.log_bytes, o.capacity_bytes);
  }
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok());
  ExpectAll(**store, written, 4096);
  EXPECT_TRUE(*(*store)->Read("s") == "tiny");
}

// Mounts a 1 MiB tmpfs for the test; skips when the sandbox does not allow mounts.
class TmpfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    mnt_ = FreshDir("tmpfs-mnt");
    // A private mount namespace for this test process: the tmpfs can never leak onto
    // the host, even if the test dies before TearDown.
    if (::unshare(CLONE_NEWNS) != 0 || ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
      GTEST_SKIP() << "no private mount namespace (" << std::strerror(errno)
                   << "): real ENOSPC untested, capacity_bytes test covers the logic";
    }
    if (::mount("tmpfs", mnt_.c_str(), "tmpfs", 0, "size=1m") != 0) {
      GTEST_SKIP() << "cannot mount a tmpfs here (" << std::strerror(errno)
                   << "): real ENOSPC untested, capacity_bytes test covers the logic";
    }
    mounted_ = true;
  }
  void TearDown() override {
    if (mounted_) ::umount2(mnt_.c_str(), MNT_DETACH);
  }
  std::string mnt_;
  bool mounted_ = false;
};

TEST_F(TmpfsTest, RealEnospcKeepsEarlierDataAndRecoversAfterSpaceFrees) {
  // A filler file takes a quarter of the disk; deleting it later frees space.
  const std::string filler = mnt_ + "/filler";
  {
    std::ofstream f(filler, std::ios::binary);
    const std::string chunk(256 << 10, 'f');
    f.write(chunk.data(), static_cast<std::streamsize>(chunk.size()));
    ASSERT_TRUE(f.good());
  }
  StoreOptions o = Options(mnt_ + "/store", Durability::kDurable);
  constexpr size_t kLen = 64 << 10;
  std::vector<std::string> written;
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();
  absl::Status full;
  for (int i = 0; i < 64 && full.ok(); ++i) {
    const std::string oid = "e" + std::to_string(i);
    auto t = Put(**store, oid, 0, Pattern(oid, kLen));
    if (t.ok()) {
      ASSERT_TRUE((*store)->WaitDurable(*t).ok());
      written.push_back(oid);
    } else {
      full = t.status();
    }
  }
  ASSERT_EQ(full.code(), absl::StatusCode::kResourceExhausted) << full;
  EXPECT_NE(full.message().find("store full: "), absl::string_view::npos) << full;
  EXPECT_NE(full.message().find("No space left"), absl::string_view::npos) << full;
  EXPECT_GT(written.size(), 5u);
  ExpectAll(**store, written, kLen);
  EXPECT_EQ((*store)->GetStats().full_errors, 1u);

  // Space frees: the same big write now succeeds.
  ASSERT_EQ(::unlink(filler.c_str()), 0);
  const std::string oid = "after-free";
  auto t = Put(**store, oid, 0, Pattern(oid, kLen));
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_TRUE((*store)->WaitDurable(*t).ok());
  written.push_back(oid);

  store->reset();
  auto reopened = ObjectStore::Open(o);
  ASSERT_TRUE(reopened.ok()) << reopened.status();
  ExpectAll(**reopened, written, kLen);
  EXPECT_EQ((*reopened)->GetStats().torn_records, 0u) << "the failed write was rolled back";
  EXPECT_EQ((*reopened)->GetStats().corrupt_records, 0u);
}

}  // namespace
}  // namespace msgr::store

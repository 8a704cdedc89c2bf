// SegmentFile: what a failed flush leaves behind. Linux reports a writeback error to one
// fdatasync of an open file only; a second flusher's later sync would return 0 for pages
// that never reached the disk. The file's first failed Sync must therefore fail every
// later one (fdatasync is replaced by a test hook: a real EIO needs a failing device).
#include "osd_sim/store/segment_file.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <string>

#include "gtest/gtest.h"

namespace msgr::store {
namespace {

std::atomic<int> g_calls{0};

// Fails the first call with EIO, then succeeds (as the kernel does once it has reported
// the error).
int FailOnce(int) {
  if (g_calls.fetch_add(1) == 0) {
    errno = EIO;
    return -1;
  }
  return 0;
}

TEST(SegmentFileTest, AFailedSyncFailsEveryLaterSyncOfThatFile) {
  const char* base = std::getenv("TEST_TMPDIR");
  const std::string dir = base ? base : "/tmp";
  auto a = SegmentFile::Open(dir + "/" + SegmentName(1), 1, /*create=*/true);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = SegmentFile::Open(dir + "/" + SegmentName(2), 2, /*create=*/true);
  ASSERT_TRUE(b.ok()) << b.status();

  SetFdatasyncForTest(&FailOnce);
  const absl::Status first = (*a)->Sync();
  const absl::Status second = (*a)->Sync();
  const absl::Status other = (*b)->Sync();
  SetFdatasyncForTest(nullptr);

  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("fdatasync"), std::string::npos) << first;
  EXPECT_EQ(second, first) << "a later sync of the same file must not report success";
  EXPECT_TRUE(other.ok()) << "another file's sync is not affected: " << other;
  EXPECT_EQ(g_calls.load(), 2) << "the failed file is not synced again";
}

}  // namespace
}  // namespace msgr::store

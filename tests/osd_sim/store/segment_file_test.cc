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
std::atomic<int> g_fds[4];

// Fails the first call with EIO, then succeeds (as the kernel does once it has reported
// the error); remembers which descriptor each call used.
int FailOnce(int fd) {
  const int n = g_calls.fetch_add(1);
  if (n < 4) g_fds[n] = fd;
  if (n == 0) {
    errno = EIO;
    return -1;
  }
  return 0;
}

int Succeed(int fd) {
  const int n = g_calls.fetch_add(1);
  if (n < 4) g_fds[n] = fd;
  return 0;
}

std::string FreshDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/segment-file.XXXXXX";
  EXPECT_NE(mkdtemp(tmpl.data()), nullptr);
  return tmpl;
}

TEST(SegmentFileTest, AFailedSyncFailsEveryLaterSyncOfThatFile) {
  const std::string dir = FreshDir();
  auto a = SegmentFile::Open(dir + "/" + SegmentName(1), 1, /*create=*/true, /*sync_streams=*/2);
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = SegmentFile::Open(dir + "/" + SegmentName(2), 2, /*create=*/true);
  ASSERT_TRUE(b.ok()) << b.status();

  g_calls = 0;
  SetFdatasyncForTest(&FailOnce);
  const absl::Status first = (*a)->Sync(/*stream=*/0);
  const absl::Status second = (*a)->Sync(/*stream=*/0);
  const absl::Status other_stream = (*a)->Sync(/*stream=*/1);
  const absl::Status other_file = (*b)->Sync();
  SetFdatasyncForTest(nullptr);

  EXPECT_FALSE(first.ok());
  EXPECT_NE(first.message().find("fdatasync"), std::string::npos) << first;
  EXPECT_EQ(second, first) << "a later sync of the same file must not report success";
  EXPECT_EQ(other_stream, first) << "nor one through another flusher's descriptor";
  EXPECT_TRUE(other_file.ok()) << "another file's sync is not affected: " << other_file;
  EXPECT_EQ(g_calls.load(), 2) << "the failed file is not synced again";
}

// Concurrent flushers must not share an open file description: Linux would report a
// writeback error to only one of them.
TEST(SegmentFileTest, EachSyncStreamHasItsOwnOpenFile) {
  auto a = SegmentFile::Open(FreshDir() + "/" + SegmentName(3), 3, /*create=*/true,
                             /*sync_streams=*/2);
  ASSERT_TRUE(a.ok()) << a.status();
  g_calls = 0;
  SetFdatasyncForTest(&Succeed);
  EXPECT_TRUE((*a)->Sync(0).ok());
  EXPECT_TRUE((*a)->Sync(1).ok());
  EXPECT_TRUE((*a)->Sync(1).ok());
  SetFdatasyncForTest(nullptr);
  ASSERT_EQ(g_calls.load(), 3);
  EXPECT_NE(g_fds[0].load(), g_fds[1].load()) << "streams 0 and 1 share a descriptor";
  EXPECT_EQ(g_fds[1].load(), g_fds[2].load()) << "a stream keeps its descriptor";
  EXPECT_TRUE((*a)->Sync(1).ok()) << "the real fdatasync through stream 1's descriptor";
}

}  // namespace
}  // namespace msgr::store

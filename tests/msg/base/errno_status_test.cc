#include "msg/base/errno_status.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <string>

namespace msgr {
namespace {

TEST(ErrnoStatusTest, NamesTheOperationTheErrorAndTheNumber) {
  const absl::Status s = ErrnoStatus(ENOENT, "open /x/y");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(std::string(s.message()), "open /x/y: No such file or directory (errno 2)");
}

TEST(ErrnoStatusTest, CodesACallerActsOn) {
  // Full disks and exhausted descriptors say "resource exhausted": retry later or free.
  for (int e : {ENOSPC, EDQUOT, EFBIG, ENOMEM, EMFILE, ENFILE, EAGAIN}) {
    EXPECT_EQ(ErrnoStatus(e, "x").code(), absl::StatusCode::kResourceExhausted) << e;
  }
  EXPECT_TRUE(IsNoSpaceErrno(ENOSPC));
  EXPECT_TRUE(IsNoSpaceErrno(EDQUOT));
  EXPECT_FALSE(IsNoSpaceErrno(ENOMEM));
  for (int e : {ECONNREFUSED, ECONNRESET, EPIPE, EHOSTUNREACH, EBUSY}) {
    EXPECT_EQ(ErrnoStatus(e, "x").code(), absl::StatusCode::kUnavailable) << e;
  }
  EXPECT_EQ(ErrnoStatus(EACCES, "x").code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(ErrnoStatus(EINVAL, "x").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ErrnoStatus(EEXIST, "x").code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(ErrnoStatus(ETIMEDOUT, "x").code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(ErrnoStatus(EIO, "x").code(), absl::StatusCode::kInternal);
}

}  // namespace
}  // namespace msgr

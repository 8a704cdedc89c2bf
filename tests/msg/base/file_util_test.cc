#include "msg/base/file_util.h"

#include <stdlib.h>
#include <unistd.h>

#include <string>

#include "gtest/gtest.h"

namespace msgr {
namespace {

std::string MakeTempDir() {
  const char* base = getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base != nullptr ? base : "/tmp") + "/file_util_XXXXXX";
  char* dir = mkdtemp(tmpl.data());
  return dir != nullptr ? dir : "";
}

TEST(FileUtilTest, WriteFileAtomicReplacesContents) {
  const std::string path = MakeTempDir() + "/f";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second").ok());
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok());
  EXPECT_EQ(*text, "second");
  EXPECT_NE(access((path + ".tmp").c_str(), F_OK), 0) << "the temp file was left behind";
}

TEST(FileUtilTest, MakeDirsMakesParents) {
  const std::string dir = MakeTempDir() + "/a/b/c";
  ASSERT_TRUE(MakeDirs(dir).ok());
  EXPECT_EQ(access(dir.c_str(), F_OK), 0);
  EXPECT_TRUE(MakeDirs(dir).ok()) << "an existing directory is fine";
}

TEST(FileUtilTest, ErrorsCarryPathAndErrno) {
  auto text = ReadFile("/nonexistent-dir/x");
  EXPECT_EQ(text.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(text.status().message().find("/nonexistent-dir/x"), std::string::npos);
  absl::Status s = WriteFileAtomic("/nonexistent-dir/x", "y");
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(s.message().find("errno 2"), std::string::npos) << s;
}

}  // namespace
}  // namespace msgr

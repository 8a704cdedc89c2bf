#include "client/bench/pattern.h"

#include <string>

#include "proto/placement.h"
#include "gtest/gtest.h"

namespace msgr::bench {
namespace {

TEST(PatternTest, DeterministicPerOidAndSize) {
  for (size_t n : {1u, 7u, 8u, 15u, 16u, 17u, 4096u, 8192u + 3, (4u << 20) + 1}) {
    std::string a = MakePattern("obj_1", n);
    ASSERT_EQ(a.size(), n);
    EXPECT_EQ(a, MakePattern("obj_1", n));
    EXPECT_TRUE(VerifyPattern("obj_1", a).ok()) << n;
    if (n >= 16) {
      EXPECT_NE(a, MakePattern("obj_2", n)) << n;
    }
  }
}

// FillPattern writes exactly MakePattern's bytes, and nothing past `size`.
TEST(PatternTest, FillWritesTheSameBytesInPlace) {
  for (size_t n : {1u, 15u, 16u, 17u, 8192u + 3, (1u << 20) + 5}) {
    std::string buf(n + 2, '\x5a');
    FillPattern("obj_9", buf.data() + 1, n);
    EXPECT_EQ(buf.substr(1, n), MakePattern("obj_9", n)) << n;
    EXPECT_EQ(buf.front(), '\x5a');
    EXPECT_EQ(buf.back(), '\x5a') << n;
  }
}

// The pattern is a format: objects written by one build are verified by another.
TEST(PatternTest, ContentsArePinned) {
  EXPECT_EQ(placement::StableHash64(MakePattern("obj_1", 100003)), 743839023709106762u);
  EXPECT_EQ(placement::StableHash64(MakePattern("bench.x.7", 4096)), 8879359204046184183u);
}

TEST(PatternTest, BlocksDifferWithinAnObject) {
  std::string a = MakePattern("x", 64 * 1024);
  EXPECT_NE(a.substr(16, 8192), a.substr(16 + 8192, 8192));
  EXPECT_NE(a.substr(8192 + 16, 8192), a.substr(2 * 8192 + 16, 8192));
}

TEST(PatternTest, DetectsCorruptionTruncationAndTheWrongObject) {
  std::string a = MakePattern("obj", 10000);
  std::string bad = a;
  bad[5000] ^= 1;
  absl::Status s = VerifyPattern("obj", bad);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("offset 5000"), std::string::npos) << s;
  s = VerifyPattern("obj", a.substr(0, 4096));  // a torn prefix of a larger object
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(s.message().find("header says 10000"), std::string::npos) << s;
  EXPECT_FALSE(VerifyPattern("other", a).ok());
  EXPECT_FALSE(VerifyPattern("obj", std::string(10000, '\0')).ok());
  EXPECT_TRUE(VerifyPattern("obj", "").ok());  // nothing to check in an empty object
}

}  // namespace
}  // namespace msgr::bench

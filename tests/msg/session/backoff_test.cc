// The reconnect backoff both backends use (msg/session/backoff.h).
#include "msg/session/backoff.h"

#include "gtest/gtest.h"

namespace msgr::session {
namespace {

TEST(ReconnectBackoffTest, DoublesFromFiveMillisecondsUpToTheMaximum) {
  ReconnectBackoff b(absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(5));
  EXPECT_EQ(b.Next(), absl::Milliseconds(10));
  EXPECT_EQ(b.Next(), absl::Milliseconds(20));
  EXPECT_EQ(b.Next(), absl::Milliseconds(40));
  EXPECT_EQ(b.Next(), absl::Milliseconds(80));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
  EXPECT_EQ(b.Next(), absl::Milliseconds(100));
}

TEST(ReconnectBackoffTest, AConnectionStartsItOver) {
  ReconnectBackoff b(absl::Seconds(1));
  for (int i = 0; i < 5; ++i) b.Next();
  b.Reset();
  EXPECT_EQ(b.Next(), absl::Milliseconds(5));
}

TEST(ReconnectBackoffTest, AMaximumBelowTheFirstStepIsKept) {
  ReconnectBackoff b(absl::Milliseconds(2));
  EXPECT_EQ(b.Next(), absl::Milliseconds(2));
}

}  // namespace
}  // namespace msgr::session

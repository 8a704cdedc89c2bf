#include "msg/session/liveness.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>

namespace msgr::session {
namespace {

using std::chrono::milliseconds;

TEST(LivenessTest, APeerIsAliveUntilTheTimeoutPassesWithoutAWord) {
  const Liveness::Clock::time_point t0{};  // a fixed clock: no real time involved
  Liveness l;
  l.Heard(t0);
  EXPECT_TRUE(l.Check(t0 + milliseconds(900), absl::Seconds(1), "osd.1 at a:1").ok());
  EXPECT_TRUE(l.Check(t0 + milliseconds(1000), absl::Seconds(1), "osd.1 at a:1").ok());
  const absl::Status dead = l.Check(t0 + milliseconds(1500), absl::Seconds(1), "osd.1 at a:1");
  EXPECT_TRUE(absl::IsDeadlineExceeded(dead)) << dead;
  EXPECT_EQ(std::string(dead.message()), "keepalive timeout: nothing from osd.1 at a:1 for 1.5s");
  // Hearing from it again makes it alive again.
  l.Heard(t0 + milliseconds(1400));
  EXPECT_TRUE(l.Check(t0 + milliseconds(1500), absl::Seconds(1), "osd.1 at a:1").ok());
}

}  // namespace
}  // namespace msgr::session

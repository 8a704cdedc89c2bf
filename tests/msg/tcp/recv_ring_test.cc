#include "msg/tcp/recv_ring.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "msg/ring/ring.h"

namespace msgr::tcp {
namespace {

bool Readable(int fd) {
  pollfd p{fd, POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

void Drain(int fd) {
  uint64_t n = 0;
  (void)!read(fd, &n, sizeof n);
}

// The reader's Signal() writes the eventfd unless the ring's poller said it is awake; a
// consumer that never says anything (one that only blocks on wait_fd()) is always woken.
TEST(TcpRecvRingTest, SignalsOnlyWhileThePollerMaySleep) {
  auto created = TcpRecvRing::Create(kMinRingBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<TcpRecvRing> ring = *created;
  EXPECT_FALSE(Readable(ring->wait_fd()));

  EXPECT_TRUE(ring->Signal()) << "nobody said they are awake";
  EXPECT_TRUE(Readable(ring->wait_fd()));
  Drain(ring->wait_fd());

  ring->SetPollerSleeping(false);
  EXPECT_FALSE(ring->Signal()) << "an awake poller looks at the ring anyway";
  EXPECT_FALSE(Readable(ring->wait_fd()));

  ring->SetPollerSleeping(true);
  std::thread reader([&] { EXPECT_TRUE(ring->Signal()); });  // the reader's thread
  reader.join();
  EXPECT_TRUE(Readable(ring->wait_fd()));
}

// A poller that drives its messenger reads the socket inside its own sleep: the reader then
// runs on the poller's thread, which looks at the ring when the read returns, so no signal
// is written; from any other thread the sleeping poller is signalled.
TEST(TcpRecvRingTest, ThePollersOwnThreadDoesNotSignalItself) {
  auto created = TcpRecvRing::Create(kMinRingBytes);
  ASSERT_TRUE(created.ok()) << created.status();
  std::shared_ptr<TcpRecvRing> ring = *created;
  ring->SetPollerSleeping(true);  // this thread is the poller
  EXPECT_FALSE(ring->Signal());
  EXPECT_FALSE(Readable(ring->wait_fd()));
  bool signalled = false;
  std::thread other([&] { signalled = ring->Signal(); });
  other.join();
  EXPECT_TRUE(signalled);
  EXPECT_TRUE(Readable(ring->wait_fd()));
}

TEST(TcpRecvRingTest, RefusesASizeThatIsNoRingSize) {
  auto created = TcpRecvRing::Create(kMinRingBytes + 1);
  ASSERT_FALSE(created.ok());
  EXPECT_EQ(created.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(created.status().message().find("power of two"), std::string::npos)
      << created.status();
}

}  // namespace
}  // namespace msgr::tcp

// Driven mode of the tcp backend (MessengerOptions::worker_threads 0, Messenger::driven()):
// the messenger has no thread of its own, and everything it does -- accepting, the
// handshake, reading, the Dispatcher's callbacks -- runs on the thread that calls Poll()
// and WaitFor(), and only then. (The conformance suite runs every messenger test on a
// driven messenger too: tests/msg/messenger_test.cc, "tcp_driven".)
#include <gtest/gtest.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

using testing::RecordingDispatcher;

MessengerOptions Options(EntityType type, uint64_t id, int threads) {
  MessengerOptions o;
  o.name = EntityName{type, id};
  o.auth = AuthConfig::None();
  o.ring_bytes = 1 << 20;
  o.worker_threads = threads;
  return o;
}

class EventFd {
 public:
  EventFd() : fd_(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}
  ~EventFd() { close(fd_); }
  int fd() const { return fd_; }
  void Signal() const {
    const uint64_t one = 1;
    (void)!write(fd_, &one, sizeof one);
  }

 private:
  const int fd_;
};

// Drives `m` on this thread until `done` holds or `limit` passes; true if `done` held.
template <typename F>
bool DriveUntil(Messenger* m, int fd, F done, absl::Duration limit = absl::Seconds(10)) {
  const absl::Time until = absl::Now() + limit;
  while (!done()) {
    if (absl::Now() >= until) return false;
    if (!m->Poll()) m->WaitFor(fd, absl::Milliseconds(20));
  }
  return true;
}

TEST(TcpDrivenTest, NothingRunsUntilTheOwnerDrivesItThenOnItsThread) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  std::thread::id message_thread;
  sd.on_message = [&](const ConnectionRef& c, const Message& m) {
    message_thread = std::this_thread::get_id();
    (void)c->Send(Message{static_cast<uint16_t>(m.type + 1), "pong"});
  };
  auto server = *Messenger::Create(Options(EntityType::kOsd, 0, /*threads=*/0), &sd);
  ASSERT_TRUE(server->driven());
  const std::string addr = *server->Bind("127.0.0.1:0");
  auto client = *Messenger::Create(Options(EntityType::kClient, 1, /*threads=*/1), &cd);
  EXPECT_FALSE(client->driven());
  auto conn = *client->Connect(addr, ConnectOptions{});
  ASSERT_TRUE(conn->Send(Message{10, "ping"}).ok());

  // Nobody drives the server: the kernel queues the connection, nothing more happens.
  EXPECT_FALSE(sd.WaitFor([&] { return !sd.accepted.empty() || !sd.messages.empty(); },
                          std::chrono::milliseconds(300)));
  EXPECT_FALSE(conn->is_connected());

  // This thread drives it: the accept, the handshake, the message and the answer.
  EventFd wake;
  ASSERT_TRUE(DriveUntil(server.get(), wake.fd(), [&] {
    return sd.Locked([&] { return sd.messages.size() == 1; });
  }));
  EXPECT_EQ(message_thread, std::this_thread::get_id());
  ASSERT_TRUE(DriveUntil(server.get(), wake.fd(), [&] {
    return cd.Locked([&] { return cd.messages.size() == 1; });
  }));
  cd.Locked([&] { EXPECT_EQ(cd.messages[0].payload, "pong"); });
  client->Shutdown();
  server->Shutdown();
}

// WaitFor returns when its fd is readable, and when the messenger ran some of its work
// meanwhile (here: a message arrived), long before its timeout.
TEST(TcpDrivenTest, WaitForEndsOnTheFdOrOnTheMessengersOwnWork) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  auto server = *Messenger::Create(Options(EntityType::kOsd, 0, 0), &sd);
  const std::string addr = *server->Bind("127.0.0.1:0");
  auto client = *Messenger::Create(Options(EntityType::kClient, 1, 1), &cd);
  auto conn = *client->Connect(addr, ConnectOptions{});
  EventFd wake;
  ASSERT_TRUE(DriveUntil(server.get(), wake.fd(), [&] { return conn->is_connected(); }));
  while (server->Poll()) {
  }
  constexpr absl::Duration kLong = absl::Seconds(30);

  // The fd: written by another thread while this one waits.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    wake.Signal();
  });
  // WaitFor may return early (a timer or a late frame of the handshake ran): wait again
  // until the fd is readable. A WaitFor that ignored the fd would take kLong.
  pollfd p{wake.fd(), POLLIN, 0};
  absl::Time t0 = absl::Now();
  while (poll(&p, 1, 0) == 0 && absl::Now() - t0 < kLong) server->WaitFor(wake.fd(), kLong);
  EXPECT_LT(absl::Now() - t0, kLong / 2);
  writer.join();
  ASSERT_EQ(poll(&p, 1, 0), 1);
  uint64_t v;
  ASSERT_EQ(read(wake.fd(), &v, sizeof v), static_cast<ssize_t>(sizeof v));  // quiet again

  // The messenger's own work: a message from the peer.
  std::thread sender([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    (void)conn->Send(Message{10, "wake up"});
  });
  t0 = absl::Now();
  bool delivered = false;
  while (!delivered && absl::Now() - t0 < kLong) {
    server->WaitFor(wake.fd(), kLong);
    delivered = DriveUntil(server.get(), wake.fd(),
                           [&] { return sd.Locked([&] { return !sd.messages.empty(); }); },
                           absl::ZeroDuration());
  }
  EXPECT_TRUE(delivered);
  EXPECT_LT(absl::Now() - t0, kLong / 2);
  sender.join();
  client->Shutdown();
  server->Shutdown();
}

// After Shutdown a driver loop neither runs the messenger nor spins: Poll says false and
// WaitFor waits for its fd (or the timeout).
TEST(TcpDrivenTest, AfterShutdownPollIsFalseAndWaitForWaits) {
  RecordingDispatcher sd;
  auto server = *Messenger::Create(Options(EntityType::kOsd, 0, 0), &sd);
  ASSERT_TRUE(server->Bind("127.0.0.1:0").ok());
  EventFd wake;
  server->Shutdown();
  EXPECT_FALSE(server->Poll());
  const absl::Time t0 = absl::Now();
  server->WaitFor(wake.fd(), absl::Milliseconds(200));
  EXPECT_GE(absl::Now() - t0, absl::Milliseconds(150));
  wake.Signal();
  const absl::Time t1 = absl::Now();
  server->WaitFor(wake.fd(), absl::Seconds(30));
  EXPECT_LT(absl::Now() - t1, absl::Seconds(15));
}

TEST(TcpDrivenTest, NegativeThreadCountIsRefused) {
  RecordingDispatcher sd;
  auto m = Messenger::Create(Options(EntityType::kOsd, 0, -1), &sd);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(m.status().message().find("worker_threads"), std::string::npos) << m.status();
}

}  // namespace
}  // namespace msgr

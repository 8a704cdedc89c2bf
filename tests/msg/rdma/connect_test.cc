// The rdma messenger's connecting side: its sessions hold no thread (the handshake, the
// keepalives, ring resizes and the backoff between attempts all run on the completion
// thread), a peer that never answers is given up at the handshake timeout with the reason
// told to the dispatcher, and a lossless session keeps dialing an absent peer until it
// comes, while the messenger's other sessions are served throughout.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/messenger.h"
#include "tests/msg/rdma/rdma_test_util.h"

namespace msgr::rdma {
namespace {

using testing::Recorder;
using testing::SoftNoAuthOptions;
using testing::ThreadCount;

// A loopback port that completes TCP connects (the kernel's backlog) and never says a word.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&a), len), 0);
    EXPECT_EQ(listen(fd_, 64), 0);
    EXPECT_EQ(getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len), 0);
    addr_ = absl::StrCat("127.0.0.1:", ntohs(a.sin_port));
  }
  ~SilentListener() { close(fd_); }
  const std::string& addr() const { return addr_; }

 private:
  int fd_ = -1;
  std::string addr_;
};

// A free loopback port (nothing listens on it once this returns).
std::string FreeAddr() {
  SilentListener l;
  return l.addr();
}

class RdmaConnectTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto s = Messenger::Create(SoftNoAuthOptions(EntityType::kOsd, 0), &server_d_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    server_d_.set_echo(true);
    auto a = server_->Bind("127.0.0.1:0");
    ASSERT_TRUE(a.ok()) << a.status();
    server_addr_ = *a;
  }
  void TearDown() override {
    if (client_) client_->Shutdown();
    if (server_) server_->Shutdown();
  }
  void NewClient(absl::Duration handshake_timeout) {
    MessengerOptions o = SoftNoAuthOptions(EntityType::kClient, 1);
    o.handshake_timeout = handshake_timeout;
    auto c = Messenger::Create(o, &client_d_);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
  }
  // `conn` gets an echo of a new message within `d`.
  bool Echoes(const ConnectionRef& conn, absl::Duration d = absl::Seconds(5)) {
    const size_t before = client_d_.messages().size();
    if (!conn->Send(Message{7, "ping"}).ok()) return false;
    return client_d_.WaitMessages(before + 1, d);
  }

  Recorder server_d_, client_d_;
  std::unique_ptr<Messenger> server_, client_;
  std::string server_addr_;
};

TEST_F(RdmaConnectTest, SessionsToSilentPeersHoldNoThreadAndFailAtTheHandshakeTimeout) {
  NewClient(absl::Milliseconds(1500));
  auto good = client_->Connect(server_addr_, ConnectOptions{});
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(Echoes(*good));
  const int before = ThreadCount();
  std::vector<std::unique_ptr<SilentListener>> silent;
  std::vector<ConnectionRef> dialing;
  for (int i = 0; i < 40; ++i) {
    silent.push_back(std::make_unique<SilentListener>());
    ConnectOptions lossy;  // one attempt, then OnConnectRefused and OnReset
    lossy.policy = Policy::Lossy();
    auto c = client_->Connect(silent.back()->addr(), lossy);
    ASSERT_TRUE(c.ok()) << c.status();
    dialing.push_back(*c);
  }
  absl::SleepFor(absl::Milliseconds(300));  // every connect is through, every HELLO sent
  // A connector thread per session took 40 more.
  EXPECT_LT(ThreadCount() - before, 5);
  for (const auto& c : dialing) EXPECT_FALSE(c->is_connected());
  // The session that works keeps working meanwhile.
  EXPECT_TRUE(Echoes(*good));
  // Each silent peer is given up once its handshake is overdue, and the dispatcher told.
  const absl::Time start = absl::Now();
  ASSERT_TRUE(client_d_.WaitRefused(40, absl::Seconds(10)));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(700)) << "given up well before the timeout";
  for (const absl::Status& why : client_d_.refused()) {
    EXPECT_TRUE(absl::IsDeadlineExceeded(why)) << why;
  }
  EXPECT_TRUE(client_d_.WaitResets(40));
  EXPECT_TRUE(Echoes(*good));
}

TEST_F(RdmaConnectTest, ALosslessSessionDialsAnAbsentPeerUntilItComes) {
  NewClient(absl::Seconds(2));
  const std::string addr = FreeAddr();
  auto conn = client_->Connect(addr, ConnectOptions{});  // lossless
  ASSERT_TRUE(conn.ok()) << conn.status();
  // Refused at once, again and again (with a backoff), never given up.
  ASSERT_TRUE(client_d_.WaitRefused(3, absl::Seconds(5)));
  EXPECT_TRUE(absl::IsUnavailable(client_d_.refused()[0]) ||
              client_d_.refused()[0].message().find("refused") != std::string::npos)
      << client_d_.refused()[0];
  EXPECT_FALSE((*conn)->is_connected());
  // A message sent meanwhile waits in the session's queue.
  ASSERT_TRUE((*conn)->Send(Message{7, "queued"}).ok());
  // A server comes up on that address: the next attempt connects and the message goes.
  Recorder late_d;
  late_d.set_echo(true);
  auto late = Messenger::Create(SoftNoAuthOptions(EntityType::kOsd, 2), &late_d);
  ASSERT_TRUE(late.ok()) << late.status();
  ASSERT_TRUE((*late)->Bind(addr).ok());
  EXPECT_TRUE(late_d.WaitMessages(1, absl::Seconds(10)));
  EXPECT_TRUE(client_d_.WaitMessages(1, absl::Seconds(5)));
  EXPECT_TRUE((*conn)->is_connected());
  EXPECT_TRUE(client_d_.resets().empty());
  client_->Shutdown();
  (*late)->Shutdown();
}

}  // namespace
}  // namespace msgr::rdma

// The rdma messenger's accepting side (its handshake runs over a TCP side channel): no
// thread per connection being set up, and a connection that sends garbage, stays silent or
// stops halfway through the handshake is closed with its reason counted, while
// well-behaved clients keep being served and new ones get in.

#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/frame.h"
#include "msg/messenger.h"
#include "tests/msg/raw_socket.h"
#include "tests/msg/rdma/rdma_test_util.h"

namespace msgr::rdma {
namespace {

using msgr::testing::HelloFrame;
using msgr::testing::RawSocket;
using testing::Recorder;
using testing::SoftNoAuthOptions;
using testing::ThreadCount;

class RdmaAcceptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    MessengerOptions so = SoftNoAuthOptions(EntityType::kOsd, 0);
    so.handshake_timeout = absl::Milliseconds(1500);
    auto s = Messenger::Create(so, &server_d_);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
    server_d_.set_echo(true);
    auto a = server_->Bind("127.0.0.1:0");
    ASSERT_TRUE(a.ok()) << a.status();
    addr_ = *a;
    ASSERT_TRUE(absl::SimpleAtoi(addr_.substr(addr_.rfind(':') + 1), &port_));
    good_ = NewClient(1);
    GoodClientWorks();
  }
  void TearDown() override {
    for (auto& c : clients_) c->Shutdown();
    if (server_) server_->Shutdown();
  }

  struct Client {
    Recorder d;
    std::unique_ptr<Messenger> m;
    ConnectionRef conn;
  };
  // A client messenger with a session to the server.
  Client* NewClient(uint64_t id) {
    auto c = std::make_unique<Client>();
    auto m = Messenger::Create(SoftNoAuthOptions(EntityType::kClient, id), &c->d);
    EXPECT_TRUE(m.ok()) << m.status();
    c->m = std::move(*m);
    auto conn = c->m->Connect(addr_, ConnectOptions{});
    EXPECT_TRUE(conn.ok()) << conn.status();
    c->conn = *conn;
    clients_.push_back(std::move(c->m));
    owned_.push_back(std::move(c));
    return owned_.back().get();
  }
  // `c` gets an echo of a new message within `d`.
  bool Echoes(Client* c, absl::Duration d = absl::Seconds(5)) {
    const size_t before = c->d.messages().size();
    if (!c->conn->Send(Message{7, "ping"}).ok()) return false;
    return c->d.WaitMessages(before + 1, d);
  }
  void GoodClientWorks() { ASSERT_TRUE(Echoes(good_)); }

  Recorder server_d_;
  std::unique_ptr<Messenger> server_;
  std::string addr_;
  int port_ = 0;
  std::vector<std::unique_ptr<Client>> owned_;
  std::vector<std::unique_ptr<Messenger>> clients_;
  Client* good_ = nullptr;
};

TEST_F(RdmaAcceptTest, SilentConnectionsHoldNoThreadAndEndAtTheHandshakeTimeout) {
  const int before = ThreadCount();
  const uint64_t errors = server_->counters().protocol_errors;
  std::vector<std::unique_ptr<RawSocket>> silent;
  for (int i = 0; i < 40; ++i) silent.push_back(std::make_unique<RawSocket>(port_));
  absl::SleepFor(absl::Milliseconds(300));  // every one accepted by now
  // A blocking handshake took a thread per connection: 40 more.
  EXPECT_LT(ThreadCount() - before, 5);
  // Meanwhile the server serves the session it has and sets up a new one.
  GoodClientWorks();
  Client* late = NewClient(2);
  EXPECT_TRUE(Echoes(late));
  // Each silent connection is closed once its handshake is overdue, and counted.
  for (auto& s : silent) EXPECT_TRUE(s->ClosedByPeer(5000));
  EXPECT_GE(server_->counters().protocol_errors, errors + 40);
}

TEST_F(RdmaAcceptTest, GarbageIsRefusedAtOnceAndAStalledHandshakeAtItsTimeout) {
  const uint64_t errors = server_->counters().protocol_errors;
  RawSocket garbage(port_);
  garbage.Send(std::string(4096, '\x5a'));
  const absl::Time start = absl::Now();
  EXPECT_TRUE(garbage.ClosedByPeer(1000)) << "garbage was not refused at once";
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(1000));
  // A client that says HELLO, gets the CHALLENGE and says nothing more.
  RawSocket stalled(port_);
  stalled.Send(HelloFrame());
  const std::string challenge = stalled.Read(kFrameHeaderBytes);
  ASSERT_EQ(challenge.size(), kFrameHeaderBytes);
  FrameHeader h;
  ASSERT_TRUE(DecodeFrameHeader(reinterpret_cast<const uint8_t*>(challenge.data()), 4096, &h).ok());
  EXPECT_EQ(h.type, FrameType::kChallenge);
  stalled.Read(h.payload_len);
  GoodClientWorks();
  const absl::Time stall = absl::Now();
  EXPECT_TRUE(stalled.ClosedByPeer(5000));
  EXPECT_GE(absl::Now() - stall, absl::Milliseconds(500)) << "closed well before its timeout";
  EXPECT_GE(server_->counters().protocol_errors, errors + 2);
  GoodClientWorks();
}

}  // namespace
}  // namespace msgr::rdma

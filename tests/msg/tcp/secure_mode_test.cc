// ms_mode secure on the TCP backend, end to end over loopback: messages and ring records
// round-trip byte for byte both ways, a bit flipped on the wire (by a proxy between the
// two messengers) fails that session with DATA_LOSS and is counted while another session
// keeps working, crc and secure peers refuse each other saying which mode each runs, and
// a lossless session that reconnects (new keys each time) still delivers exactly once.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

namespace msgr {
namespace {

using testing::RecordingDispatcher;

MessengerOptions Options(EntityName name, const std::string& mode,
                         const std::string& cipher = "aes-128-gcm") {
  MessengerOptions o;
  o.name = name;
  o.auth = AuthConfig{AuthConfig::Mode::kSecret, "cluster-key"};
  o.ms_mode = mode;
  o.ms_secure_cipher = cipher;
  o.ring_bytes = 4 << 20;
  return o;
}

const EntityName kOsd{EntityType::kOsd, 0};
EntityName Client(uint64_t id) { return EntityName{EntityType::kClient, id}; }

// Payload i of a stream: sizes from 1 byte to past the reader's direct-read threshold.
std::string Payload(int i) {
  static const size_t kSizes[] = {1, 17, 300, 4096, 40000, 70000, 200000};
  std::string s(kSizes[i % 7], '\0');
  for (size_t j = 0; j < s.size(); ++j) s[j] = static_cast<char>((i * 131 + j * 7) & 0xff);
  return s;
}

// A TCP proxy to `target` that can flip one bit of what a client sends, at a given offset
// of the first connection's client-to-server stream.
class CorruptingProxy {
 public:
  explicit CorruptingProxy(int target_port) : target_port_(target_port) {
    listen_fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    EXPECT_EQ(listen(listen_fd_, 8), 0);
    socklen_t len = sizeof(a);
    getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    accept_thread_ = std::thread([this] { AcceptLoop(); });
  }
  ~CorruptingProxy() {
    stop_ = true;
    shutdown(listen_fd_, SHUT_RDWR);
    close(listen_fd_);
    accept_thread_.join();
    for (auto& t : pumps_) t.join();
  }
  std::string addr() const { return absl::StrCat("127.0.0.1:", port_); }
  // Client-to-server bytes forwarded so far on the first connection.
  uint64_t forwarded() const { return forwarded_.load(); }
  // Flips bit 0 of the first connection's client-to-server byte at `offset`.
  void FlipAt(uint64_t offset) { flip_at_ = static_cast<int64_t>(offset); }

 private:
  void AcceptLoop() {
    for (int n = 0; !stop_; ++n) {
      const int c = accept(listen_fd_, nullptr, nullptr);
      if (c < 0) return;
      const int s = socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a{};
      a.sin_family = AF_INET;
      a.sin_port = htons(static_cast<uint16_t>(target_port_));
      a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
      if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
        close(c);
        close(s);
        continue;
      }
      pumps_.emplace_back([this, c, s, first = n == 0] { Pump(c, s, first); });
    }
  }
  void Pump(int c, int s, bool first) {
    char buf[65536];
    for (;;) {
      pollfd p[2] = {{c, POLLIN, 0}, {s, POLLIN, 0}};
      if (stop_) break;
      if (poll(p, 2, 50) <= 0) continue;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = recv(p[i].fd, buf, sizeof(buf), 0);
        if (n <= 0) {
          done = true;
          break;
        }
        if (i == 0 && first) {
          const uint64_t at = forwarded_.load();
          const int64_t flip = flip_at_.load();
          if (flip >= 0 && static_cast<uint64_t>(flip) >= at &&
              static_cast<uint64_t>(flip) < at + n) {
            buf[flip - at] ^= 0x01;
            flip_at_ = -1;
          }
          forwarded_ += n;
        }
        if (send(p[1 - i].fd, buf, n, MSG_NOSIGNAL) != n) done = true;
      }
      if (done) break;
    }
    close(c);
    close(s);
  }

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> forwarded_{0};
  std::atomic<int64_t> flip_at_{-1};
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;
};

int PortOf(const std::string& addr) { return std::stoi(addr.substr(addr.rfind(':') + 1)); }

void RoundTrip(const std::string& cipher) {
  RecordingDispatcher sd, cd;
  sd.on_message = [](const ConnectionRef& c, const Message& m) {
    ASSERT_TRUE(c->TrySend(Message{static_cast<uint16_t>(m.type + 1), m.payload}).ok());
  };
  auto server = std::move(*Messenger::Create(Options(kOsd, "secure", cipher), &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  auto client = std::move(*Messenger::Create(Options(Client(1), "secure", cipher), &cd));
  auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});

  constexpr int kMsgs = 300;
  for (int i = 0; i < kMsgs; ++i) ASSERT_TRUE(conn->Send(Message{10, Payload(i)}).ok());
  // Records: packed and aligned layouts, through the buffer and read straight into the slot.
  constexpr int kRecs = 600;
  for (int i = 0; i < kRecs; ++i) {
    const std::string p = Payload(i * 3 + 1);
    ASSERT_TRUE(conn->WriteRecord(RecordDesc{absl::StrCat("obj", i), static_cast<uint64_t>(i),
                                             static_cast<uint64_t>(i) * 10, 0},
                                  p, absl::Seconds(10))
                    .ok());
  }
  ASSERT_TRUE(cd.WaitFor([&] { return cd.messages.size() >= kMsgs; }, std::chrono::seconds(30)));
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kRecs; }, std::chrono::seconds(30)));
  sd.Locked([&] {
    ASSERT_EQ(sd.messages.size(), static_cast<size_t>(kMsgs));
    for (int i = 0; i < kMsgs; ++i) ASSERT_TRUE(sd.messages[i].payload == Payload(i)) << i;
  });
  cd.Locked([&] {
    for (int i = 0; i < kMsgs; ++i) {
      ASSERT_EQ(cd.messages[i].type, 11);
      ASSERT_TRUE(cd.messages[i].payload == Payload(i)) << "echo " << i;
    }
  });
  auto got = sd.drainer()->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(kRecs));
  for (int i = 0; i < kRecs; ++i) {
    ASSERT_EQ(got[i].oid, absl::StrCat("obj", i));
    ASSERT_EQ(got[i].object_offset, static_cast<uint64_t>(i) * 10);
    ASSERT_TRUE(got[i].payload == Payload(i * 3 + 1)) << "record " << i;
  }
  EXPECT_EQ(sd.drainer()->Error(), "");
  for (const auto* m : {server.get(), client.get()}) {
    const MessengerCounters c = m->counters();
    EXPECT_GT(c.secure_frames_sealed, static_cast<uint64_t>(kMsgs));
    EXPECT_GT(c.secure_frames_opened, static_cast<uint64_t>(kMsgs));
    EXPECT_EQ(c.secure_auth_failures, 0u);
    EXPECT_EQ(c.crc_errors + c.protocol_errors, 0u);
  }
}

TEST(TcpSecureModeTest, MessagesAndRecordsRoundTripAes128) {
  spdlog::set_level(spdlog::level::warn);
  RoundTrip("aes-128-gcm");
}

TEST(TcpSecureModeTest, MessagesAndRecordsRoundTripAes256) {
  spdlog::set_level(spdlog::level::warn);
  RoundTrip("aes-256-gcm");
}

TEST(TcpSecureModeTest, FlippedBitFailsThatSessionOnlyAndIsCounted) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, ad, bd;
  auto server = std::move(*Messenger::Create(Options(kOsd, "secure"), &sd));
  server->SetPolicy(EntityType::kClient, Policy::Lossy());
  const std::string addr = *server->Bind("127.0.0.1:0");
  CorruptingProxy proxy(PortOf(addr));
  auto a = std::move(*Messenger::Create(Options(Client(1), "secure"), &ad));
  auto b = std::move(*Messenger::Create(Options(Client(2), "secure"), &bd));
  auto ca = *a->Connect(proxy.addr(), ConnectOptions{Policy::Lossy(), false});
  auto cb = *b->Connect(addr, ConnectOptions{Policy::Lossy(), false});
  ASSERT_TRUE(ca->Send(Message{1, "before"}).ok());
  ASSERT_TRUE(cb->Send(Message{1, "b1"}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= 2; }));

  // The next frame a sends: a bit of its sealed header or payload flips on the way.
  proxy.FlipAt(proxy.forwarded() + 70);
  ASSERT_TRUE(ca->Send(Message{1, std::string(100, 'x')}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return !sd.resets.empty(); })) << "the tampered session must end";
  sd.Locked([&] {
    ASSERT_EQ(sd.resets.size(), 1u);
    EXPECT_TRUE(absl::IsDataLoss(sd.resets[0])) << sd.resets[0];
    EXPECT_NE(sd.resets[0].message().find("secure frame failed authentication"), std::string::npos)
        << sd.resets[0];
    EXPECT_EQ(sd.messages.size(), 2u) << "nothing of the tampered frame was delivered";
  });
  EXPECT_EQ(server->counters().secure_auth_failures, 1u);
  EXPECT_EQ(server->counters().crc_errors, 0u) << "GCM catches it, not the crc";
  EXPECT_TRUE(ad.WaitFor([&] { return !ad.resets.empty(); }));

  // The other session on the same messenger goes on.
  ASSERT_TRUE(cb->Send(Message{1, "b2"}).ok());
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= 3; }));
  sd.Locked([&] { EXPECT_EQ(sd.messages.back().payload, "b2"); });
  EXPECT_EQ(server->counters().secure_auth_failures, 1u);
}

TEST(TcpSecureModeTest, CrcAndSecurePeersRefuseEachOtherNamingBothModes) {
  spdlog::set_level(spdlog::level::off);
  struct Case {
    std::string client_mode, server_mode, want;
  };
  for (const Case& c :
       {Case{"crc", "secure", "client.1 wants ms_mode crc, osd.0 runs ms_mode secure (aes-128-gcm)"},
        Case{"secure", "crc", "client.1 wants ms_mode secure (aes-128-gcm), osd.0 runs ms_mode crc"}}) {
    RecordingDispatcher sd, cd;
    auto server = std::move(*Messenger::Create(Options(kOsd, c.server_mode), &sd));
    const std::string addr = *server->Bind("127.0.0.1:0");
    auto client = std::move(*Messenger::Create(Options(Client(1), c.client_mode), &cd));
    auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossy(), false});
    ASSERT_TRUE(cd.WaitFor([&] { return !cd.refused.empty(); })) << c.client_mode;
    cd.Locked([&] {
      EXPECT_TRUE(absl::IsFailedPrecondition(cd.refused[0])) << cd.refused[0];
      EXPECT_NE(cd.refused[0].message().find(c.want), std::string::npos) << cd.refused[0];
    });
    sd.Locked([&] { EXPECT_TRUE(sd.accepted.empty()) << "no silent downgrade"; });
  }
}

TEST(TcpSecureModeTest, CreateRefusesSecureWithoutTcpOrKey) {
  RecordingDispatcher d;
  MessengerOptions rdma = Options(kOsd, "secure");
  rdma.type = "rdma";
  auto r = Messenger::Create(rdma, &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("secure mode is tcp-only: one-sided RDMA writes bypass the "
                                      "CPU that would decrypt them"),
            std::string::npos)
      << r.status();
  MessengerOptions none = Options(kOsd, "secure");
  none.auth = AuthConfig::None();
  r = Messenger::Create(none, &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("secure mode needs a cluster key"), std::string::npos)
      << r.status();
  r = Messenger::Create(Options(kOsd, "tls"), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ms_mode 'tls' is unknown"), std::string::npos);
  r = Messenger::Create(Options(kOsd, "secure", "chacha"), &d);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("ms_secure_cipher 'chacha' is unknown"), std::string::npos);
}

TEST(TcpSecureModeTest, ReconnectsReKeyAndDeliverExactlyOnce) {
  spdlog::set_level(spdlog::level::warn);
  RecordingDispatcher sd, cd;
  auto server = std::move(*Messenger::Create(Options(kOsd, "secure"), &sd));
  const std::string addr = *server->Bind("127.0.0.1:0");
  MessengerOptions co = Options(Client(1), "secure");
  co.inject_socket_failures = 40;  // a new socket, handshake and keys every 40 frames
  auto client = std::move(*Messenger::Create(co, &cd));
  auto conn = *client->Connect(addr, ConnectOptions{Policy::Lossless(), /*want_ring=*/true});
  constexpr int kMsgs = 400, kRecs = 400;
  for (int i = 0; i < kMsgs; ++i) ASSERT_TRUE(conn->Send(Message{3, absl::StrCat("m", i)}).ok());
  for (int i = 0; i < kRecs; ++i) {
    ASSERT_TRUE(conn->WriteRecord(RecordDesc{"o", static_cast<uint64_t>(i), 0, 0}, Payload(i % 5),
                                  absl::Seconds(20))
                    .ok());
  }
  ASSERT_TRUE(sd.WaitFor([&] { return sd.messages.size() >= kMsgs; }, std::chrono::seconds(60)));
  ASSERT_TRUE(cd.WaitFor([&] { return cd.record_acks.size() >= kRecs; }, std::chrono::seconds(60)));
  sd.Locked([&] {
    ASSERT_EQ(sd.messages.size(), static_cast<size_t>(kMsgs));
    for (int i = 0; i < kMsgs; ++i) ASSERT_EQ(sd.messages[i].payload, absl::StrCat("m", i));
  });
  auto got = sd.drainer()->Records();
  ASSERT_EQ(got.size(), static_cast<size_t>(kRecs));
  for (int i = 0; i < kRecs; ++i) ASSERT_TRUE(got[i].payload == Payload(i % 5)) << i;
  EXPECT_GE(client->counters().reconnects, 5u);
  EXPECT_EQ(server->counters().secure_auth_failures, 0u);
  EXPECT_EQ(client->counters().secure_auth_failures, 0u);
}

}  // namespace
}  // namespace msgr

// SideChannel and Listener (msg/rdma/side_channel.cc) over loopback TCP: frames both ways,
// CLOSE carrying a status code, ReadFrame's deadline, EOF, bytes that are not a frame,
// frames too large, writers on two threads, the non-blocking ReadAvailable, and the
// errors of Connect, Listen and a stopped Accept.
#include "msg/rdma/side_channel.h"

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <memory>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/frame.h"

namespace msgr::rdma {
namespace {

constexpr absl::Duration kWait = absl::Seconds(10);

absl::Time Deadline(absl::Duration d = kWait) { return absl::Now() + d; }

FrameHeader MessageHeader(uint64_t seq, uint16_t msg_type) {
  FrameHeader h;
  h.type = FrameType::kMessage;
  h.seq = seq;
  h.msg_type = msg_type;
  return h;
}

// Raw bytes onto a socket (for what a SideChannel would never write).
void SendRaw(int fd, const std::string& bytes) {
  size_t off = 0;
  while (off < bytes.size()) {
    const ssize_t n = send(fd, bytes.data() + off, bytes.size() - off, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      pollfd p{fd, POLLOUT, 0};
      poll(&p, 1, 100);
      continue;
    }
    ASSERT_GT(n, 0) << std::strerror(errno);
    off += static_cast<size_t>(n);
  }
}

class SideChannelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto l = Listener::Listen("127.0.0.1:0");
    ASSERT_TRUE(l.ok()) << l.status();
    listener_ = std::move(*l);
    auto c = SideChannel::Connect(listener_->addr(), absl::Seconds(5));
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = std::move(*c);
    auto s = listener_->Accept();
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = std::move(*s);
  }

  std::unique_ptr<Listener> listener_;
  std::unique_ptr<SideChannel> client_;
  std::unique_ptr<SideChannel> server_;
};

TEST_F(SideChannelTest, ListenerReportsTheBoundPortAndBothEndsNameTheirPeer) {
  const std::string& addr = listener_->addr();
  ASSERT_TRUE(absl::StartsWith(addr, "127.0.0.1:")) << addr;
  int port = 0;
  ASSERT_TRUE(absl::SimpleAtoi(addr.substr(addr.rfind(':') + 1), &port)) << addr;
  EXPECT_GT(port, 0) << "port 0 is replaced by the one bound";
  EXPECT_EQ(client_->peer(), addr);
  EXPECT_TRUE(absl::StartsWith(server_->peer(), "127.0.0.1:")) << server_->peer();
  EXPECT_NE(server_->peer(), addr) << "the server's peer is the client's own port";
  EXPECT_GE(client_->fd(), 0);
  EXPECT_GE(server_->fd(), 0);
}

TEST_F(SideChannelTest, FramesRoundTripBothWaysInOrderWithEveryHeaderField) {
  FrameHeader h = MessageHeader(5, 0x5201);
  h.ack_seq = 77;
  h.aux = 0x0102030405060708ull;
  h.flags = kFrameFlagCredit;
  const std::string payload = "setup payload \x00\x01\x02 with a zero byte" + std::string(3000, 'z');
  ASSERT_TRUE(client_->WriteFrame(h, payload, Deadline()).ok());
  FrameHeader empty;
  empty.type = FrameType::kKeepalive;
  ASSERT_TRUE(client_->WriteFrame(empty, "", Deadline()).ok());
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(6, 0x5203), "last", Deadline()).ok());

  DecodedFrame f;
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.header.type, FrameType::kMessage);
  EXPECT_EQ(f.header.seq, 5u);
  EXPECT_EQ(f.header.ack_seq, 77u);
  EXPECT_EQ(f.header.msg_type, 0x5201);
  EXPECT_EQ(f.header.aux, 0x0102030405060708ull);
  EXPECT_EQ(f.header.flags, kFrameFlagCredit);
  EXPECT_EQ(f.header.payload_len, payload.size());
  EXPECT_EQ(f.payload, payload);
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.header.type, FrameType::kKeepalive);
  EXPECT_EQ(f.payload, "");
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.header.msg_type, 0x5203);
  EXPECT_EQ(f.payload, "last");

  ASSERT_TRUE(server_->WriteFrame(MessageHeader(1, 0x5202), "reply", Deadline()).ok());
  ASSERT_TRUE(client_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.header.msg_type, 0x5202);
  EXPECT_EQ(f.payload, "reply");
}

TEST_F(SideChannelTest, WriteCloseCarriesTheStatusCodeAndMessage) {
  for (const absl::Status& why :
       {absl::PermissionDeniedError("name not allowed"),
        absl::ResourceExhaustedError("RDMA registered-memory budget exhausted"),
        absl::UnavailableError("shutting down")}) {
    SCOPED_TRACE(why.ToString());
    ASSERT_TRUE(server_->WriteClose(why, Deadline()).ok());
    DecodedFrame f;
    ASSERT_TRUE(client_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
    EXPECT_EQ(f.header.type, FrameType::kClose);
    EXPECT_EQ(f.header.seq, 0u);
    EXPECT_EQ(static_cast<absl::StatusCode>(f.header.msg_type), why.code());
    EXPECT_EQ(f.payload, why.message());
  }
}

// A refusal whose message is longer than a control frame may carry still reaches the peer
// as a CLOSE with its code: the message is cut, not the frame made unreadable (the peer's
// decoder refuses any control frame above kMaxControlPayload as a protocol error).
TEST_F(SideChannelTest, WriteCloseWithALongMessageStillCarriesTheCode) {
  const std::string long_message = "refused: " + std::string(2 * kMaxControlPayload, 'r');
  ASSERT_TRUE(server_->WriteClose(absl::FailedPreconditionError(long_message), Deadline()).ok());
  DecodedFrame f;
  const absl::Status s = client_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(f.header.type, FrameType::kClose);
  EXPECT_EQ(static_cast<absl::StatusCode>(f.header.msg_type),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(f.payload.size(), kMaxControlPayload);
  EXPECT_EQ(f.payload, long_message.substr(0, kMaxControlPayload));
}

TEST_F(SideChannelTest, ReadFrameGivesUpAtItsDeadline) {
  DecodedFrame f;
  absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(absl::Milliseconds(50)), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "peer sent nothing in time")) << s;
  s = server_->ReadFrame(kMaxControlPayload, absl::Now() - absl::Seconds(1), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << "a past deadline: " << s;
  // Still usable afterwards.
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(1, 9), "after", Deadline()).ok());
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.payload, "after");
}

// Half a frame, a deadline, then the rest: the bytes already read are kept.
TEST_F(SideChannelTest, AFrameSplitAcrossADeadlineIsStillReadWhole) {
  const std::string bytes = EncodeFrame(MessageHeader(3, 4), "split across two writes");
  SendRaw(client_->fd(), bytes.substr(0, 30));
  DecodedFrame f;
  const absl::Status s =
      server_->ReadFrame(kMaxControlPayload, Deadline(absl::Milliseconds(50)), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  SendRaw(client_->fd(), bytes.substr(30));
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok());
  EXPECT_EQ(f.header.seq, 3u);
  EXPECT_EQ(f.payload, "split across two writes");
}

TEST_F(SideChannelTest, EofAfterTheLastFrameIsUnavailable) {
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(1, 1), "bye", Deadline()).ok());
  client_->Shutdown();
  DecodedFrame f;
  ASSERT_TRUE(server_->ReadFrame(kMaxControlPayload, Deadline(), &f).ok()) << "frames first";
  EXPECT_EQ(f.payload, "bye");
  const absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "closed by the peer")) << s;
}

TEST_F(SideChannelTest, ClosedPeerIsSeenEvenWhenItIsDestroyed) {
  client_.reset();
  DecodedFrame f;
  const absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
}

TEST_F(SideChannelTest, BytesThatAreNotAFrameAreRefusedAndTheChannelStaysFailed) {
  SendRaw(client_->fd(), "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUser-Agent: curl\r\n\r\n");
  DecodedFrame f;
  absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "bad frame magic")) << s;
  // A good frame after garbage cannot be trusted to start where it seems to.
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(1, 1), "good", Deadline()).ok());
  s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
}

TEST_F(SideChannelTest, CorruptHeaderOrPayloadIsDataLoss) {
  std::string header_flipped = EncodeFrame(MessageHeader(1, 1), "payload");
  header_flipped[9] ^= 0x40;  // inside seq: the header crc no longer matches
  SendRaw(client_->fd(), header_flipped);
  DecodedFrame f;
  absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "header crc mismatch")) << s;

  std::string payload_flipped = EncodeFrame(MessageHeader(1, 1), "payload");
  payload_flipped.back() ^= 1;
  SendRaw(server_->fd(), payload_flipped);
  s = client_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "payload crc mismatch")) << s;
}

// A header claiming more than a control frame may carry is refused from the header alone:
// the payload is never waited for.
TEST_F(SideChannelTest, OversizedFrameIsRefusedFromItsHeader) {
  FrameHeader h = MessageHeader(1, 1);
  h.payload_len = 1 << 20;
  std::string header(kFrameHeaderBytes, '\0');
  EncodeFrameHeader(h, reinterpret_cast<uint8_t*>(header.data()));
  SendRaw(client_->fd(), header);
  DecodedFrame f;
  const absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "payload length 1048576 outside [0, 4096]")) << s;
}

TEST_F(SideChannelTest, FrameAboveTheCallersLimitIsRefused) {
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(1, 1), std::string(200, 'x'), Deadline()).ok());
  DecodedFrame f;
  const absl::Status s = server_->ReadFrame(100, Deadline(), &f);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "too large")) << s;
}

// Frames from two writing threads arrive whole (never interleaved) and each thread's in
// its own order. Small socket buffers make sends partial, where interleaving would start.
TEST_F(SideChannelTest, ConcurrentWritersNeverInterleaveFrames) {
  const int small = 16 << 10;
  setsockopt(client_->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  setsockopt(server_->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  constexpr int kPerThread = 100;
  auto payload_of = [](uint16_t who, int i) {
    return absl::StrCat(who, ":", i, ":", std::string(1000 + i * 7 % 3000, 'a' + who));
  };
  auto writer = [&](uint16_t who) {
    for (int i = 1; i <= kPerThread; ++i) {
      const std::string payload = payload_of(who, i);
      ASSERT_TRUE(client_->WriteFrame(MessageHeader(i, who), payload, Deadline()).ok());
    }
  };
  std::vector<DecodedFrame> got;
  std::thread a(writer, 1), b(writer, 2);
  absl::SleepFor(absl::Milliseconds(20));  // let both fill the buffers and block mid-frame
  std::thread reader([&] {
    for (int i = 0; i < 2 * kPerThread; ++i) {
      DecodedFrame f;
      const absl::Status s = server_->ReadFrame(kMaxControlPayload, Deadline(), &f);
      ASSERT_TRUE(s.ok()) << "frame " << i << ": " << s;
      got.push_back(std::move(f));
    }
  });
  a.join();
  b.join();
  reader.join();
  ASSERT_EQ(got.size(), 2u * kPerThread);
  uint64_t next[3] = {0, 1, 1};
  for (const DecodedFrame& f : got) {
    const uint16_t who = f.header.msg_type;
    ASSERT_TRUE(who == 1 || who == 2) << who;
    EXPECT_EQ(f.header.seq, next[who]) << "writer " << who;
    const int i = static_cast<int>(next[who]++);
    EXPECT_EQ(f.payload, payload_of(who, i));
  }
}

// A writer whose peer reads nothing gives up at its deadline.
TEST_F(SideChannelTest, WriteFrameGivesUpWhenThePeerStopsReading) {
  const int small = 4096;
  setsockopt(client_->fd(), SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
  setsockopt(server_->fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof(small));
  const std::string chunk(64 << 10, 'w');
  absl::Status s;
  for (int i = 0; i < 200 && s.ok(); ++i) {
    s = client_->WriteFrame(MessageHeader(i + 1, 1), chunk, Deadline(absl::Milliseconds(50)));
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_TRUE(absl::StrContains(s.message(), "send timed out")) << s;
}

TEST_F(SideChannelTest, ReadAvailableReturnsWhatIsThereThenEof) {
  DecodedFrame f;
  absl::Status error;
  EXPECT_EQ(server_->ReadAvailable(&f, &error), FrameDecoder::Result::kNeedMore);
  EXPECT_TRUE(error.ok()) << error;
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(1, 1), "one", Deadline()).ok());
  ASSERT_TRUE(client_->WriteFrame(MessageHeader(2, 1), "two", Deadline()).ok());
  client_->Shutdown();
  pollfd p{server_->fd(), POLLIN, 0};
  ASSERT_EQ(poll(&p, 1, 10000), 1);
  std::vector<std::string> frames;
  FrameDecoder::Result r;
  for (int i = 0; i < 100; ++i) {
    error = absl::OkStatus();
    r = server_->ReadAvailable(&f, &error);
    if (r == FrameDecoder::Result::kFrame) {
      frames.push_back(f.payload);
      continue;
    }
    if (r == FrameDecoder::Result::kError) break;
    // kNeedMore: the rest is still on its way.
    ASSERT_EQ(poll(&p, 1, 10000), 1);
  }
  EXPECT_EQ(frames, (std::vector<std::string>{"one", "two"})) << "frames before the EOF";
  EXPECT_EQ(r, FrameDecoder::Result::kError);
  EXPECT_EQ(error.code(), absl::StatusCode::kUnavailable) << error;
}

TEST(SideChannelConnectTest, BadAddressesAreInvalidArgumentNamingTheAddress) {
  for (const std::string addr : {"localhost", "127.0.0.1:", "127.0.0.1:port", "127.0.0.1:70000",
                                 "127.0.0.1:-1"}) {
    SCOPED_TRACE(addr);
    auto c = SideChannel::Connect(addr, absl::Seconds(1));
    ASSERT_FALSE(c.ok());
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), absl::StrCat("'", addr, "'")))
        << c.status();
    EXPECT_TRUE(absl::StrContains(c.status().message(), "HOST:PORT")) << c.status();
    auto l = Listener::Listen(addr);
    EXPECT_EQ(l.status().code(), absl::StatusCode::kInvalidArgument) << l.status();
  }
}

TEST(SideChannelConnectTest, NobodyListeningIsUnavailableNamingTheAddress) {
  std::string addr;
  {
    auto l = Listener::Listen("127.0.0.1:0");
    ASSERT_TRUE(l.ok()) << l.status();
    addr = (*l)->addr();
  }  // closed: nobody listens there now
  auto c = SideChannel::Connect(addr, absl::Seconds(5));
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable) << c.status();
  EXPECT_TRUE(absl::StrContains(c.status().message(), absl::StrCat("connect to ", addr)))
      << c.status();
}

TEST(SideChannelConnectTest, ListeningTwiceOnOnePortIsAlreadyExists) {
  auto a = Listener::Listen("127.0.0.1:0");
  ASSERT_TRUE(a.ok()) << a.status();
  auto b = Listener::Listen((*a)->addr());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), absl::StatusCode::kAlreadyExists) << b.status();
  EXPECT_TRUE(absl::StrContains(b.status().message(), (*a)->addr())) << b.status();
}

TEST(SideChannelConnectTest, StopEndsABlockedAcceptWithCancelled) {
  auto l = Listener::Listen("127.0.0.1:0");
  ASSERT_TRUE(l.ok()) << l.status();
  absl::Status accepted;
  std::thread t([&] { accepted = (*l)->Accept().status(); });
  absl::SleepFor(absl::Milliseconds(20));  // usually blocked by now; either way it must end
  (*l)->Stop();
  t.join();
  EXPECT_EQ(accepted.code(), absl::StatusCode::kCancelled) << accepted;
  EXPECT_EQ((*l)->Accept().status().code(), absl::StatusCode::kCancelled) << "stays stopped";
}

TEST(SideChannelConnectTest, AcceptReturnsEachConnectionOnce) {
  auto l = Listener::Listen("127.0.0.1:0");
  ASSERT_TRUE(l.ok()) << l.status();
  std::set<std::string> client_addrs;
  std::vector<std::unique_ptr<SideChannel>> clients;
  for (int i = 0; i < 3; ++i) {
    auto c = SideChannel::Connect((*l)->addr(), absl::Seconds(5));
    ASSERT_TRUE(c.ok()) << c.status();
    sockaddr_in local{};
    socklen_t len = sizeof(local);
    ASSERT_EQ(getsockname((*c)->fd(), reinterpret_cast<sockaddr*>(&local), &len), 0);
    client_addrs.insert(absl::StrCat("127.0.0.1:", ntohs(local.sin_port)));
    clients.push_back(std::move(*c));
  }
  std::set<std::string> accepted;
  for (int i = 0; i < 3; ++i) {
    auto s = (*l)->Accept();
    ASSERT_TRUE(s.ok()) << s.status();
    accepted.insert((*s)->peer());
  }
  EXPECT_EQ(accepted, client_addrs);
}

}  // namespace
}  // namespace msgr::rdma

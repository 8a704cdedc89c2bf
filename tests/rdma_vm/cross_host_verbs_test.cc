// Real verbs between two machines: the two guests of tools/rxe_vms.sh, each with its own
// rxe0 on its own NIC. Both guests run this test at once (MSGR_VM_ROLE a or b); "a" listens
// on a TCP side channel, "b" connects, they swap QP endpoints and region keys, and then
// check what a one-host run (one rxe device on lo, talking to itself) never exercised:
//   * GID selection: with no MSGR_RDMA_GID_INDEX, the provider picked the GID of this
//     guest's own address (::ffff:198.18.1.x), not the link-local one at index 0;
//   * path MTU: the two ports' active MTUs differ (eth0 MTU 9000 -> 4096, 1500 -> 1024),
//     and the QP on BOTH sides runs at the smaller one;
//   * a 1 MiB RDMA WRITE_WITH_IMM each way, bytes and immediate checked by the receiver;
//   * the transport timeout: once the peer's QP is destroyed, a WRITE fails with
//     kRetryExceeded (never hangs), after about (retry_cnt + 1) * 4.096 us * 2^timeout.
// Skips outside the two-guest run (no MSGR_VM_ROLE), so `bazel test //...` on the host
// passes it by; inside the guests a skip counts as a failure (tools/rxe_vm_suite.sh).
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/rdma/verbs/device.h"
#include "msg/rdma/verbs/ibverbs/ibv_objects.h"

namespace msgr {
namespace verbs {
namespace {

constexpr uint16_t kSidePort = 7471;
constexpr size_t kRegionBytes = 1u << 20;
constexpr uint32_t kImmAtoB = 0xa1b2c3d4;
constexpr uint32_t kImmBtoA = 0x5e6f7081;

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

// A blocking TCP stream carrying length-prefixed messages; the side channel.
class SideChannel {
 public:
  ~SideChannel() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool Listen(const std::string& addr) {
    int l = ::socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    ::setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    sockaddr_in sa = Addr(addr);
    if (::bind(l, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 || ::listen(l, 1) != 0) {
      ::close(l);
      return false;
    }
    fd_ = ::accept(l, nullptr, nullptr);
    ::close(l);
    return fd_ >= 0;
  }
  // Retries for `patience`: the other guest may still be booting.
  bool Connect(const std::string& addr, absl::Duration patience) {
    absl::Time deadline = absl::Now() + patience;
    while (absl::Now() < deadline) {
      fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in sa = Addr(addr);
      if (::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) == 0) return true;
      ::close(fd_);
      fd_ = -1;
      absl::SleepFor(absl::Milliseconds(200));
    }
    return false;
  }
  bool Send(const std::string& msg) {
    uint32_t n = htonl(static_cast<uint32_t>(msg.size()));
    return WriteAll(&n, sizeof(n)) && WriteAll(msg.data(), msg.size());
  }
  bool Recv(std::string* msg) {
    uint32_t n;
    if (!ReadAll(&n, sizeof(n))) return false;
    msg->resize(ntohl(n));
    return ReadAll(msg->data(), msg->size());
  }

 private:
  static sockaddr_in Addr(const std::string& ip) {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(kSidePort);
    ::inet_pton(AF_INET, ip.c_str(), &sa.sin_addr);
    return sa;
  }
  bool WriteAll(const void* p, size_t n) {
    const char* c = static_cast<const char*>(p);
    while (n > 0) {
      ssize_t w = ::write(fd_, c, n);
      if (w <= 0) return false;
      c += w;
      n -= static_cast<size_t>(w);
    }
    return true;
  }
  bool ReadAll(void* p, size_t n) {
    char* c = static_cast<char*>(p);
    while (n > 0) {
      ssize_t r = ::read(fd_, c, n);
      if (r <= 0) return false;
      c += r;
      n -= static_cast<size_t>(r);
    }
    return true;
  }
  int fd_ = -1;
};

// What each side tells the other: its QP endpoint and where the peer may write.
struct Hello {
  QpEndpoint ep;
  uint64_t addr = 0;
  uint32_t rkey = 0;
  std::string Encode() const {
    return absl::StrCat(addr, " ", rkey, " ", ep.Serialize());
  }
  static bool Decode(const std::string& s, Hello* h) {
    size_t a = s.find(' '), b = s.find(' ', a + 1);
    if (a == std::string::npos || b == std::string::npos) return false;
    h->addr = std::strtoull(s.substr(0, a).c_str(), nullptr, 10);
    h->rkey = static_cast<uint32_t>(std::strtoul(s.substr(a + 1, b - a - 1).c_str(), nullptr, 10));
    absl::StatusOr<QpEndpoint> ep = QpEndpoint::Parse(s.substr(b + 1));
    if (!ep.ok()) return false;
    h->ep = *ep;
    return true;
  }
};

uint8_t Pattern(size_t i, uint32_t seed) { return static_cast<uint8_t>((i * 131 + seed) >> 3); }

std::string GidString(const Gid& g) {
  char buf[INET6_ADDRSTRLEN];
  ::inet_ntop(AF_INET6, g.data(), buf, sizeof(buf));
  return buf;
}

// Waits up to `limit` for one completion on `cq`.
bool WaitOne(CompletionQueue* cq, Completion* c, absl::Duration limit) {
  absl::Time deadline = absl::Now() + limit;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> n = cq->WaitForCompletion(c, 1, absl::Milliseconds(100));
    if (n.ok() && *n == 1) return true;
  }
  return false;
}

TEST(CrossHostVerbs, GidMtuWriteAndTimeout) {
  const std::string role = Env("MSGR_VM_ROLE");
  if (role.empty()) GTEST_SKIP() << "not in the two-guest run (tools/rxe_vms.sh sets MSGR_VM_ROLE)";
  const bool is_a = role == "a";
  const std::string self = Env("MSGR_VM_ADDR"), peer = Env("MSGR_VM_PEER_ADDR");
  std::string dev_name = Env("MSGR_RDMA_DEVICE");
  if (dev_name.empty()) dev_name = "rxe0";

  // An explicit GID index naming an empty slot (rxe on eth0 fills 2 of 32) is refused at
  // open, with the table, rather than giving the QPs the all-zero GID.
  {
    DeviceOptions bad;
    bad.gid_index = 7;
    absl::StatusOr<std::unique_ptr<Device>> d = OpenDevice(dev_name, bad);
    ASSERT_FALSE(d.ok()) << "GID index 7 of " << dev_name << " accepted";
    EXPECT_NE(d.status().message().find("is empty"), absl::string_view::npos) << d.status();
    std::printf("cross-host: %s: gid_index 7 refused: %s\n", role.c_str(),
                std::string(d.status().message()).c_str());
  }
  absl::StatusOr<std::unique_ptr<Device>> dev = OpenDevice(dev_name, DeviceOptions{});
  ASSERT_TRUE(dev.ok()) << dev.status();
  const PortAttr& port = (*dev)->port();
  // GID selection: our own IPv4 address, RoCE v2 (the provider's default choice).
  Gid want{};
  want[10] = 0xff;
  want[11] = 0xff;
  ASSERT_EQ(::inet_pton(AF_INET, self.c_str(), want.data() + 12), 1) << self;
  std::printf("cross-host: %s %s: gid index %d %s, active_mtu %u\n", role.c_str(),
              dev_name.c_str(), port.gid_index, GidString(port.gid).c_str(), port.active_mtu);
  EXPECT_TRUE(port.ethernet);
  EXPECT_EQ(GidString(port.gid), GidString(want)) << "GID index " << port.gid_index;

  auto pd = (*dev)->CreatePd();
  ASSERT_TRUE(pd.ok()) << pd.status();
  auto cq = (*dev)->CreateCq(64);
  ASSERT_TRUE(cq.ok()) << cq.status();
  auto region = (*pd)->AllocRegion(kRegionBytes, kAllAccess);
  ASSERT_TRUE(region.ok()) << region.status();
  QpConfig cfg;
  cfg.send_cq = cq->get();
  cfg.recv_cq = cq->get();
  auto qp = (*pd)->CreateQp(cfg);
  ASSERT_TRUE(qp.ok()) << qp.status();
  RecvWr rwr{};
  rwr.wr_id = 1;
  ASSERT_TRUE((*qp)->PostRecv({&rwr, 1}).ok());

  SideChannel side;
  if (is_a) {
    ASSERT_TRUE(side.Listen(self)) << "listen on " << self << ":" << kSidePort;
  } else {
    ASSERT_TRUE(side.Connect(peer, absl::Seconds(120))) << "connect to " << peer;
  }
  Hello mine{(*qp)->local_endpoint(), reinterpret_cast<uint64_t>((*region)->addr()),
             (*region)->rkey()};
  ASSERT_TRUE(side.Send(mine.Encode()));
  std::string msg;
  Hello theirs;
  ASSERT_TRUE(side.Recv(&msg));
  ASSERT_TRUE(Hello::Decode(msg, &theirs)) << msg;
  std::printf("cross-host: %s: peer %s\n", role.c_str(), theirs.ep.DebugString().c_str());
  absl::Status st = (*qp)->Connect(theirs.ep);
  ASSERT_TRUE(st.ok()) << st;

  // Path MTU: the smaller of the two ports', on this side's QP (the peer checks its own).
  auto* ibv_qp = dynamic_cast<ibverbs::IbvQp*>(qp->get());
  ASSERT_NE(ibv_qp, nullptr) << dev_name << " is not an ibverbs device";
  absl::StatusOr<uint32_t> path_mtu = ibv_qp->QueryPathMtu();
  ASSERT_TRUE(path_mtu.ok()) << path_mtu.status();
  std::printf("cross-host: %s: QP path_mtu %u (local active_mtu %u, peer %u)\n", role.c_str(),
              *path_mtu, port.active_mtu, theirs.ep.mtu);
  EXPECT_EQ(*path_mtu, std::min(port.active_mtu, theirs.ep.mtu));

  // 1 MiB each way, a first then b (so each receive is posted before the peer writes).
  auto write_to_peer = [&](uint32_t imm) {
    for (size_t i = 0; i < kRegionBytes; ++i) (*region)->data()[i] = Pattern(i, imm);
    Sge sge = (*region)->Slice(0, kRegionBytes);
    SendWr w{};
    w.wr_id = 2;
    w.opcode = WrOpcode::kRdmaWriteWithImm;
    w.flags = kSignaled;
    w.sg_list = &sge;
    w.num_sge = 1;
    w.remote_addr = theirs.addr;
    w.rkey = theirs.rkey;
    w.imm_data = imm;
    ASSERT_TRUE((*qp)->PostSend({&w, 1}).ok());
    Completion c;
    ASSERT_TRUE(WaitOne(cq->get(), &c, absl::Seconds(60))) << "no completion for the write";
    EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  };
  auto receive_from_peer = [&](uint32_t imm) {
    Completion c;
    ASSERT_TRUE(WaitOne(cq->get(), &c, absl::Seconds(60))) << "no write arrived";
    ASSERT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
    EXPECT_EQ(c.opcode, WcOpcode::kRecvRdmaWithImm);
    EXPECT_TRUE(c.has_imm);
    EXPECT_EQ(c.imm_data, imm);
    EXPECT_EQ(c.byte_len, kRegionBytes);
    size_t bad = 0;
    for (size_t i = 0; i < kRegionBytes; ++i) bad += (*region)->data()[i] != Pattern(i, imm);
    EXPECT_EQ(bad, 0u) << "bytes differ from what the peer wrote";
  };
  if (is_a) {
    write_to_peer(kImmAtoB);
    receive_from_peer(kImmBtoA);
  } else {
    receive_from_peer(kImmAtoB);
    ASSERT_TRUE((*qp)->PostRecv({&rwr, 1}).ok());
    write_to_peer(kImmBtoA);
  }
  ASSERT_FALSE(HasFailure());

  // The timeout: a destroys its QP and says so; b's next WRITE must fail, not hang.
  if (is_a) {
    ASSERT_TRUE((*qp)->Close().ok());
    ASSERT_TRUE(side.Send("closed"));
    ASSERT_TRUE(side.Recv(&msg));  // b is done
    return;
  }
  ASSERT_TRUE(side.Recv(&msg));
  ASSERT_EQ(msg, "closed");
  Sge sge = (*region)->Slice(0, 4096);
  SendWr w{};
  w.wr_id = 3;
  w.opcode = WrOpcode::kRdmaWrite;
  w.flags = kSignaled;
  w.sg_list = &sge;
  w.num_sge = 1;
  w.remote_addr = theirs.addr;
  w.rkey = theirs.rkey;
  absl::Time start = absl::Now();
  ASSERT_TRUE((*qp)->PostSend({&w, 1}).ok());
  Completion c;
  ASSERT_TRUE(WaitOne(cq->get(), &c, absl::Seconds(120)))
      << "a WRITE to a destroyed QP on another host never completed";
  double secs = absl::ToDoubleSeconds(absl::Now() - start);
  // (retry_cnt + 1) * 4.096 us * 2^timeout: the nominal time to kRetryExceeded.
  double nominal = (cfg.retry_cnt + 1) * 4.096e-6 * static_cast<double>(1u << cfg.timeout);
  std::printf("cross-host: b: WRITE to the destroyed QP: %s after %.2f s (nominal %.2f s: "
              "retry_cnt %d, timeout %d)\n",
              WcStatusName(c.status), secs, nominal, cfg.retry_cnt, cfg.timeout);
  EXPECT_EQ(c.status, WcStatus::kRetryExceeded) << WcStatusName(c.status);
  EXPECT_LT(secs, 60.0);
  ASSERT_TRUE(side.Send("done"));
}

}  // namespace
}  // namespace verbs
}  // namespace msgr

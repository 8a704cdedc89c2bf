// One suite for every verbs provider ("soft", "ibverbs"): two RC QPs connected to each other,
// the data operations the RDMA transport relies on, and the errors it must see identically
// from both providers. The ibverbs instantiation skips without an RDMA device (run it inside
// the Soft-RoCE VM); MSGR_RDMA_DEVICE picks the device (default: the first).
#include "msg/rdma/verbs/device.h"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "msg/rdma/verbs/ibverbs/provider.h"

namespace msgr {
namespace verbs {
namespace {

constexpr absl::Duration kWait = absl::Seconds(5);
constexpr size_t kMiB = 1 << 20;

std::string DeviceNameFor(const std::string& provider) {
  if (provider == "soft") return "soft";
  const char* env = std::getenv("MSGR_RDMA_DEVICE");
  return env != nullptr && *env != '\0' ? env : "ibverbs";
}

void Fill(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 131 + seed * 7 + (i >> 12)) & 0xff);
}

bool AllZero(const uint8_t* p, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != 0) return false;
  }
  return true;
}

// Waits for exactly one completion on `cq` (fails the test on timeout).
Completion WaitOne(CompletionQueue* cq) {
  Completion c;
  absl::Time deadline = absl::Now() + kWait;
  while (absl::Now() < deadline) {
    absl::StatusOr<int> n = cq->WaitForCompletion(&c, 1, absl::Milliseconds(200));
    EXPECT_TRUE(n.ok()) << n.status();
    if (!n.ok() || *n == 1) return c;
  }
  ADD_FAILURE() << "no completion within " << kWait;
  c.status = WcStatus::kGeneralError;
  c.wr_id = ~uint64_t{0};
  return c;
}

// A signalled `op` of the one SGE `*sge` to `dst` at `offset`.
SendWr SignaledWr(uint64_t wr_id, WrOpcode op, const Sge* sge, const MemoryRegion& dst,
                  uint64_t offset = 0) {
  SendWr wr;
  wr.wr_id = wr_id;
  wr.opcode = op;
  wr.flags = kSignaled;
  wr.sg_list = sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<uint64_t>(dst.addr()) + offset;
  wr.rkey = dst.rkey();
  return wr;
}

struct Side {
  std::unique_ptr<CompletionQueue> scq;
  std::unique_ptr<CompletionQueue> rcq;
  std::unique_ptr<QueuePair> qp;
};

class DeviceTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "ibverbs" && ListIbverbsDevices().empty()) {
      GTEST_SKIP() << "no RDMA device: ibv_get_device_list found none (run the ibverbs suite "
                      "inside the Soft-RoCE VM, tools/rxe_vm.sh)";
    }
    auto dev = OpenDevice(DeviceNameFor(GetParam()));
    ASSERT_TRUE(dev.ok()) << dev.status();
    dev_ = std::move(*dev);
    auto pd = dev_->CreatePd();
    ASSERT_TRUE(pd.ok()) << pd.status();
    pd_ = std::move(*pd);
    MakeSide(&a_);
    MakeSide(&b_);
    ASSERT_TRUE(a_.qp->Connect(b_.qp->local_endpoint()).ok());
    ASSERT_TRUE(b_.qp->Connect(a_.qp->local_endpoint()).ok());
    ASSERT_EQ(a_.qp->state(), QpState::kRts);
  }

  void MakeSide(Side* s) {
    auto scq = dev_->CreateCq(256);
    auto rcq = dev_->CreateCq(256);
    ASSERT_TRUE(scq.ok() && rcq.ok());
    s->scq = std::move(*scq);
    s->rcq = std::move(*rcq);
    QpConfig cfg;
    cfg.send_cq = s->scq.get();
    cfg.recv_cq = s->rcq.get();
    auto qp = pd_->CreateQp(cfg);
    ASSERT_TRUE(qp.ok()) << qp.status();
    s->qp = std::move(*qp);
    EXPECT_EQ(s->qp->state(), QpState::kInit);
  }

  std::unique_ptr<MemoryRegion> Alloc(size_t bytes, uint32_t access) {
    auto mr = pd_->AllocRegion(bytes, access);
    EXPECT_TRUE(mr.ok()) << mr.status();
    return mr.ok() ? std::move(*mr) : nullptr;
  }

  absl::Status PostOne(QueuePair* qp, const SendWr& wr) { return qp->PostSend({&wr, 1}); }

  // True on Soft-RoCE: rxe differs from the IB spec (and from ConnectX and "soft") in a few
  // documented completion statuses; the tests accept exactly those variants there only.
  bool OnRxe() const { return dev_->attr().name.rfind("rxe", 0) == 0; }

  // Posts a bad `op` (WRITE or READ) followed by a good one in one chain, then one more, and
  // checks: REMOTE_ACCESS_ERROR, then FLUSH for the rest, QP in ERROR, target unchanged.
  void ExpectRemoteAccessError(uint32_t rkey, uint64_t remote_addr, uint32_t len,
                               const MemoryRegion& target, WrOpcode op = WrOpcode::kRdmaWrite) {
    auto src = Alloc(64 * 1024, kLocalWrite);
    ASSERT_NE(src, nullptr);
    Fill(src->data(), src->length(), 9);
    std::vector<uint8_t> before(target.data(), target.data() + target.length());
    Sge bad_sge = src->Slice(0, len);
    Sge good_sge = src->Slice(0, 64);
    SendWr chain[2];
    chain[0].wr_id = 1;
    chain[0].opcode = op;
    chain[0].flags = kSignaled;
    chain[0].sg_list = &bad_sge;
    chain[0].num_sge = 1;
    chain[0].remote_addr = remote_addr;
    chain[0].rkey = rkey;
    chain[1] = chain[0];
    chain[1].wr_id = 2;
    chain[1].sg_list = &good_sge;
    chain[1].remote_addr = reinterpret_cast<uint64_t>(target.addr());
    chain[1].rkey = target.rkey();
    ASSERT_TRUE(a_.qp->PostSend(chain).ok());
    Completion c1 = WaitOne(a_.scq.get());
    EXPECT_EQ(c1.wr_id, 1u);
    EXPECT_EQ(c1.status, WcStatus::kRemoteAccessError) << WcStatusName(c1.status);
    Completion c2 = WaitOne(a_.scq.get());
    EXPECT_EQ(c2.wr_id, 2u);
    EXPECT_EQ(c2.status, WcStatus::kWrFlushError) << WcStatusName(c2.status);
    EXPECT_EQ(a_.qp->state(), QpState::kError);
    // Posting after the error is accepted and flushed.
    chain[1].wr_id = 3;
    ASSERT_TRUE(PostOne(a_.qp.get(), chain[1]).ok());
    Completion c3 = WaitOne(a_.scq.get());
    EXPECT_EQ(c3.wr_id, 3u);
    EXPECT_EQ(c3.status, WcStatus::kWrFlushError) << WcStatusName(c3.status);
    EXPECT_EQ(std::memcmp(before.data(), target.data(), before.size()), 0)
        << "target memory changed by a failed or flushed WRITE";
  }

  // Posts one `op` (SEND or WRITE_WITH_IMM) from a to b, which has no receive posted.
  void ExpectRnr(WrOpcode op) {
    auto src = Alloc(4096, kLocalWrite);
    auto dst = Alloc(4096, kLocalWrite | kRemoteWrite);
    ASSERT_TRUE(src && dst);
    Sge sge = src->Slice(0, 64);
    ASSERT_TRUE(PostOne(a_.qp.get(), SignaledWr(5, op, &sge, *dst)).ok());
    Completion c = WaitOne(a_.scq.get());
    EXPECT_EQ(c.wr_id, 5u);
    EXPECT_EQ(c.status, WcStatus::kRnrRetryExceeded) << WcStatusName(c.status);
    EXPECT_EQ(a_.qp->state(), QpState::kError);
  }

  std::unique_ptr<Device> dev_;
  std::unique_ptr<ProtectionDomain> pd_;
  Side a_;
  Side b_;
};

TEST_P(DeviceTest, SendRecv) {
  auto src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(4096, kLocalWrite);
  ASSERT_TRUE(src && dst);
  std::memcpy(src->data(), "hello, verbs", 12);
  Fill(src->data() + 12, 300, 1);
  Sge rsge = dst->Slice(0, 4096);
  RecvWr rwr[2] = {{11, &rsge, 1}, {12, &rsge, 1}};
  ASSERT_TRUE(b_.qp->PostRecv(rwr).ok());

  Sge ssge = src->Slice(0, 312);
  SendWr wr;
  wr.wr_id = 7;
  wr.opcode = WrOpcode::kSend;
  wr.flags = kSignaled;
  wr.sg_list = &ssge;
  wr.num_sge = 1;
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  Completion sc = WaitOne(a_.scq.get());
  EXPECT_EQ(sc.status, WcStatus::kSuccess) << WcStatusName(sc.status);
  EXPECT_EQ(sc.opcode, WcOpcode::kSend);
  EXPECT_EQ(sc.wr_id, 7u);
  Completion rc = WaitOne(b_.rcq.get());
  EXPECT_EQ(rc.status, WcStatus::kSuccess) << WcStatusName(rc.status);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecv);
  EXPECT_EQ(rc.wr_id, 11u);
  EXPECT_EQ(rc.byte_len, 312u);
  EXPECT_FALSE(rc.has_imm);
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), 312), 0);

  // SEND_WITH_IMM, inline.
  wr.opcode = WrOpcode::kSendWithImm;
  wr.flags = kSignaled | kInline;
  wr.imm_data = 0x01020304;
  ssge.length = 16;
  ASSERT_LE(16u, a_.qp->max_inline_data());
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  EXPECT_EQ(WaitOne(a_.scq.get()).status, WcStatus::kSuccess);
  rc = WaitOne(b_.rcq.get());
  EXPECT_EQ(rc.status, WcStatus::kSuccess);
  EXPECT_EQ(rc.wr_id, 12u);
  EXPECT_EQ(rc.byte_len, 16u);
  EXPECT_TRUE(rc.has_imm);
  EXPECT_EQ(rc.imm_data, 0x01020304u);
}

TEST_P(DeviceTest, RdmaWrite1MiBByteForByte) {
  auto src = Alloc(kMiB, kLocalWrite);
  auto dst = Alloc(kMiB, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  Fill(src->data(), kMiB, 3);
  ASSERT_TRUE(AllZero(dst->data(), kMiB));
  Sge sge = src->Slice(0, kMiB);
  ASSERT_TRUE(PostOne(a_.qp.get(), SignaledWr(1, WrOpcode::kRdmaWrite, &sge, *dst)).ok());
  Completion c = WaitOne(a_.scq.get());
  EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaWrite);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), kMiB), 0);
  // No receive completion for a plain WRITE.
  Completion none;
  EXPECT_EQ(b_.rcq->Poll(&none, 1), 0);
}

// Registration makes the memory resident, as ibv_reg_mr pins it: the data path must not
// take one page fault per page of a fresh ring (soft: MAP_POPULATE of its memfd).
TEST_P(DeviceTest, AllocatedRegionIsResidentAfterRegistration) {
  constexpr size_t kBytes = 8 * kMiB;
  auto mr = Alloc(kBytes, kLocalWrite | kRemoteWrite);
  ASSERT_NE(mr, nullptr);
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((kBytes + page - 1) / page);
  ASSERT_EQ(::mincore(mr->data(), kBytes, resident.data()), 0) << std::strerror(errno);
  const size_t in_core = static_cast<size_t>(
      std::count_if(resident.begin(), resident.end(), [](unsigned char v) { return v & 1; }));
  EXPECT_EQ(in_core, resident.size()) << "pages of a just-registered region not resident";
}

TEST_P(DeviceTest, RdmaReadBack) {
  auto remote = Alloc(64 * 1024, kLocalWrite | kRemoteRead);
  auto local = Alloc(64 * 1024, kLocalWrite);
  ASSERT_TRUE(remote && local);
  Fill(remote->data(), remote->length(), 5);
  Sge sge = local->Slice(0, 64 * 1024);
  SendWr wr;
  wr.wr_id = 4;
  wr.opcode = WrOpcode::kRdmaRead;
  wr.flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<uint64_t>(remote->addr());
  wr.rkey = remote->rkey();
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  Completion c = WaitOne(a_.scq.get());
  EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  EXPECT_EQ(c.opcode, WcOpcode::kRdmaRead);
  EXPECT_EQ(std::memcmp(local->data(), remote->data(), 64 * 1024), 0);
}

TEST_P(DeviceTest, WriteWithImm) {
  auto src = Alloc(8192, kLocalWrite);
  auto dst = Alloc(8192, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  Fill(src->data(), 8192, 4);
  RecvWr rwr{21, nullptr, 0};
  ASSERT_TRUE(b_.qp->PostRecv({&rwr, 1}).ok());
  Sge sge = src->Slice(100, 5000);
  SendWr wr = SignaledWr(2, WrOpcode::kRdmaWriteWithImm, &sge, *dst, 1000);
  wr.imm_data = 0xdeadbeef;
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  Completion rc = WaitOne(b_.rcq.get());
  EXPECT_EQ(rc.status, WcStatus::kSuccess) << WcStatusName(rc.status);
  EXPECT_EQ(rc.opcode, WcOpcode::kRecvRdmaWithImm);
  EXPECT_EQ(rc.wr_id, 21u);
  EXPECT_TRUE(rc.has_imm);
  EXPECT_EQ(rc.imm_data, 0xdeadbeefu);
  EXPECT_EQ(rc.byte_len, 5000u);
  // The data is in place when the notification is seen.
  EXPECT_EQ(std::memcmp(dst->data() + 1000, src->data() + 100, 5000), 0);
  EXPECT_TRUE(AllZero(dst->data(), 1000));
  EXPECT_TRUE(AllZero(dst->data() + 6000, 8192 - 6000));
  Completion sc = WaitOne(a_.scq.get());
  EXPECT_EQ(sc.status, WcStatus::kSuccess);
  EXPECT_EQ(sc.opcode, WcOpcode::kRdmaWrite);
}

TEST_P(DeviceTest, ChainWithOnlyLastSignaled) {
  constexpr int kWrs = 8;
  constexpr uint32_t kChunk = 4096;
  auto src = Alloc(kWrs * kChunk, kLocalWrite);
  auto dst = Alloc(kWrs * kChunk, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  Fill(src->data(), src->length(), 6);
  Sge sges[kWrs][2];
  SendWr chain[kWrs];
  for (int i = 0; i < kWrs; ++i) {
    // Two SGEs per WR: a gather list.
    sges[i][0] = src->Slice(i * kChunk, kChunk / 2);
    sges[i][1] = src->Slice(i * kChunk + kChunk / 2, kChunk / 2);
    chain[i].wr_id = 100 + i;
    chain[i].opcode = WrOpcode::kRdmaWrite;
    chain[i].flags = i == kWrs - 1 ? uint32_t{kSignaled} : 0u;
    chain[i].sg_list = sges[i];
    chain[i].num_sge = 2;
    chain[i].remote_addr = reinterpret_cast<uint64_t>(dst->addr()) + i * kChunk;
    chain[i].rkey = dst->rkey();
  }
  size_t posted = 0;
  ASSERT_TRUE(a_.qp->PostSend(chain, &posted).ok());
  EXPECT_EQ(posted, static_cast<size_t>(kWrs));
  Completion c = WaitOne(a_.scq.get());
  EXPECT_EQ(c.status, WcStatus::kSuccess);
  EXPECT_EQ(c.wr_id, 100u + kWrs - 1);
  absl::SleepFor(absl::Milliseconds(20));
  Completion extra[4];
  EXPECT_EQ(a_.scq->Poll(extra, 4), 0) << "unsignalled WRs must not complete";
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), kWrs * kChunk), 0);
}

TEST_P(DeviceTest, WritesBecomeVisibleInOrder) {
  // Per round: kBufs data writes, then an 8-byte flag write of the round number. An observer
  // that sees flag == r must see the data of rounds 1..r complete.
  constexpr int kRounds = 16;
  constexpr int kBufs = 8;
  constexpr uint32_t kBuf = 8192;
  constexpr size_t kData = size_t{kRounds} * kBufs * kBuf;
  auto src = Alloc(kData, kLocalWrite);
  auto flag_src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(kData + 4096, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && flag_src && dst);
  Fill(src->data(), kData, 8);
  for (size_t i = 0; i < kData; i += 4096) src->data()[i] |= 1;  // No all-zero page.
  auto* flag = reinterpret_cast<std::atomic<uint64_t>*>(dst->data() + kData);
  std::atomic<bool> stop{false};
  std::atomic<bool> started{false};
  std::atomic<int> violations{0};
  std::atomic<int> checks{0};
  std::thread observer([&] {
    uint64_t seen = 0;
    started.store(true);
    while (!stop.load() && seen < kRounds) {
      uint64_t f = flag->load(std::memory_order_acquire);
      if (f == seen) continue;
      seen = f;
      for (uint64_t r = 0; r < f; ++r) {
        size_t off = r * kBufs * kBuf;
        if (std::memcmp(dst->data() + off, src->data() + off, kBufs * kBuf) != 0) ++violations;
      }
      ++checks;
    }
  });
  while (!started.load()) std::this_thread::yield();  // Observe while the writes happen.
  for (int r = 1; r <= kRounds; ++r) {
    Sge sges[kBufs + 1];
    SendWr chain[kBufs + 1];
    for (int i = 0; i < kBufs; ++i) {
      size_t off = (size_t(r - 1) * kBufs + i) * kBuf;
      sges[i] = src->Slice(off, kBuf);
      chain[i].wr_id = r * 100 + i;
      chain[i].opcode = WrOpcode::kRdmaWrite;
      chain[i].sg_list = &sges[i];
      chain[i].num_sge = 1;
      chain[i].remote_addr = reinterpret_cast<uint64_t>(dst->addr()) + off;
      chain[i].rkey = dst->rkey();
    }
    *reinterpret_cast<uint64_t*>(flag_src->data() + 8 * r) = static_cast<uint64_t>(r);
    sges[kBufs] = flag_src->Slice(8 * r, 8);
    chain[kBufs] = chain[0];
    chain[kBufs].wr_id = r * 100 + kBufs;
    chain[kBufs].flags = kSignaled;
    chain[kBufs].sg_list = &sges[kBufs];
    chain[kBufs].remote_addr = reinterpret_cast<uint64_t>(dst->addr()) + kData;
    ASSERT_TRUE(a_.qp->PostSend(chain).ok());
    Completion c = WaitOne(a_.scq.get());
    ASSERT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  }
  absl::Time deadline = absl::Now() + kWait;
  while (checks.load() == 0 || flag->load() != kRounds) {
    if (absl::Now() > deadline) break;
    absl::SleepFor(absl::Milliseconds(1));
  }
  stop.store(true);  // Only matters if the flag never arrives.
  observer.join();
  EXPECT_EQ(flag->load(), static_cast<uint64_t>(kRounds));
  EXPECT_GT(checks.load(), 0);
  EXPECT_EQ(violations.load(), 0) << "flag seen before the data written ahead of it";
}

TEST_P(DeviceTest, WrongRkeyIsRemoteAccessError) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(dst);
  ExpectRemoteAccessError(dst->rkey() ^ 0x00a5a500, reinterpret_cast<uint64_t>(dst->addr()),
                          4096, *dst);
}

TEST_P(DeviceTest, OutOfBoundsIsRemoteAccessError) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(dst);
  // Starts inside, ends 96 bytes past the end.
  ExpectRemoteAccessError(dst->rkey(), reinterpret_cast<uint64_t>(dst->addr()) + 64 * 1024 - 32,
                          128, *dst);
}

TEST_P(DeviceTest, RegionWithoutRemoteWriteIsRemoteAccessError) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteRead);
  ASSERT_TRUE(dst);
  ExpectRemoteAccessError(dst->rkey(), reinterpret_cast<uint64_t>(dst->addr()), 4096, *dst);
}

TEST_P(DeviceTest, DeregisteredRegionIsRemoteAccessError) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  auto src = Alloc(4096, kLocalWrite);
  ASSERT_TRUE(dst && src);
  // A first write succeeds (and lets the soft provider cache the peer's mapping).
  Fill(src->data(), 4096, 2);
  Sge sge = src->Slice(0, 4096);
  SendWr wr = SignaledWr(0, WrOpcode::kRdmaWrite, &sge, *dst);
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  ASSERT_EQ(WaitOne(a_.scq.get()).status, WcStatus::kSuccess);
  const uint32_t old_rkey = dst->rkey();
  ASSERT_TRUE(dst->Deregister().ok());
  ASSERT_TRUE(dst->Deregister().ok());  // Idempotent.
  EXPECT_FALSE(dst->registered());
  // A new region must not inherit the old key.
  auto other = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(other);
  EXPECT_NE(other->rkey(), old_rkey);
  ExpectRemoteAccessError(old_rkey, reinterpret_cast<uint64_t>(dst->addr()), 4096, *dst);
}

TEST_P(DeviceTest, ReregisteredRegionKeepsDataAndKillsOldKey) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  auto src = Alloc(8192, kLocalWrite);
  ASSERT_TRUE(dst && src);
  Fill(src->data(), 8192, 5);
  auto write = [&](uint32_t rkey, size_t src_off, size_t dst_off) {
    Sge sge = src->Slice(src_off, 4096);
    SendWr wr;
    wr.opcode = WrOpcode::kRdmaWrite;
    wr.flags = kSignaled;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.remote_addr = reinterpret_cast<uint64_t>(dst->addr()) + dst_off;
    wr.rkey = rkey;
    EXPECT_TRUE(PostOne(a_.qp.get(), wr).ok());
    return WaitOne(a_.scq.get()).status;
  };
  ASSERT_EQ(write(dst->rkey(), 0, 0), WcStatus::kSuccess);
  const uint32_t old_rkey = dst->rkey();
  ASSERT_TRUE(dst->Reregister().ok());
  EXPECT_TRUE(dst->registered());
  EXPECT_NE(dst->rkey(), old_rkey);
  EXPECT_EQ(std::memcmp(dst->data(), src->data(), 4096), 0) << "contents survive";
  ASSERT_EQ(write(dst->rkey(), 4096, 4096), WcStatus::kSuccess) << "the new key works";
  EXPECT_EQ(std::memcmp(dst->data() + 4096, src->data() + 4096, 4096), 0);
  ExpectRemoteAccessError(old_rkey, reinterpret_cast<uint64_t>(dst->addr()), 4096, *dst);
}

// A SEND or a WRITE_WITH_IMM needs a posted receive at the target: without one it fails
// (RNR, no retries) and the QP enters ERROR. (The soft provider completes a WRITE_WITH_IMM
// through the peer's shared receive queue, not through the peer's service thread.)
TEST_P(DeviceTest, SendWithoutPostedReceiveFails) { ExpectRnr(WrOpcode::kSend); }

TEST_P(DeviceTest, WriteWithImmWithoutPostedReceiveFails) {
  ExpectRnr(WrOpcode::kRdmaWriteWithImm);
}

// SENDs and WRITE_WITH_IMMs of one QP consume the peer's receives in the order posted,
// whatever path each takes to the peer; a chain of them, alternating.
TEST_P(DeviceTest, SendsAndWriteWithImmsTakeReceivesInPostOrder) {
  constexpr int kOps = 64;
  auto src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(4096, kLocalWrite | kRemoteWrite);
  auto rbuf = Alloc(kOps * 64, kLocalWrite);
  ASSERT_TRUE(src && dst && rbuf);
  std::vector<Sge> rsge(kOps);
  std::vector<RecvWr> rwr(kOps);
  for (int i = 0; i < kOps; ++i) {
    rsge[i] = rbuf->Slice(i * 64, 64);
    rwr[i] = RecvWr{static_cast<uint64_t>(100 + i), &rsge[i], 1};
  }
  ASSERT_TRUE(b_.qp->PostRecv(rwr).ok());
  std::vector<uint32_t> words(kOps);
  std::vector<Sge> sge(kOps);
  std::vector<SendWr> wr(kOps);
  for (int i = 0; i < kOps; ++i) {
    std::memcpy(src->data() + i * 4, &i, 4);
    sge[i] = src->Slice(i * 4, 4);
    // Runs of 1-3 SENDs then 1-3 WRITE_WITH_IMMs: IMMs right behind a SEND, and behind IMMs.
    const WrOpcode op =
        (i / 2 + i / 3) % 2 == 0 ? WrOpcode::kSend : WrOpcode::kRdmaWriteWithImm;
    wr[i] = SignaledWr(static_cast<uint64_t>(i), op, &sge[i], *dst, i * 4);
    wr[i].imm_data = static_cast<uint32_t>(i);
  }
  for (int i = 0; i < kOps; i += 8) {
    ASSERT_TRUE(a_.qp->PostSend(absl::MakeConstSpan(&wr[i], 8)).ok());
    for (int k = 0; k < 8; ++k) {
      Completion sc = WaitOne(a_.scq.get());
      ASSERT_EQ(sc.status, WcStatus::kSuccess) << WcStatusName(sc.status);
      EXPECT_EQ(sc.wr_id, static_cast<uint64_t>(i + k));
    }
  }
  for (int i = 0; i < kOps; ++i) {
    Completion rc = WaitOne(b_.rcq.get());
    ASSERT_EQ(rc.status, WcStatus::kSuccess) << WcStatusName(rc.status);
    EXPECT_EQ(rc.wr_id, static_cast<uint64_t>(100 + i)) << "receive " << i;
    if (wr[i].opcode == WrOpcode::kSend) {
      EXPECT_EQ(rc.opcode, WcOpcode::kRecv) << i;
      int got = -1;
      std::memcpy(&got, rbuf->data() + i * 64, 4);
      EXPECT_EQ(got, i);
    } else {
      EXPECT_EQ(rc.opcode, WcOpcode::kRecvRdmaWithImm) << i;
      EXPECT_EQ(rc.imm_data, static_cast<uint32_t>(i));
    }
  }
}

TEST_P(DeviceTest, LocalLengthErrorWhenReceiveTooSmall) {
  auto src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(4096, kLocalWrite);
  ASSERT_TRUE(src && dst);
  Sge rsge = dst->Slice(0, 16);
  RecvWr rwr{31, &rsge, 1};
  ASSERT_TRUE(b_.qp->PostRecv({&rwr, 1}).ok());
  Sge sge = src->Slice(0, 64);
  SendWr wr;
  wr.wr_id = 6;
  wr.opcode = WrOpcode::kSend;
  wr.flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  Completion rc = WaitOne(b_.rcq.get());
  EXPECT_EQ(rc.wr_id, 31u);
  // IB spec, ConnectX and soft: LOC_LEN_ERR at the receiver, and a NAK "invalid request"
  // that fails the SEND with REM_INV_REQ_ERR. rxe (Linux 6.1, measured in the VM): its
  // copy_data() returns -EINVAL, not -ENOSPC, for a receive WQE that is too short, so the
  // responder takes the "malformed WQE" path: LOC_QP_OP_ERR at the receiver and a NAK
  // "remote operational error" (REM_OP_ERR) at the sender. Either way both QPs fail.
  const bool rxe = OnRxe();
  EXPECT_EQ(rc.status, rxe ? WcStatus::kLocalQpOperationError : WcStatus::kLocalLengthError)
      << WcStatusName(rc.status);
  EXPECT_EQ(b_.qp->state(), QpState::kError);
  Completion sc = WaitOne(a_.scq.get());
  EXPECT_EQ(sc.wr_id, 6u);
  EXPECT_EQ(sc.status, rxe ? WcStatus::kRemoteOperationError : WcStatus::kRemoteInvalidRequest)
      << WcStatusName(sc.status);
  EXPECT_EQ(a_.qp->state(), QpState::kError);
}

TEST_P(DeviceTest, ModifyToErrorFlushesReceives) {
  auto dst = Alloc(4096, kLocalWrite);
  ASSERT_TRUE(dst);
  Sge rsge = dst->Slice(0, 4096);
  RecvWr rwr[3] = {{1, &rsge, 1}, {2, &rsge, 1}, {3, &rsge, 1}};
  ASSERT_TRUE(b_.qp->PostRecv(rwr).ok());
  ASSERT_TRUE(b_.qp->ModifyToError().ok());
  for (uint64_t id = 1; id <= 3; ++id) {
    Completion c = WaitOne(b_.rcq.get());
    EXPECT_EQ(c.wr_id, id);
    EXPECT_EQ(c.status, WcStatus::kWrFlushError);
  }
  EXPECT_EQ(b_.qp->state(), QpState::kError);
  EXPECT_TRUE(b_.qp->Close().ok());
  EXPECT_TRUE(b_.qp->Close().ok());  // Idempotent.
}

// The responder of a refused access: its QP enters ERROR (posted receives flush) and its
// owner gets kQpAccessError for that QP -- what lets a server tell a peer that wrote outside
// its memory from one that merely went away.
TEST_P(DeviceTest, RemoteAccessViolationRaisesQpAccessErrorOnTheTarget) {
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(dst);
  auto rbuf = Alloc(4096, kLocalWrite);
  ASSERT_TRUE(rbuf);
  Sge rsge = rbuf->Slice(0, 4096);
  RecvWr rwr{77, &rsge, 1};
  ASSERT_TRUE(b_.qp->PostRecv({&rwr, 1}).ok());
  AsyncEvent none[4];
  EXPECT_EQ(dev_->PollAsyncEvents(none, 4), 0) << "events before any error";

  ExpectRemoteAccessError(dst->rkey(), reinterpret_cast<uint64_t>(dst->addr()) + dst->length(),
                          64, *dst);
  Completion rc = WaitOne(b_.rcq.get());
  EXPECT_EQ(rc.wr_id, 77u);
  EXPECT_EQ(rc.status, WcStatus::kWrFlushError) << WcStatusName(rc.status);
  EXPECT_EQ(b_.qp->state(), QpState::kError);

  std::vector<AsyncEvent> events;
  const absl::Time deadline = absl::Now() + (OnRxe() ? absl::Seconds(1) : kWait);
  while (absl::Now() < deadline) {
    AsyncEvent ev[4];
    const int n = dev_->PollAsyncEvents(ev, 4);
    events.insert(events.end(), ev, ev + n);
    if (!events.empty()) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  if (events.empty() && OnRxe()) {
    // Linux rxe moves the responder to ERROR without the affiliated event that the IB spec
    // and ConnectX raise; the responder checks above are what holds there.
    std::printf("note: rxe raised no IBV_EVENT_QP_ACCESS_ERR (responder ERROR checked)\n");
    return;
  }
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(events[0].type, AsyncEventType::kQpAccessError) << AsyncEventName(events[0].type);
  EXPECT_EQ(events[0].qp_num, b_.qp->qp_num());
  EXPECT_EQ(dev_->PollAsyncEvents(none, 4), 0);
}

TEST_P(DeviceTest, ReadWithoutRemoteReadIsRemoteAccessError) {
  auto target = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(target);
  Fill(target->data(), target->length(), 12);
  ExpectRemoteAccessError(target->rkey(), reinterpret_cast<uint64_t>(target->addr()), 4096,
                          *target, WrOpcode::kRdmaRead);
}

// A WR whose local SGE is not covered by its lkey fails on the initiator (LOC_PROT_ERR),
// the QP goes to ERROR, and the peer's memory is not touched.
void ExpectLocalProtectionError(QueuePair* qp, CompletionQueue* cq, const Sge& sge,
                                WrOpcode op, const MemoryRegion& remote,
                                WcStatus expected = WcStatus::kLocalProtectionError) {
  std::vector<uint8_t> before(remote.data(), remote.data() + remote.length());
  SendWr wr;
  wr.wr_id = 41;
  wr.opcode = op;
  wr.flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.remote_addr = reinterpret_cast<uint64_t>(remote.addr());
  wr.rkey = remote.rkey();
  ASSERT_TRUE(qp->PostSend({&wr, 1}).ok());
  Completion c = WaitOne(cq);
  EXPECT_EQ(c.wr_id, 41u);
  EXPECT_EQ(c.status, expected) << WcStatusName(c.status);
  EXPECT_EQ(qp->state(), QpState::kError);
  EXPECT_EQ(std::memcmp(before.data(), remote.data(), before.size()), 0);
}

TEST_P(DeviceTest, LocalSgePastRegionEndIsLocalProtectionError) {
  // Two pages mapped, one registered: the SGE runs 96 bytes past the registered end into
  // memory the process may read but the lkey does not cover.
  auto src = Alloc(8192, kLocalWrite);
  ASSERT_TRUE(src);
  auto small = pd_->RegisterMemory(src->data(), 4096, kLocalWrite);
  ASSERT_TRUE(small.ok()) << small.status();
  auto dst = Alloc(8192, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(dst);
  Sge sge = (*small)->Slice(4096 - 32, 128);
  ExpectLocalProtectionError(a_.qp.get(), a_.scq.get(), sge, WrOpcode::kRdmaWrite, *dst);
}

TEST_P(DeviceTest, WrongLkeyIsLocalProtectionError) {
  auto src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(4096, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  Sge sge = src->Slice(0, 64);
  sge.lkey ^= 0x00a5a500;
  // ConnectX and soft: LOC_PROT_ERR. rxe (Linux 6.1 rxe_req.c, measured in the VM): an lkey
  // it cannot look up fails copy_data() with -EINVAL, which it reports as LOC_QP_OP_ERR
  // (only a range error, -EFAULT, becomes LOC_PROT_ERR there).
  ExpectLocalProtectionError(a_.qp.get(), a_.scq.get(), sge, WrOpcode::kRdmaWrite, *dst,
                             OnRxe() ? WcStatus::kLocalQpOperationError
                                     : WcStatus::kLocalProtectionError);
}

TEST_P(DeviceTest, ReadIntoRegionWithoutLocalWriteIsLocalProtectionError) {
  auto sink = Alloc(4096, 0);  // Local read only: the HCA may not write it.
  auto remote = Alloc(4096, kLocalWrite | kRemoteRead);
  ASSERT_TRUE(sink && remote);
  Fill(remote->data(), 4096, 13);
  ExpectLocalProtectionError(a_.qp.get(), a_.scq.get(), sink->Slice(0, 4096),
                             WrOpcode::kRdmaRead, *remote);
  EXPECT_TRUE(AllZero(sink->data(), 4096)) << "READ wrote into a region without kLocalWrite";
}

TEST_P(DeviceTest, MalformedWrsAreRejectedAtPostAndTheQpKeepsWorking) {
  auto src = Alloc(64 * 1024, kLocalWrite);
  auto dst = Alloc(64 * 1024, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  Fill(src->data(), src->length(), 14);
  Sge good_sge = src->Slice(0, 4096);
  SendWr good;
  good.wr_id = 51;
  good.opcode = WrOpcode::kRdmaWrite;
  good.flags = kSignaled;
  good.sg_list = &good_sge;
  good.num_sge = 1;
  good.remote_addr = reinterpret_cast<uint64_t>(dst->addr());
  good.rkey = dst->rkey();

  // More SGEs than the QP was created with (QpConfig default: 4).
  std::vector<Sge> many;
  for (int i = 0; i < 5; ++i) many.push_back(src->Slice(i * 64, 64));
  SendWr too_many = good;
  too_many.wr_id = 52;
  too_many.sg_list = many.data();
  too_many.num_sge = static_cast<uint32_t>(many.size());
  // An inline payload one byte above what the QP reports.
  Sge big_sge = src->Slice(0, a_.qp->max_inline_data() + 1);
  SendWr too_big = good;
  too_big.wr_id = 53;
  too_big.flags = kSignaled | kInline;
  too_big.sg_list = &big_sge;
  // Inline is meaningless for READ.
  SendWr inline_read = good;
  inline_read.wr_id = 54;
  inline_read.opcode = WrOpcode::kRdmaRead;
  inline_read.flags = kSignaled | kInline;

  for (const SendWr& bad : {too_many, too_big, inline_read}) {
    SCOPED_TRACE(bad.wr_id);
    size_t posted = 99;
    absl::Status st = a_.qp->PostSend({&bad, 1}, &posted);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_EQ(posted, 0u);
    // A chain stops at the bad WR: the WRs before it are posted, none after.
    SendWr chain[3] = {good, bad, good};
    st = a_.qp->PostSend(chain, &posted);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_EQ(posted, 1u);
    Completion c = WaitOne(a_.scq.get());
    EXPECT_EQ(c.wr_id, 51u);
    EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
    EXPECT_EQ(a_.qp->state(), QpState::kRts);
  }
  Completion none[2];
  EXPECT_EQ(a_.scq->Poll(none, 2), 0);
  EXPECT_EQ(std::memcmp(src->data(), dst->data(), 4096), 0);
}

TEST_P(DeviceTest, QpBeyondDeviceLimitsIsRefused) {
  QpConfig cfg;
  cfg.send_cq = a_.scq.get();
  cfg.recv_cq = a_.rcq.get();
  cfg.max_send_sge = dev_->attr().max_sge + 1;
  auto qp = pd_->CreateQp(cfg);
  EXPECT_FALSE(qp.ok());
  EXPECT_EQ(qp.status().code(), absl::StatusCode::kInvalidArgument) << qp.status();
}

TEST_P(DeviceTest, WriteToClosedPeerFails) {
  auto src = Alloc(4096, kLocalWrite);
  auto dst = Alloc(4096, kLocalWrite | kRemoteWrite);
  ASSERT_TRUE(src && dst);
  ASSERT_TRUE(b_.qp->Close().ok());
  Sge sge = src->Slice(0, 64);
  SendWr wr = SignaledWr(61, WrOpcode::kRdmaWrite, &sge, *dst);
  ASSERT_TRUE(PostOne(a_.qp.get(), wr).ok());
  // ibverbs: nobody answers, so after retry_cnt timeouts (QpConfig: 6 x ~67 ms) the WR
  // fails with RETRY_EXC_ERR. soft sees the peer's socket close first (device.h, Close())
  // and may already have moved the QP to ERROR, so the WR is flushed.
  Completion c = WaitOne(a_.scq.get());
  EXPECT_EQ(c.wr_id, 61u);
  if (GetParam() == "soft") {
    EXPECT_TRUE(c.status == WcStatus::kRetryExceeded || c.status == WcStatus::kWrFlushError)
        << WcStatusName(c.status);
  } else {
    EXPECT_EQ(c.status, WcStatus::kRetryExceeded) << WcStatusName(c.status);
  }
  EXPECT_EQ(a_.qp->state(), QpState::kError);
  EXPECT_TRUE(AllZero(dst->data(), 4096));
}

TEST_P(DeviceTest, PortAddressing) {
  const PortAttr& port = dev_->port();
  if (GetParam() == "soft") {
    EXPECT_FALSE(port.ethernet);
    return;
  }
  if (!port.ethernet) {
    EXPECT_NE(port.lid, 0) << "InfiniBand port without a LID";
    return;
  }
  // RoCE: the GID in use is RoCE v2 and, when none was forced, IPv4-mapped if one exists
  // (in the VM: index 1, ::ffff:127.0.0.1, whether forced by MSGR_RDMA_GID_INDEX or not).
  static const uint8_t kV4Mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  const char* forced = std::getenv("MSGR_RDMA_GID_INDEX");
  std::string saved = forced != nullptr ? forced : "";
  ::unsetenv("MSGR_RDMA_GID_INDEX");
  auto auto_dev = OpenDevice(DeviceNameFor(GetParam()));
  if (forced != nullptr) ::setenv("MSGR_RDMA_GID_INDEX", saved.c_str(), 1);
  ASSERT_TRUE(auto_dev.ok()) << auto_dev.status();
  const PortAttr& auto_port = (*auto_dev)->port();
  if (std::getenv("MSGR_IN_RXE_VM") != nullptr) {
    EXPECT_EQ(auto_port.gid_index, 1);
    EXPECT_EQ(port.gid_index, 1);
  }
  EXPECT_EQ(std::memcmp(auto_port.gid.data(), kV4Mapped, sizeof(kV4Mapped)), 0);
  DeviceOptions bad;
  bad.gid_index = 100000;
  EXPECT_FALSE(OpenDevice(DeviceNameFor(GetParam()), bad).ok());
}

// A soft device on another host (or network namespace) cannot be reached: its abstract
// socket is not in ours. The QP says so and what to use instead, at once, rather than
// failing the connect with ECONNREFUSED or waiting for a timeout.
TEST_P(DeviceTest, SoftPeerOnAnotherHostIsRefusedWithWhatToUse) {
  if (GetParam() != "soft") GTEST_SKIP() << "the soft provider's host scope only";
  Side c;
  MakeSide(&c);
  QpEndpoint remote = a_.qp->local_endpoint();
  const std::string& loc = remote.locator;  // msgr-soft.<scope>.<pid>.<n>.<rand>
  const size_t dot = loc.find('.');
  ASSERT_NE(dot, std::string::npos) << loc;
  remote.locator = loc.substr(0, dot + 1) + "00000000-1" + loc.substr(loc.find('.', dot + 1));
  absl::Status st = c.qp->Connect(remote);
  EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << st;
  EXPECT_NE(st.message().find("only between processes of one host"), std::string::npos) << st;
  EXPECT_NE(st.message().find("--rdma-device IBDEV"), std::string::npos) << st;
  EXPECT_EQ(c.qp->state(), QpState::kInit);
}

INSTANTIATE_TEST_SUITE_P(Providers, DeviceTest, ::testing::Values("soft", "ibverbs"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

// ---------------------------------------------------------------------------------------
TEST(QpEndpointTest, SerializeParseRoundTrip) {
  QpEndpoint ep;
  ep.qp_num = 0x123456;
  ep.psn = 0xabcdef;
  for (int i = 0; i < 16; ++i) ep.gid[i] = static_cast<uint8_t>(i * 17);
  ep.lid = 0x1234;
  ep.mtu = 4096;
  ep.locator = "msgr-soft.1.2.deadbeef";
  auto back = QpEndpoint::Parse(ep.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->qp_num, ep.qp_num);
  EXPECT_EQ(back->psn, ep.psn);
  EXPECT_EQ(back->gid, ep.gid);
  EXPECT_EQ(back->lid, ep.lid);
  EXPECT_EQ(back->mtu, ep.mtu);
  EXPECT_EQ(back->locator, ep.locator);
  std::string s = ep.Serialize();
  EXPECT_FALSE(QpEndpoint::Parse(s.substr(0, s.size() - 1)).ok());
  EXPECT_FALSE(QpEndpoint::Parse("garbage").ok());
}

// The ibverbs provider must call libibverbs' current ABI. Checked on any host, device or
// not: a provider .so with unversioned references binds the IBVERBS_1.0 compat symbols.
TEST(IbverbsLinkTest, ProviderBindsCurrentLibibverbsAbi) {
  void* current = ::dlvsym(RTLD_DEFAULT, "ibv_open_device", "IBVERBS_1.1");
  ASSERT_NE(current, nullptr) << "libibverbs without IBVERBS_1.1?";
  EXPECT_EQ(ibverbs::BoundIbvOpenDevice(), current)
      << "the ibverbs provider is bound to the IBVERBS_1.0 compat ABI: it must be linked "
         "into the binary (linkstatic), not as a .so without -libverbs";
}

TEST(SoftDeviceTest, RemoteAccessNeedsAllocatedRegion) {
  auto dev = OpenDevice("soft");
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto pd = (*dev)->CreatePd();
  ASSERT_TRUE(pd.ok());
  std::vector<uint8_t> buf(4096);
  auto bad = (*pd)->RegisterMemory(buf.data(), buf.size(), kLocalWrite | kRemoteWrite);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  auto ok = (*pd)->RegisterMemory(buf.data(), buf.size(), kLocalWrite);
  EXPECT_TRUE(ok.ok()) << ok.status();
}

// ---------------------------------------------------------------------------------------
// Cross-process: the soft provider's shared-memory path for real, and peer death.

bool WriteAll(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    ssize_t w = ::write(fd, c, n);
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool ReadAll(int fd, void* p, size_t n) {
  char* c = static_cast<char*>(p);
  while (n > 0) {
    ssize_t r = ::read(fd, c, n);
    if (r <= 0) return false;
    c += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

bool SendBlob(int fd, const std::string& s) {
  uint32_t n = static_cast<uint32_t>(s.size());
  return WriteAll(fd, &n, 4) && WriteAll(fd, s.data(), n);
}

bool RecvBlob(int fd, std::string* s) {
  uint32_t n;
  if (!ReadAll(fd, &n, 4) || n > 4096) return false;
  s->resize(n);
  return ReadAll(fd, &(*s)[0], n);
}

struct RemoteRegion {
  uint64_t addr;
  uint32_t rkey;
};

// The child: a target that exposes 1 MiB, waits for a WRITE_WITH_IMM, checks every byte,
// reports, then dies without cleaning up. Returns its exit code.
int RunTargetChild(int in, int out) {
  auto dev = OpenDevice("soft");
  if (!dev.ok()) return 10;
  auto pd = (*dev)->CreatePd();
  auto scq = (*dev)->CreateCq(16);
  auto rcq = (*dev)->CreateCq(16);
  if (!pd.ok() || !scq.ok() || !rcq.ok()) return 11;
  QpConfig cfg;
  cfg.send_cq = scq->get();
  cfg.recv_cq = rcq->get();
  auto qp = (*pd)->CreateQp(cfg);
  auto mr = (*pd)->AllocRegion(kMiB, kLocalWrite | kRemoteWrite);
  if (!qp.ok() || !mr.ok()) return 12;
  RecvWr rwr{77, nullptr, 0};
  if (!(*qp)->PostRecv({&rwr, 1}).ok()) return 13;
  RemoteRegion rr{reinterpret_cast<uint64_t>((*mr)->addr()), (*mr)->rkey()};
  if (!SendBlob(out, (*qp)->local_endpoint().Serialize()) || !WriteAll(out, &rr, sizeof(rr))) {
    return 14;
  }
  std::string peer;
  if (!RecvBlob(in, &peer)) return 15;
  auto ep = QpEndpoint::Parse(peer);
  if (!ep.ok() || !(*qp)->Connect(*ep).ok()) return 16;
  Completion c;
  auto n = (*rcq)->WaitForCompletion(&c, 1, absl::Seconds(10));
  if (!n.ok() || *n != 1) return 17;
  if (c.status != WcStatus::kSuccess || c.opcode != WcOpcode::kRecvRdmaWithImm ||
      c.imm_data != 0x5eed || c.byte_len != kMiB) {
    return 18;
  }
  std::vector<uint8_t> expect(kMiB);
  Fill(expect.data(), kMiB, 42);
  uint8_t verdict = std::memcmp(expect.data(), (*mr)->data(), kMiB) == 0 ? 0 : 1;
  if (!WriteAll(out, &verdict, 1)) return 19;
  uint8_t go;
  ReadAll(in, &go, 1);  // The parent says when to die.
  return verdict;        // _exit() without destructors: the parent must see the QP fail.
}

TEST(SoftDeviceTest, CrossProcessWriteWithImmAndPeerDeath) {
  int to_child[2], to_parent[2];
  ASSERT_EQ(::pipe(to_child), 0);
  ASSERT_EQ(::pipe(to_parent), 0);
  pid_t pid = ::fork();  // Before this process starts any device thread.
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    ::close(to_child[1]);
    ::close(to_parent[0]);
    ::_exit(RunTargetChild(to_child[0], to_parent[1]));
  }
  ::close(to_child[0]);
  ::close(to_parent[1]);
  int in = to_parent[0], out = to_child[1];

  auto dev = OpenDevice("soft");
  ASSERT_TRUE(dev.ok()) << dev.status();
  auto pd = (*dev)->CreatePd();
  auto scq = (*dev)->CreateCq(16);
  auto rcq = (*dev)->CreateCq(16);
  ASSERT_TRUE(pd.ok() && scq.ok() && rcq.ok());
  QpConfig cfg;
  cfg.send_cq = scq->get();
  cfg.recv_cq = rcq->get();
  auto qp = (*pd)->CreateQp(cfg);
  auto src = (*pd)->AllocRegion(kMiB, kLocalWrite);
  auto rbuf = (*pd)->AllocRegion(4096, kLocalWrite);
  ASSERT_TRUE(qp.ok() && src.ok() && rbuf.ok());
  Sge rsge = (*rbuf)->Slice(0, 4096);
  RecvWr rwr{88, &rsge, 1};
  ASSERT_TRUE((*qp)->PostRecv({&rwr, 1}).ok());

  std::string child_ep;
  RemoteRegion rr;
  ASSERT_TRUE(RecvBlob(in, &child_ep));
  ASSERT_TRUE(ReadAll(in, &rr, sizeof(rr)));
  ASSERT_TRUE(SendBlob(out, (*qp)->local_endpoint().Serialize()));
  auto ep = QpEndpoint::Parse(child_ep);
  ASSERT_TRUE(ep.ok()) << ep.status();
  ASSERT_TRUE((*qp)->Connect(*ep).ok());

  Fill((*src)->data(), kMiB, 42);
  Sge sge = (*src)->Slice(0, kMiB);
  SendWr wr;
  wr.wr_id = 9;
  wr.opcode = WrOpcode::kRdmaWriteWithImm;
  wr.flags = kSignaled;
  wr.sg_list = &sge;
  wr.num_sge = 1;
  wr.imm_data = 0x5eed;
  wr.remote_addr = rr.addr;
  wr.rkey = rr.rkey;
  ASSERT_TRUE((*qp)->PostSend({&wr, 1}).ok());
  Completion c = WaitOne(scq->get());
  EXPECT_EQ(c.status, WcStatus::kSuccess) << WcStatusName(c.status);
  uint8_t verdict = 0xff;
  ASSERT_TRUE(ReadAll(in, &verdict, 1));
  EXPECT_EQ(verdict, 0) << "child saw different bytes than written";

  // Peer death: the child exits without closing anything.
  uint8_t go = 1;
  ASSERT_TRUE(WriteAll(out, &go, 1));
  int wstatus = 0;
  ASSERT_EQ(::waitpid(pid, &wstatus, 0), pid);
  EXPECT_TRUE(WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0) << "child status " << wstatus;
  Completion rc = WaitOne(rcq->get());
  EXPECT_EQ(rc.wr_id, 88u);
  EXPECT_EQ(rc.status, WcStatus::kWrFlushError) << WcStatusName(rc.status);
  EXPECT_EQ((*qp)->state(), QpState::kError);
  // Sends to a dead peer complete in error rather than hang.
  ASSERT_TRUE((*qp)->PostSend({&wr, 1}).ok());
  EXPECT_NE(WaitOne(scq->get()).status, WcStatus::kSuccess);
  ::close(in);
  ::close(out);
}

}  // namespace
}  // namespace verbs
}  // namespace msgr

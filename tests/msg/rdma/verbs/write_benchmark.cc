// RDMA WRITE throughput of a verbs provider vs plain memcpy, for a few sizes, then the
// round trip of a WRITE_WITH_IMM ping-pong between two threads that sleep on their CQs'
// completion channels (what a wake-up through the provider costs).
//   bazel run -c opt //tests/msg/rdma/verbs:write_benchmark -- [device]   (default "soft")
// QP pairs in one process; WRs signalled every kSignalEvery posts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "msg/rdma/verbs/device.h"

namespace {

using msgr::verbs::Completion;
using msgr::verbs::CompletionQueue;
using msgr::verbs::QpConfig;
using msgr::verbs::SendWr;
using msgr::verbs::Sge;
using msgr::verbs::WcStatus;
using msgr::verbs::WrOpcode;

constexpr int kSignalEvery = 32;
constexpr double kSecondsPerSize = 0.5;
constexpr size_t kRegionBytes = 64u << 20;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One side of the ping-pong: a QP with its own send and receive CQs, 8 registered bytes the
// peer writes into, and receives kept posted.
struct PingSide {
  std::unique_ptr<CompletionQueue> scq, rcq;
  std::unique_ptr<msgr::verbs::QueuePair> qp;
  std::unique_ptr<msgr::verbs::MemoryRegion> mr;
  uint64_t sent = 0;
};

bool MakePingSide(msgr::verbs::Device& dev, msgr::verbs::ProtectionDomain& pd, PingSide* s) {
  auto scq = dev.CreateCq(256);
  auto rcq = dev.CreateCq(256);
  if (!scq.ok() || !rcq.ok()) return false;
  s->scq = std::move(*scq);
  s->rcq = std::move(*rcq);
  QpConfig cfg;
  cfg.send_cq = s->scq.get();
  cfg.recv_cq = s->rcq.get();
  auto qp = pd.CreateQp(cfg);
  auto mr = pd.AllocRegion(4096, msgr::verbs::kLocalWrite | msgr::verbs::kRemoteWrite);
  if (!qp.ok() || !mr.ok()) return false;
  s->qp = std::move(*qp);
  s->mr = std::move(*mr);
  for (uint64_t i = 0; i < 64; ++i) {
    msgr::verbs::RecvWr r{i, nullptr, 0};
    if (!s->qp->PostRecv({&r, 1}).ok()) return false;
  }
  return true;
}

// Waits (sleeping on the channel) for one receive, reposts it, and sends one
// WRITE_WITH_IMM of 8 bytes to `to`'s region.
bool PingStep(PingSide& me, const PingSide& to, bool send_first) {
  auto send = [&] {
    Sge sge = me.mr->Slice(0, 8);
    SendWr wr;
    wr.wr_id = me.sent;
    wr.opcode = WrOpcode::kRdmaWriteWithImm;
    wr.flags = (++me.sent % kSignalEvery == 0) ? uint32_t{msgr::verbs::kSignaled} : 0u;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.imm_data = static_cast<uint32_t>(me.sent);
    wr.remote_addr = reinterpret_cast<uint64_t>(to.mr->addr());
    wr.rkey = to.mr->rkey();
    if (!me.qp->PostSend({&wr, 1}).ok()) return false;
    Completion c[8];
    for (int n; (n = me.scq->Poll(c, 8)) > 0;) {
      for (int i = 0; i < n; ++i) {
        if (c[i].status != WcStatus::kSuccess) return false;
      }
    }
    return true;
  };
  if (send_first) return send();
  Completion c;
  auto n = me.rcq->WaitForCompletion(&c, 1, absl::Seconds(5));
  if (!n.ok() || *n != 1 || c.status != WcStatus::kSuccess) return false;
  msgr::verbs::RecvWr r{c.wr_id, nullptr, 0};
  if (!me.qp->PostRecv({&r, 1}).ok()) return false;
  return send();
}

int RunPingPong(msgr::verbs::Device& dev, msgr::verbs::ProtectionDomain& pd,
                const std::string& name) {
  constexpr int kRounds = 4000;
  PingSide a, b;
  if (!MakePingSide(dev, pd, &a) || !MakePingSide(dev, pd, &b)) return 4;
  if (!a.qp->Connect(b.qp->local_endpoint()).ok() ||
      !b.qp->Connect(a.qp->local_endpoint()).ok()) {
    return 4;
  }
  std::thread echo([&] {
    for (int i = 0; i < kRounds; ++i) {
      if (!PingStep(b, a, false)) return;
    }
  });
  std::vector<double> rtt_us;
  rtt_us.reserve(kRounds);
  bool ok = true;
  for (int i = 0; i < kRounds && ok; ++i) {
    const double t0 = Now();
    ok = PingStep(a, b, true);
    Completion c;
    auto n = ok ? a.rcq->WaitForCompletion(&c, 1, absl::Seconds(5)) : absl::StatusOr<int>(0);
    ok = ok && n.ok() && *n == 1 && c.status == WcStatus::kSuccess;
    if (ok) {
      msgr::verbs::RecvWr r{c.wr_id, nullptr, 0};
      ok = a.qp->PostRecv({&r, 1}).ok();
    }
    rtt_us.push_back((Now() - t0) * 1e6);
  }
  echo.join();
  if (!ok) return 5;
  std::sort(rtt_us.begin(), rtt_us.end());
  std::printf("%-8s WRITE_WITH_IMM ping-pong, both sides asleep on their channels, %d rounds: "
              "round trip p50 %.1f us, p90 %.1f us, p99 %.1f us\n",
              name.c_str(), kRounds, rtt_us[rtt_us.size() / 2], rtt_us[rtt_us.size() * 9 / 10],
              rtt_us[rtt_us.size() * 99 / 100]);
  return 0;
}

int Run(const std::string& name) {
  auto dev = msgr::verbs::OpenDevice(name);
  if (!dev.ok()) {
    std::fprintf(stderr, "%s\n", dev.status().ToString().c_str());
    return 1;
  }
  auto pd = (*dev)->CreatePd();
  auto cq_a = (*dev)->CreateCq(1024);
  auto cq_b = (*dev)->CreateCq(1024);
  if (!pd.ok() || !cq_a.ok() || !cq_b.ok()) return 1;
  QpConfig cfg;
  cfg.send_cq = cq_a->get();
  cfg.recv_cq = cq_a->get();
  auto qa = (*pd)->CreateQp(cfg);
  cfg.send_cq = cq_b->get();
  cfg.recv_cq = cq_b->get();
  auto qb = (*pd)->CreateQp(cfg);
  if (!qa.ok() || !qb.ok()) return 1;
  if (!(*qa)->Connect((*qb)->local_endpoint()).ok() ||
      !(*qb)->Connect((*qa)->local_endpoint()).ok()) {
    return 1;
  }
  auto src = (*pd)->AllocRegion(kRegionBytes, msgr::verbs::kLocalWrite);
  auto dst = (*pd)->AllocRegion(kRegionBytes, msgr::verbs::kLocalWrite | msgr::verbs::kRemoteWrite);
  if (!src.ok() || !dst.ok()) return 1;
  std::memset((*src)->data(), 0x5a, kRegionBytes);
  std::memset((*dst)->data(), 0, kRegionBytes);
  std::printf("%-8s %10s %12s %12s\n", "device", "size", "write MB/s", "memcpy MB/s");
  for (size_t size : {size_t{4096}, size_t{65536}, size_t{1} << 20}) {
    size_t slots = kRegionBytes / size;
    // Provider WRITE.
    uint64_t ops = 0;
    int outstanding = 0;
    double t0 = Now(), t1 = t0;
    while (t1 - t0 < kSecondsPerSize) {
      size_t off = (ops % slots) * size;
      Sge sge = (*src)->Slice(off, static_cast<uint32_t>(size));
      SendWr wr;
      wr.wr_id = ops;
      wr.opcode = WrOpcode::kRdmaWrite;
      wr.flags = (ops % kSignalEvery == kSignalEvery - 1) ? uint32_t{msgr::verbs::kSignaled} : 0u;
      wr.sg_list = &sge;
      wr.num_sge = 1;
      wr.remote_addr = reinterpret_cast<uint64_t>((*dst)->addr()) + off;
      wr.rkey = (*dst)->rkey();
      if (!(*qa)->PostSend({&wr, 1}).ok()) return 2;
      ++ops;
      if (wr.flags != 0) ++outstanding;
      while (outstanding > 2) {
        Completion c[8];
        int n = (*cq_a)->Poll(c, 8);
        for (int i = 0; i < n; ++i) {
          if (c[i].status != WcStatus::kSuccess) return 3;
        }
        outstanding -= n;
      }
      t1 = Now();
    }
    double write_mbs = ops * size / (t1 - t0) / 1e6;
    // memcpy baseline over the same buffers.
    uint64_t mops = 0;
    t0 = Now();
    t1 = t0;
    while (t1 - t0 < kSecondsPerSize) {
      size_t off = (mops % slots) * size;
      std::memcpy((*dst)->data() + off, (*src)->data() + off, size);
      ++mops;
      t1 = Now();
    }
    double memcpy_mbs = mops * size / (t1 - t0) / 1e6;
    std::printf("%-8s %10zu %12.0f %12.0f\n", name.c_str(), size, write_mbs, memcpy_mbs);
    // Drain.
    while (outstanding > 0) {
      Completion c[8];
      outstanding -= (*cq_a)->Poll(c, 8);
    }
  }
  return RunPingPong(**dev, **pd, name);
}

}  // namespace

int main(int argc, char** argv) { return Run(argc > 1 ? argv[1] : "soft"); }

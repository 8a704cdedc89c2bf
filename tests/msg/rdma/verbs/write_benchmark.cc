// RDMA WRITE throughput of a verbs provider vs plain memcpy, for a few sizes.
//   bazel run -c opt //tests/msg/rdma/verbs:write_benchmark -- [device]   (default "soft")
// One QP pair in one process; WRs signalled every kSignalEvery posts.
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

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
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc > 1 ? argv[1] : "soft"); }

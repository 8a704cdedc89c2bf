// Smoke test of a real verbs device (rdma-core / libibverbs), meant to run inside the
// Soft-RoCE VM (tools/rxe_vm.sh), where MSGR_RDMA_DEVICE=rxe0 and MSGR_RDMA_GID_INDEX=1.
//
// Two RC queue pairs on the same port are connected to each other in one process, then:
// SEND/RECV, a 1 MiB RDMA WRITE checked byte for byte, WRITE_WITH_IMM (immediate data and
// byte count checked) and a WRITE with a wrong rkey, which must fail with
// IBV_WC_REM_ACCESS_ERR and leave the QP in the error state.
//
// Without any verbs device (a host without RDMA) every test is skipped, loudly.

#include <infiniband/verbs.h>

#include <arpa/inet.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

// Soft-RoCE under software emulation is slow: be generous before calling a completion lost.
constexpr auto kCompletionTimeout = std::chrono::seconds(30);
constexpr uint32_t kQueueDepth = 16;
constexpr size_t kBigSize = 1 << 20;

std::string ErrnoText(int err) { return std::string(std::strerror(err)) + " (errno " + std::to_string(err) + ")"; }

// Owning handles for the verbs objects; each is released by its own ibv_* call.
struct DeviceListDeleter {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};
struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct CqDeleter {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct QpDeleter {
  void operator()(ibv_qp* q) const { ibv_destroy_qp(q); }
};
struct MrDeleter {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;

// A buffer registered with the PD, with the access a target of one-sided writes needs.
struct Region {
  std::vector<uint8_t> bytes;
  MrPtr mr;
};

// One end of the connection: its own CQ and RC QP.
struct Endpoint {
  CqPtr cq;
  QpPtr qp;
};

class VerbsSmokeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    OpenDevice();
    if (IsSkipped() || HasFatalFailure()) return;
    pd_.reset(ibv_alloc_pd(ctx_.get()));
    ASSERT_TRUE(pd_) << "ibv_alloc_pd: " << ErrnoText(errno);
    ASSERT_EQ(ibv_query_port(ctx_.get(), port_, &port_attr_), 0) << "ibv_query_port";
    ASSERT_EQ(port_attr_.state, IBV_PORT_ACTIVE) << "port " << int(port_) << " of " << device_name_ << " is not active";
    if (port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET) {
      ASSERT_EQ(ibv_query_gid(ctx_.get(), port_, gid_index_, &gid_), 0) << "ibv_query_gid index " << gid_index_;
      static const uint8_t kZero[16] = {};
      ASSERT_NE(std::memcmp(gid_.raw, kZero, sizeof kZero), 0)
          << "GID index " << gid_index_ << " of " << device_name_ << " is empty (set MSGR_RDMA_GID_INDEX)";
    }
    MakeEndpoint(&a_);
    MakeEndpoint(&b_);
    if (HasFatalFailure()) return;
    Connect(a_.qp.get(), b_.qp->qp_num);
    Connect(b_.qp.get(), a_.qp->qp_num);
  }

  // Picks the device named by MSGR_RDMA_DEVICE, or the first one; skips when there is none.
  void OpenDevice() {
    int n = 0;
    std::unique_ptr<ibv_device*, DeviceListDeleter> list(ibv_get_device_list(&n));
    const char* wanted = std::getenv("MSGR_RDMA_DEVICE");
    if (!list || n == 0) {
      GTEST_SKIP() << "no RDMA device: ibv_get_device_list found none"
                   << (list ? std::string() : ": " + ErrnoText(errno))
                   << (wanted ? std::string(" (MSGR_RDMA_DEVICE=") + wanted + ")" : std::string())
                   << "; run it in the Soft-RoCE VM: tools/rxe_vm.sh -- bazel-bin/tests/rdma_vm/verbs_smoke_test";
    }
    ibv_device* dev = nullptr;
    std::ostringstream names;
    for (int i = 0; i < n; ++i) {
      names << (i ? ", " : "") << ibv_get_device_name(list.get()[i]);
      if (!dev && (!wanted || *wanted == '\0' || std::strcmp(ibv_get_device_name(list.get()[i]), wanted) == 0)) {
        dev = list.get()[i];
      }
    }
    ASSERT_NE(dev, nullptr) << "MSGR_RDMA_DEVICE=" << wanted << " is not among the devices: " << names.str();
    device_name_ = ibv_get_device_name(dev);
    ctx_.reset(ibv_open_device(dev));
    ASSERT_TRUE(ctx_) << "ibv_open_device(" << device_name_ << "): " << ErrnoText(errno)
                      << " (is /dev/infiniband readable, and ulimit -l big enough?)";
    if (const char* g = std::getenv("MSGR_RDMA_GID_INDEX"); g && *g) gid_index_ = std::atoi(g);
  }

  void MakeEndpoint(Endpoint* e) {
    e->cq.reset(ibv_create_cq(ctx_.get(), 2 * kQueueDepth, nullptr, nullptr, 0));
    ASSERT_TRUE(e->cq) << "ibv_create_cq: " << ErrnoText(errno);
    ibv_qp_init_attr init{};
    init.send_cq = e->cq.get();
    init.recv_cq = e->cq.get();
    init.qp_type = IBV_QPT_RC;
    init.cap.max_send_wr = kQueueDepth;
    init.cap.max_recv_wr = kQueueDepth;
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    e->qp.reset(ibv_create_qp(pd_.get(), &init));
    ASSERT_TRUE(e->qp) << "ibv_create_qp: " << ErrnoText(errno);
  }

  // RESET -> INIT -> RTR -> RTS, with the peer on this very port (its GID is ours).
  void Connect(ibv_qp* qp, uint32_t remote_qpn) {
    ibv_qp_attr attr{};
    attr.qp_state = IBV_QPS_INIT;
    attr.pkey_index = 0;
    attr.port_num = port_;
    attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    ASSERT_EQ(ibv_modify_qp(qp, &attr, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS), 0)
        << "modify_qp INIT: " << ErrnoText(errno);

    attr = {};
    attr.qp_state = IBV_QPS_RTR;
    attr.path_mtu = port_attr_.active_mtu;
    attr.dest_qp_num = remote_qpn;
    attr.rq_psn = 0;
    attr.max_dest_rd_atomic = 1;
    attr.min_rnr_timer = 12;
    attr.ah_attr.port_num = port_;
    if (port_attr_.link_layer == IBV_LINK_LAYER_ETHERNET) {
      attr.ah_attr.is_global = 1;
      attr.ah_attr.grh.dgid = gid_;
      attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(gid_index_);
      attr.ah_attr.grh.hop_limit = 1;
    } else {
      attr.ah_attr.dlid = port_attr_.lid;
    }
    ASSERT_EQ(ibv_modify_qp(qp, &attr,
                            IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER),
              0)
        << "modify_qp RTR: " << ErrnoText(errno);

    attr = {};
    attr.qp_state = IBV_QPS_RTS;
    attr.sq_psn = 0;
    attr.timeout = 14;
    attr.retry_cnt = 7;
    attr.rnr_retry = 7;
    attr.max_rd_atomic = 1;
    ASSERT_EQ(ibv_modify_qp(qp, &attr,
                            IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                IBV_QP_MAX_QP_RD_ATOMIC),
              0)
        << "modify_qp RTS: " << ErrnoText(errno);
  }

  void Register(Region* r, size_t size, uint8_t fill) {
    r->bytes.assign(size, fill);
    r->mr.reset(ibv_reg_mr(pd_.get(), r->bytes.data(), size,
                           IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ));
    ASSERT_TRUE(r->mr) << "ibv_reg_mr(" << size << " bytes): " << ErrnoText(errno) << " (ulimit -l?)";
  }

  void PostRecv(Endpoint& e, Region* r, size_t len, uint64_t wr_id) {
    ibv_sge sge{};
    ibv_recv_wr wr{};
    ibv_recv_wr* bad = nullptr;
    wr.wr_id = wr_id;
    if (r) {
      sge.addr = reinterpret_cast<uintptr_t>(r->bytes.data());
      sge.length = static_cast<uint32_t>(len);
      sge.lkey = r->mr->lkey;
      wr.sg_list = &sge;
      wr.num_sge = 1;
    }
    ASSERT_EQ(ibv_post_recv(e.qp.get(), &wr, &bad), 0) << "ibv_post_recv";
  }

  // Posts one signalled work request from `src` (the first `len` bytes); returns the errno.
  int PostSend(Endpoint& e, ibv_wr_opcode op, Region& src, size_t len, uint64_t wr_id, uint64_t remote_addr = 0,
               uint32_t rkey = 0, uint32_t imm_host_order = 0) {
    ibv_sge sge{};
    sge.addr = reinterpret_cast<uintptr_t>(src.bytes.data());
    sge.length = static_cast<uint32_t>(len);
    sge.lkey = src.mr->lkey;
    ibv_send_wr wr{};
    ibv_send_wr* bad = nullptr;
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = op;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = remote_addr;
    wr.wr.rdma.rkey = rkey;
    wr.imm_data = htonl(imm_host_order);
    return ibv_post_send(e.qp.get(), &wr, &bad);
  }

  // Waits for exactly one completion on e's CQ.
  ::testing::AssertionResult PollOne(Endpoint& e, ibv_wc* wc) {
    const auto deadline = std::chrono::steady_clock::now() + kCompletionTimeout;
    while (std::chrono::steady_clock::now() < deadline) {
      int got = ibv_poll_cq(e.cq.get(), 1, wc);
      if (got < 0) return ::testing::AssertionFailure() << "ibv_poll_cq returned " << got;
      if (got == 1) return ::testing::AssertionSuccess();
    }
    return ::testing::AssertionFailure() << "no completion within " << kCompletionTimeout.count() << " s";
  }

  ibv_qp_state QpState(Endpoint& e) {
    ibv_qp_attr attr{};
    ibv_qp_init_attr init{};
    if (ibv_query_qp(e.qp.get(), &attr, IBV_QP_STATE, &init) != 0) return IBV_QPS_UNKNOWN;
    return attr.qp_state;
  }

  static std::string WcText(const ibv_wc& wc) {
    std::ostringstream s;
    s << "wr_id " << wc.wr_id << " status " << ibv_wc_status_str(wc.status) << " opcode " << wc.opcode << " byte_len "
      << wc.byte_len;
    return s.str();
  }

  std::string device_name_;
  uint8_t port_ = 1;
  int gid_index_ = 0;
  ibv_port_attr port_attr_{};
  ibv_gid gid_{};
  // Declared in creation order, so they are destroyed in reverse (QPs before CQs before PD).
  ContextPtr ctx_;
  PdPtr pd_;
  Endpoint a_, b_;
};

TEST_F(VerbsSmokeTest, SendRecv) {
  Region src, dst;
  ASSERT_NO_FATAL_FAILURE(Register(&src, 4096, 0));
  ASSERT_NO_FATAL_FAILURE(Register(&dst, 4096, 0));
  const std::string msg = "hello over " + device_name_;
  std::memcpy(src.bytes.data(), msg.data(), msg.size());

  ASSERT_NO_FATAL_FAILURE(PostRecv(b_, &dst, dst.bytes.size(), 7));
  ASSERT_EQ(PostSend(a_, IBV_WR_SEND, src, msg.size(), 1), 0);

  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcText(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_SEND);
  EXPECT_EQ(wc.wr_id, 1u);

  ASSERT_TRUE(PollOne(b_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcText(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV);
  EXPECT_EQ(wc.wr_id, 7u);
  EXPECT_EQ(wc.byte_len, msg.size());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(dst.bytes.data()), msg.size()), msg);
}

TEST_F(VerbsSmokeTest, RdmaWrite1MiB) {
  Region src, dst;
  ASSERT_NO_FATAL_FAILURE(Register(&src, kBigSize, 0));
  ASSERT_NO_FATAL_FAILURE(Register(&dst, kBigSize, 0));
  // A pattern that differs at every offset within a page and between pages.
  for (size_t i = 0; i < kBigSize; ++i) src.bytes[i] = static_cast<uint8_t>((i * 131) ^ (i >> 12));

  ASSERT_EQ(PostSend(a_, IBV_WR_RDMA_WRITE, src, kBigSize, 2, reinterpret_cast<uintptr_t>(dst.bytes.data()),
                     dst.mr->rkey),
            0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_, &wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcText(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);

  // The initiator's completion means the data is placed at the responder.
  size_t first_bad = kBigSize;
  for (size_t i = 0; i < kBigSize && first_bad == kBigSize; ++i) {
    if (dst.bytes[i] != src.bytes[i]) first_bad = i;
  }
  EXPECT_EQ(first_bad, kBigSize) << "first differing byte at offset " << first_bad;
  // A plain WRITE consumes no receive and makes no completion at the target.
  ibv_wc none{};
  EXPECT_EQ(ibv_poll_cq(b_.cq.get(), 1, &none), 0);
}

TEST_F(VerbsSmokeTest, WriteWithImm) {
  Region src, dst;
  constexpr size_t kLen = 3000;  // not a multiple of anything in particular
  constexpr uint32_t kImm = 0xC0FFEE42;
  constexpr size_t kOffset = 512;
  ASSERT_NO_FATAL_FAILURE(Register(&src, 8192, 0x5A));
  ASSERT_NO_FATAL_FAILURE(Register(&dst, 8192, 0));

  // WRITE_WITH_IMM consumes a receive; it needs no buffer since the data goes by rkey.
  ASSERT_NO_FATAL_FAILURE(PostRecv(b_, nullptr, 0, 9));
  ASSERT_EQ(PostSend(a_, IBV_WR_RDMA_WRITE_WITH_IMM, src, kLen, 3,
                     reinterpret_cast<uintptr_t>(dst.bytes.data()) + kOffset, dst.mr->rkey, kImm),
            0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_SUCCESS) << WcText(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_RDMA_WRITE);

  ASSERT_TRUE(PollOne(b_, &wc));
  ASSERT_EQ(wc.status, IBV_WC_SUCCESS) << WcText(wc);
  EXPECT_EQ(wc.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
  EXPECT_EQ(wc.wr_id, 9u);
  EXPECT_TRUE(wc.wc_flags & IBV_WC_WITH_IMM);
  EXPECT_EQ(ntohl(wc.imm_data), kImm);
  EXPECT_EQ(wc.byte_len, kLen);
  for (size_t i = 0; i < dst.bytes.size(); ++i) {
    const uint8_t want = (i >= kOffset && i < kOffset + kLen) ? 0x5A : 0;
    ASSERT_EQ(dst.bytes[i], want) << "offset " << i;
  }
}

TEST_F(VerbsSmokeTest, WrongRkeyFailsAndErrorsTheQp) {
  Region src, dst;
  ASSERT_NO_FATAL_FAILURE(Register(&src, 4096, 0x11));
  ASSERT_NO_FATAL_FAILURE(Register(&dst, 4096, 0));
  // Change the key byte (the low 8 bits) and an index bit: no MR has this rkey.
  const uint32_t bad_rkey = dst.mr->rkey ^ 0x00FF01FFu;

  ASSERT_EQ(PostSend(a_, IBV_WR_RDMA_WRITE, src, 256, 4, reinterpret_cast<uintptr_t>(dst.bytes.data()), bad_rkey), 0);
  ibv_wc wc{};
  ASSERT_TRUE(PollOne(a_, &wc));
  EXPECT_EQ(wc.status, IBV_WC_REM_ACCESS_ERR) << WcText(wc);
  EXPECT_EQ(wc.wr_id, 4u);
  EXPECT_EQ(QpState(a_), IBV_QPS_ERR);
  EXPECT_EQ(dst.bytes, std::vector<uint8_t>(4096, 0)) << "a write with a bad rkey changed the target";

  // Later work on the errored QP is flushed, not executed.
  int rc = PostSend(a_, IBV_WR_RDMA_WRITE, src, 256, 5, reinterpret_cast<uintptr_t>(dst.bytes.data()), dst.mr->rkey);
  if (rc == 0) {
    ASSERT_TRUE(PollOne(a_, &wc));
    EXPECT_EQ(wc.status, IBV_WC_WR_FLUSH_ERR) << WcText(wc);
    EXPECT_EQ(dst.bytes, std::vector<uint8_t>(4096, 0));
  }
}

}  // namespace

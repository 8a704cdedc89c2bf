// ibverbs provider: RC queue pairs — creation, INIT/RTR/RTS/ERR transitions (IB and RoCE
// addressing), and the posting paths.
#include <arpa/inet.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <vector>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"
#include "msg/rdma/verbs/ibverbs/ibv_objects.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

namespace {

static_assert(sizeof(Sge) == sizeof(ibv_sge), "Sge mirrors ibv_sge");
static_assert(offsetof(Sge, addr) == offsetof(ibv_sge, addr), "Sge mirrors ibv_sge");
static_assert(offsetof(Sge, length) == offsetof(ibv_sge, length), "Sge mirrors ibv_sge");
static_assert(offsetof(Sge, lkey) == offsetof(ibv_sge, lkey), "Sge mirrors ibv_sge");

constexpr uint8_t kRoceHopLimit = 64;

ibv_mtu ToIbvMtu(uint32_t bytes) {
  if (bytes >= 4096) return IBV_MTU_4096;
  if (bytes >= 2048) return IBV_MTU_2048;
  if (bytes >= 1024) return IBV_MTU_1024;
  if (bytes >= 512) return IBV_MTU_512;
  return IBV_MTU_256;
}

ibv_wr_opcode ToIbvOpcode(WrOpcode op) {
  switch (op) {
    case WrOpcode::kSend: return IBV_WR_SEND;
    case WrOpcode::kSendWithImm: return IBV_WR_SEND_WITH_IMM;
    case WrOpcode::kRdmaWrite: return IBV_WR_RDMA_WRITE;
    case WrOpcode::kRdmaWriteWithImm: return IBV_WR_RDMA_WRITE_WITH_IMM;
    case WrOpcode::kRdmaRead: return IBV_WR_RDMA_READ;
  }
  return IBV_WR_SEND;
}

bool GidIsZero(const Gid& gid) {
  for (uint8_t b : gid) {
    if (b != 0) return false;
  }
  return true;
}

}  // namespace

// Checked here rather than left to the driver: drivers reject these with different errnos
// (mlx5 ENOMEM, rxe EINVAL) or, for some, not at all; the soft provider rejects the same
// WRs with the same InvalidArgument. Limits are the ones the caller configured (the device
// may have granted more; relying on that would not work on the other provider).
absl::Status IbvQp::ValidateSendWr(const SendWr& wr) const {
  if (wr.num_sge > config_.max_send_sge) {
    return absl::InvalidArgumentError(
        absl::StrCat("num_sge ", wr.num_sge, " > max_send_sge ", config_.max_send_sge));
  }
  if (wr.num_sge > 0 && wr.sg_list == nullptr) {
    return absl::InvalidArgumentError("num_sge > 0 but sg_list is null");
  }
  if (wr.flags & kInline) {
    if (wr.opcode == WrOpcode::kRdmaRead) {
      return absl::InvalidArgumentError("kInline is not allowed on RDMA READ");
    }
    uint64_t total = 0;
    for (uint32_t i = 0; i < wr.num_sge; ++i) total += wr.sg_list[i].length;
    if (total > max_inline_data_) {
      return absl::InvalidArgumentError(
          absl::StrCat("inline payload ", total, " > max_inline_data ", max_inline_data_));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<QueuePair>> IbvPd::CreateQp(const QpConfig& config) {
  auto* scq = dynamic_cast<IbvCq*>(config.send_cq);
  auto* rcq = dynamic_cast<IbvCq*>(config.recv_cq);
  if (scq == nullptr || rcq == nullptr) {
    return absl::InvalidArgumentError("QpConfig needs send_cq and recv_cq of an ibverbs device");
  }
  ibv_qp_init_attr init;
  std::memset(&init, 0, sizeof(init));
  init.send_cq = scq->core()->cq.get();
  init.recv_cq = rcq->core()->cq.get();
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = config.signal_all ? 1 : 0;
  init.cap.max_send_wr = config.max_send_wr;
  init.cap.max_recv_wr = config.max_recv_wr;
  init.cap.max_send_sge = config.max_send_sge;
  init.cap.max_recv_sge = config.max_recv_sge;
  QpPtr qp;
  // Devices cap inline data differently: ask for what was configured, then back off.
  for (uint32_t inl = config.max_inline_data;; inl /= 2) {
    init.cap.max_inline_data = inl;
    qp.reset(ibv_create_qp(core_->pd.get(), &init));
    if (qp || inl == 0) break;
  }
  if (!qp) return ErrnoStatus(errno, "ibv_create_qp(RC)");
  std::random_device rd;
  auto q = std::make_unique<IbvQp>(core_, scq->core(), rcq->core(), std::move(qp), config,
                                   rd() & 0xffffff, init.cap.max_inline_data);
  absl::Status st = q->ModifyToInit();
  if (!st.ok()) return st;
  return std::unique_ptr<QueuePair>(std::move(q));
}

IbvQp::IbvQp(std::shared_ptr<PdCore> pd, std::shared_ptr<CqCore> send_cq,
             std::shared_ptr<CqCore> recv_cq, QpPtr qp, const QpConfig& config, uint32_t psn,
             uint32_t max_inline)
    : pd_(std::move(pd)),
      send_cq_(std::move(send_cq)),
      recv_cq_(std::move(recv_cq)),
      qp_(std::move(qp)),
      config_(config),
      psn_(psn) {
  qp_num_ = qp_->qp_num;
  max_inline_data_ = max_inline;
}

QpEndpoint IbvQp::local_endpoint() const {
  const PortAttr& port = pd_->dev->port;
  QpEndpoint ep;
  ep.qp_num = qp_num_;
  ep.psn = psn_;
  ep.gid = port.gid;
  ep.lid = port.lid;
  ep.mtu = port.active_mtu;
  return ep;
}

absl::Status IbvQp::ModifyToInit() {
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_INIT;
  attr.pkey_index = 0;
  attr.port_num = pd_->dev->port.port_num;
  attr.qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
  int rc = ibv_modify_qp(qp_.get(), &attr,
                         IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
  if (rc != 0) return ErrnoStatus(rc, "ibv_modify_qp(RESET->INIT)");
  return absl::OkStatus();
}

absl::Status IbvQp::ModifyToRtr(const QpEndpoint& remote) {
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  const PortAttr& port = pd_->dev->port;
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTR;
  attr.path_mtu = ToIbvMtu(std::min(port.active_mtu, remote.mtu));
  attr.dest_qp_num = remote.qp_num;
  attr.rq_psn = remote.psn & 0xffffff;
  attr.max_dest_rd_atomic = config_.max_rd_atomic;
  attr.min_rnr_timer = config_.min_rnr_timer;
  attr.ah_attr.port_num = port.port_num;
  attr.ah_attr.sl = 0;
  attr.ah_attr.src_path_bits = 0;
  attr.ah_attr.dlid = remote.lid;
  if (port.ethernet || (remote.lid == 0 && !GidIsZero(remote.gid))) {
    // RoCE (or cross-subnet IB): GID-routed, with a GRH.
    attr.ah_attr.is_global = 1;
    std::memcpy(attr.ah_attr.grh.dgid.raw, remote.gid.data(), 16);
    attr.ah_attr.grh.sgid_index = static_cast<uint8_t>(port.gid_index);
    attr.ah_attr.grh.hop_limit = kRoceHopLimit;
    attr.ah_attr.grh.traffic_class = 0;
    attr.ah_attr.grh.flow_label = 0;
  }
  int rc = ibv_modify_qp(qp_.get(), &attr,
                         IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                             IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (rc != 0) {
    return ErrnoStatus(rc, absl::StrCat("ibv_modify_qp(INIT->RTR) to ", remote.DebugString(),
                                        " (gid_index ", port.gid_index, ")"));
  }
  return absl::OkStatus();
}

absl::Status IbvQp::ModifyToRts() {
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_RTS;
  attr.timeout = config_.timeout;
  attr.retry_cnt = config_.retry_cnt;
  attr.rnr_retry = config_.rnr_retry;
  attr.sq_psn = psn_;
  attr.max_rd_atomic = config_.max_rd_atomic;
  int rc = ibv_modify_qp(qp_.get(), &attr,
                         IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                             IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (rc != 0) return ErrnoStatus(rc, "ibv_modify_qp(RTR->RTS)");
  return absl::OkStatus();
}

absl::Status IbvQp::ModifyToError() {
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  ibv_qp_attr attr;
  std::memset(&attr, 0, sizeof(attr));
  attr.qp_state = IBV_QPS_ERR;
  int rc = ibv_modify_qp(qp_.get(), &attr, IBV_QP_STATE);
  if (rc != 0) return ErrnoStatus(rc, "ibv_modify_qp(->ERR)");
  return absl::OkStatus();
}

QpState IbvQp::state() const {
  if (!qp_) return QpState::kError;
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  if (ibv_query_qp(qp_.get(), &attr, IBV_QP_STATE, &init) != 0) return QpState::kError;
  switch (attr.qp_state) {
    case IBV_QPS_RESET: return QpState::kReset;
    case IBV_QPS_INIT: return QpState::kInit;
    case IBV_QPS_RTR: return QpState::kRtr;
    case IBV_QPS_RTS:
    case IBV_QPS_SQD: return QpState::kRts;
    default: return QpState::kError;  // SQE, ERR.
  }
}

absl::StatusOr<uint32_t> IbvQp::QueryPathMtu() const {
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  ibv_qp_attr attr;
  ibv_qp_init_attr init;
  if (int rc = ibv_query_qp(qp_.get(), &attr, IBV_QP_PATH_MTU, &init); rc != 0) {
    return ErrnoStatus(rc, "ibv_query_qp(PATH_MTU)");
  }
  return 128u << attr.path_mtu;  // IBV_MTU_256 is 1, ..., IBV_MTU_4096 is 5.
}

absl::Status IbvQp::Close() {
  qp_.reset();
  return absl::OkStatus();
}

absl::Status IbvQp::PostSend(absl::Span<const SendWr> wrs, size_t* posted) {
  if (posted != nullptr) *posted = 0;
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  if (wrs.empty()) return absl::OkStatus();
  // Only the WRs before the first malformed one are posted (as the driver would do).
  size_t valid = 0;
  absl::Status invalid;
  for (; valid < wrs.size(); ++valid) {
    invalid = ValidateSendWr(wrs[valid]);
    if (!invalid.ok()) break;
  }
  if (valid == 0) {
    return absl::InvalidArgumentError(absl::StrCat("PostSend WR 0: ", invalid.message()));
  }
  thread_local std::vector<ibv_send_wr> chain;
  chain.resize(valid);
  for (size_t i = 0; i < valid; ++i) {
    const SendWr& w = wrs[i];
    ibv_send_wr& v = chain[i];
    std::memset(&v, 0, sizeof(v));
    v.wr_id = w.wr_id;
    v.next = i + 1 < valid ? &chain[i + 1] : nullptr;
    v.sg_list = const_cast<ibv_sge*>(reinterpret_cast<const ibv_sge*>(w.sg_list));
    v.num_sge = static_cast<int>(w.num_sge);
    v.opcode = ToIbvOpcode(w.opcode);
    v.send_flags = ((w.flags & kSignaled) ? IBV_SEND_SIGNALED : 0) |
                   ((w.flags & kInline) ? IBV_SEND_INLINE : 0);
    if (w.opcode == WrOpcode::kSendWithImm || w.opcode == WrOpcode::kRdmaWriteWithImm) {
      v.imm_data = htonl(w.imm_data);
    }
    if (w.opcode != WrOpcode::kSend && w.opcode != WrOpcode::kSendWithImm) {
      v.wr.rdma.remote_addr = w.remote_addr;
      v.wr.rdma.rkey = w.rkey;
    }
  }
  ibv_send_wr* bad = nullptr;
  int rc = ibv_post_send(qp_.get(), chain.data(), &bad);
  if (rc != 0) {
    size_t n = bad != nullptr ? static_cast<size_t>(bad - chain.data()) : 0;
    if (posted != nullptr) *posted = n;
    return ErrnoStatus(rc, absl::StrCat("ibv_post_send (WR ", n, " of ", wrs.size(), ")"));
  }
  if (posted != nullptr) *posted = valid;
  if (valid < wrs.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("PostSend WR ", valid, ": ", invalid.message()));
  }
  return absl::OkStatus();
}

absl::Status IbvQp::PostRecv(absl::Span<const RecvWr> wrs, size_t* posted) {
  if (posted != nullptr) *posted = 0;
  if (!qp_) return absl::FailedPreconditionError("QP is closed");
  if (wrs.empty()) return absl::OkStatus();
  thread_local std::vector<ibv_recv_wr> chain;
  chain.resize(wrs.size());
  for (size_t i = 0; i < wrs.size(); ++i) {
    ibv_recv_wr& v = chain[i];
    std::memset(&v, 0, sizeof(v));
    v.wr_id = wrs[i].wr_id;
    v.next = i + 1 < wrs.size() ? &chain[i + 1] : nullptr;
    v.sg_list = const_cast<ibv_sge*>(reinterpret_cast<const ibv_sge*>(wrs[i].sg_list));
    v.num_sge = static_cast<int>(wrs[i].num_sge);
  }
  ibv_recv_wr* bad = nullptr;
  int rc = ibv_post_recv(qp_.get(), chain.data(), &bad);
  if (rc != 0) {
    size_t n = bad != nullptr ? static_cast<size_t>(bad - chain.data()) : 0;
    if (posted != nullptr) *posted = n;
    return ErrnoStatus(rc, absl::StrCat("ibv_post_recv (WR ", n, " of ", wrs.size(), ")"));
  }
  if (posted != nullptr) *posted = wrs.size();
  return absl::OkStatus();
}

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

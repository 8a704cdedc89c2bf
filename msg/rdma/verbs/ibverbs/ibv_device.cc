// ibverbs provider: device discovery and open, port/GID selection, PDs, regions, CQs.
#include <arpa/inet.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"
#include "msg/rdma/verbs/ibverbs/gid_select.h"
#include "msg/rdma/verbs/ibverbs/ibv_objects.h"
#include "msg/rdma/verbs/ibverbs/provider.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

namespace {

constexpr size_t kHugePageBytes = 2u << 20;

struct DeviceListDeleter {
  void operator()(ibv_device** l) const { ibv_free_device_list(l); }
};
using DeviceListPtr = std::unique_ptr<ibv_device*, DeviceListDeleter>;

uint32_t MtuBytes(ibv_mtu mtu) {
  switch (mtu) {
    case IBV_MTU_256: return 256;
    case IBV_MTU_512: return 512;
    case IBV_MTU_1024: return 1024;
    case IBV_MTU_2048: return 2048;
    case IBV_MTU_4096: return 4096;
  }
  return 1024;
}

// The populated entries of the port's GID table, ascending. ibv_query_gid_ex fails
// (ENODATA) on empty slots; an all-zero GID is treated as empty too.
std::vector<GidEntry> ReadGidTable(ibv_context* ctx, uint8_t port, int table_len) {
  std::vector<GidEntry> entries;
  for (int i = 0; i < table_len; ++i) {
    ibv_gid_entry entry;
    if (ibv_query_gid_ex(ctx, port, static_cast<uint32_t>(i), &entry, 0) != 0) continue;
    static const uint8_t kZero[16] = {};
    if (std::memcmp(entry.gid.raw, kZero, sizeof(kZero)) == 0) continue;
    GidEntry e;
    e.index = i;
    e.roce_v2 = entry.gid_type == IBV_GID_TYPE_ROCE_V2;
    std::memcpy(e.gid.data(), entry.gid.raw, 16);
    entries.push_back(e);
  }
  return entries;
}

}  // namespace

const void* BoundIbvOpenDevice() { return reinterpret_cast<const void*>(&ibv_open_device); }

std::vector<std::string> ListDevices() {
  std::vector<std::string> names;
  int n = 0;
  DeviceListPtr list(ibv_get_device_list(&n));
  if (!list) return names;
  for (int i = 0; i < n; ++i) names.emplace_back(ibv_get_device_name(list.get()[i]));
  return names;
}

absl::StatusOr<std::unique_ptr<Device>> OpenIbverbsDevice(absl::string_view name,
                                                         const DeviceOptions& options) {
  int n = 0;
  DeviceListPtr list(ibv_get_device_list(&n));
  if (!list) return ErrnoStatus(errno, "ibv_get_device_list");
  ibv_device* dev = nullptr;
  for (int i = 0; i < n; ++i) {
    if (name.empty() || name == ibv_get_device_name(list.get()[i])) {
      dev = list.get()[i];
      break;
    }
  }
  if (dev == nullptr) {
    return absl::NotFoundError(
        n == 0 ? std::string("no RDMA device: ibv_get_device_list found none (no HCA, or no "
                             "kernel RDMA support / rdma_rxe)")
               : absl::StrCat("no RDMA device named '", name, "'"));
  }
  auto core = std::make_shared<ContextCore>();
  core->ctx.reset(ibv_open_device(dev));
  if (!core->ctx) {
    return ErrnoStatus(errno, absl::StrCat("ibv_open_device(", ibv_get_device_name(dev), ")"));
  }
  // Asynchronous events are polled (PollAsyncEvents), never waited for in the library.
  const int afd = core->ctx->async_fd;
  int afl = ::fcntl(afd, F_GETFL);
  if (afl < 0 || ::fcntl(afd, F_SETFL, afl | O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "fcntl(async event fd, O_NONBLOCK)");
  }
  ibv_device_attr dattr;
  if (int rc = ibv_query_device(core->ctx.get(), &dattr); rc != 0) {
    return ErrnoStatus(rc, "ibv_query_device");
  }
  ibv_port_attr pattr;
  if (int rc = ibv_query_port(core->ctx.get(), options.port_num, &pattr); rc != 0) {
    return ErrnoStatus(rc, absl::StrCat("ibv_query_port(", int{options.port_num}, ")"));
  }
  if (pattr.state != IBV_PORT_ACTIVE) {
    return absl::UnavailableError(absl::StrCat("RDMA port ", int{options.port_num}, " of ",
                                               ibv_get_device_name(dev), " is not ACTIVE"));
  }
  PortAttr& port = core->port;
  port.port_num = options.port_num;
  port.lid = pattr.lid;
  port.active_mtu = MtuBytes(pattr.active_mtu);
  port.ethernet = pattr.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (port.ethernet) {
    std::vector<GidEntry> table = ReadGidTable(core->ctx.get(), options.port_num, pattr.gid_tbl_len);
    absl::StatusOr<int> idx =
        SelectGidIndex(table, pattr.gid_tbl_len, options.gid_index,
                       std::getenv("MSGR_RDMA_GID_INDEX"),
                       absl::StrCat(ibv_get_device_name(dev), " port ", int{options.port_num}));
    if (!idx.ok()) return idx.status();
    port.gid_index = *idx;
  } else {
    port.gid_index = options.gid_index >= 0 ? options.gid_index : 0;
  }
  ibv_gid gid;
  if (int rc = ibv_query_gid(core->ctx.get(), options.port_num, port.gid_index, &gid); rc != 0) {
    return ErrnoStatus(rc, absl::StrCat("ibv_query_gid(index ", port.gid_index, ")"));
  }
  std::memcpy(port.gid.data(), gid.raw, 16);

  DeviceAttr attr;
  attr.name = ibv_get_device_name(dev);
  attr.provider = "ibverbs";
  attr.max_mr_size = dattr.max_mr_size;
  attr.max_qp = static_cast<uint32_t>(dattr.max_qp);
  attr.max_qp_wr = static_cast<uint32_t>(dattr.max_qp_wr);
  attr.max_sge = static_cast<uint32_t>(dattr.max_sge);
  attr.max_cqe = static_cast<uint32_t>(dattr.max_cqe);
  attr.max_mr = static_cast<uint32_t>(dattr.max_mr);
  return std::unique_ptr<Device>(new IbvDevice(std::move(core), std::move(attr)));
}

// ---------------------------------------------------------------------------------------

int ToIbvAccess(uint32_t access) {
  int flags = 0;
  if (access & kLocalWrite) flags |= IBV_ACCESS_LOCAL_WRITE;
  if (access & kRemoteWrite) flags |= IBV_ACCESS_REMOTE_WRITE;
  if (access & kRemoteRead) flags |= IBV_ACCESS_REMOTE_READ;
  return flags;
}

WcStatus FromIbvStatus(ibv_wc_status s) {
  switch (s) {
    case IBV_WC_SUCCESS: return WcStatus::kSuccess;
    case IBV_WC_LOC_LEN_ERR: return WcStatus::kLocalLengthError;
    case IBV_WC_LOC_QP_OP_ERR: return WcStatus::kLocalQpOperationError;
    case IBV_WC_LOC_PROT_ERR: return WcStatus::kLocalProtectionError;
    case IBV_WC_WR_FLUSH_ERR: return WcStatus::kWrFlushError;
    case IBV_WC_REM_INV_REQ_ERR: return WcStatus::kRemoteInvalidRequest;
    case IBV_WC_REM_ACCESS_ERR: return WcStatus::kRemoteAccessError;
    case IBV_WC_REM_OP_ERR: return WcStatus::kRemoteOperationError;
    case IBV_WC_RETRY_EXC_ERR: return WcStatus::kRetryExceeded;
    case IBV_WC_RNR_RETRY_EXC_ERR: return WcStatus::kRnrRetryExceeded;
    default: return WcStatus::kGeneralError;
  }
}

WcOpcode FromIbvOpcode(ibv_wc_opcode op) {
  switch (op) {
    case IBV_WC_SEND: return WcOpcode::kSend;
    case IBV_WC_RDMA_WRITE: return WcOpcode::kRdmaWrite;
    case IBV_WC_RDMA_READ: return WcOpcode::kRdmaRead;
    case IBV_WC_RECV: return WcOpcode::kRecv;
    case IBV_WC_RECV_RDMA_WITH_IMM: return WcOpcode::kRecvRdmaWithImm;
    default: return WcOpcode::kSend;
  }
}

Mapping::~Mapping() {
  if (addr_ != nullptr) ::munmap(addr_, bytes_);
}

IbvMr::IbvMr(std::shared_ptr<PdCore> pd, std::unique_ptr<Mapping> mem, MrPtr mr,
             uint32_t access)
    : pd_(std::move(pd)), mem_(std::move(mem)), mr_(std::move(mr)) {
  addr_ = mr_->addr;
  length_ = mr_->length;
  lkey_ = mr_->lkey;
  rkey_ = mr_->rkey;
  access_ = access;
  owns_memory_ = mem_ != nullptr;
}

absl::Status IbvMr::Deregister() {
  mr_.reset();
  return absl::OkStatus();
}

absl::Status IbvMr::Reregister() {
  if (!mr_) return absl::FailedPreconditionError("region is deregistered");
  // Register the memory a second time before dropping the old MR, so the pages stay
  // pinned throughout; the old keys die with the old MR.
  MrPtr fresh(ibv_reg_mr(pd_->pd.get(), addr_, length_, ToIbvAccess(access_)));
  if (!fresh) return ErrnoStatus(errno, absl::StrCat("ibv_reg_mr(", length_, " bytes) again"));
  mr_ = std::move(fresh);
  lkey_ = mr_->lkey;
  rkey_ = mr_->rkey;
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> IbvPd::AllocRegion(size_t bytes, uint32_t access,
                                                                 bool huge_pages) {
  if (bytes == 0) return absl::InvalidArgumentError("AllocRegion of 0 bytes");
  if ((access & kRemoteWrite) && !(access & kLocalWrite)) {
    return absl::InvalidArgumentError("kRemoteWrite requires kLocalWrite (as in verbs)");
  }
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* p = MAP_FAILED;
  size_t map_bytes = 0;
  if (huge_pages) {
    map_bytes = (bytes + kHugePageBytes - 1) / kHugePageBytes * kHugePageBytes;
    p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE,
               MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB, -1, 0);
  }
  if (p == MAP_FAILED) {
    map_bytes = (bytes + page - 1) / page * page;
    p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  }
  if (p == MAP_FAILED) return ErrnoStatus(errno, absl::StrCat("mmap(", map_bytes, " bytes)"));
  auto mem = std::make_unique<Mapping>(p, map_bytes);
  MrPtr mr(ibv_reg_mr(core_->pd.get(), p, bytes, ToIbvAccess(access)));
  if (!mr) {
    return ErrnoStatus(errno, absl::StrCat("ibv_reg_mr(", bytes,
                                           " bytes) — check `ulimit -l` (locked memory)"));
  }
  return std::unique_ptr<MemoryRegion>(new IbvMr(core_, std::move(mem), std::move(mr), access));
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> IbvPd::RegisterMemory(void* addr, size_t len,
                                                                    uint32_t access) {
  if (addr == nullptr || len == 0) {
    return absl::InvalidArgumentError("RegisterMemory needs a non-empty buffer");
  }
  if ((access & kRemoteWrite) && !(access & kLocalWrite)) {
    return absl::InvalidArgumentError("kRemoteWrite requires kLocalWrite (as in verbs)");
  }
  MrPtr mr(ibv_reg_mr(core_->pd.get(), addr, len, ToIbvAccess(access)));
  if (!mr) return ErrnoStatus(errno, absl::StrCat("ibv_reg_mr(", len, " bytes)"));
  return std::unique_ptr<MemoryRegion>(new IbvMr(core_, nullptr, std::move(mr), access));
}

int IbvDevice::async_fd() const { return core_->ctx->async_fd; }

int IbvDevice::PollAsyncEvents(AsyncEvent* out, int max) {
  int n = 0;
  while (n < max) {
    ibv_async_event ev;
    errno = 0;
    if (ibv_get_async_event(core_->ctx.get(), &ev) != 0) {
      if (errno == EINTR) continue;
      if (errno != 0 && errno != EAGAIN && errno != EWOULDBLOCK && n == 0) {
        // The device is gone (EIO after DEVICE_FATAL or removal): report it once per call
        // rather than leave a readable fd nobody can drain.
        out[n++] = AsyncEvent{AsyncEventType::kDeviceFatal, 0};
      }
      break;
    }
    AsyncEvent& e = out[n++];
    e.qp_num = 0;
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL: e.type = AsyncEventType::kQpFatal; break;
      case IBV_EVENT_QP_REQ_ERR: e.type = AsyncEventType::kQpRequestError; break;
      case IBV_EVENT_QP_ACCESS_ERR: e.type = AsyncEventType::kQpAccessError; break;
      case IBV_EVENT_PORT_ACTIVE: e.type = AsyncEventType::kPortActive; break;
      case IBV_EVENT_PORT_ERR: e.type = AsyncEventType::kPortError; break;
      case IBV_EVENT_DEVICE_FATAL: e.type = AsyncEventType::kDeviceFatal; break;
      default: e.type = AsyncEventType::kOther; break;
    }
    switch (ev.event_type) {
      case IBV_EVENT_QP_FATAL:
      case IBV_EVENT_QP_REQ_ERR:
      case IBV_EVENT_QP_ACCESS_ERR:
      case IBV_EVENT_COMM_EST:
      case IBV_EVENT_SQ_DRAINED:
      case IBV_EVENT_PATH_MIG:
      case IBV_EVENT_PATH_MIG_ERR:
      case IBV_EVENT_QP_LAST_WQE_REACHED:
        e.qp_num = ev.element.qp->qp_num;
        break;
      default:
        break;
    }
    ibv_ack_async_event(&ev);  // ibv_destroy_qp waits for the QP's events to be acked
  }
  return n;
}

absl::StatusOr<std::unique_ptr<ProtectionDomain>> IbvDevice::CreatePd() {
  auto pd = std::make_shared<PdCore>();
  pd->dev = core_;
  pd->pd.reset(ibv_alloc_pd(core_->ctx.get()));
  if (!pd->pd) return ErrnoStatus(errno, "ibv_alloc_pd");
  return std::unique_ptr<ProtectionDomain>(new IbvPd(std::move(pd)));
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> IbvDevice::CreateCq(int depth) {
  if (depth <= 0) return absl::InvalidArgumentError("CQ depth must be positive");
  auto cq = std::make_shared<CqCore>();
  cq->dev = core_;
  cq->channel.reset(ibv_create_comp_channel(core_->ctx.get()));
  if (!cq->channel) return ErrnoStatus(errno, "ibv_create_comp_channel");
  int fl = ::fcntl(cq->channel->fd, F_GETFL);
  if (fl < 0 || ::fcntl(cq->channel->fd, F_SETFL, fl | O_NONBLOCK) != 0) {
    return ErrnoStatus(errno, "fcntl(completion channel, O_NONBLOCK)");
  }
  cq->cq.reset(ibv_create_cq(core_->ctx.get(), depth, nullptr, cq->channel.get(), 0));
  if (!cq->cq) return ErrnoStatus(errno, absl::StrCat("ibv_create_cq(", depth, ")"));
  return std::unique_ptr<CompletionQueue>(new IbvCq(std::move(cq), depth));
}

// ---------------------------------------------------------------------------------------

IbvCq::IbvCq(std::shared_ptr<CqCore> core, int depth) : core_(std::move(core)) {
  depth_ = depth;
}

int IbvCq::Poll(Completion* out, int max) {
  constexpr int kBatch = 32;
  ibv_wc wc[kBatch];
  int total = 0;
  while (total < max) {
    int want = std::min(kBatch, max - total);
    int n = ibv_poll_cq(core_->cq.get(), want, wc);
    if (n < 0) return total > 0 ? total : -1;
    for (int i = 0; i < n; ++i) {
      Completion& c = out[total + i];
      c.wr_id = wc[i].wr_id;
      c.status = FromIbvStatus(wc[i].status);
      c.opcode = FromIbvOpcode(wc[i].opcode);
      c.byte_len = wc[i].byte_len;
      c.has_imm = (wc[i].wc_flags & IBV_WC_WITH_IMM) != 0;
      c.imm_data = c.has_imm ? ntohl(wc[i].imm_data) : 0;
      c.qp_num = wc[i].qp_num;
      c.vendor_err = wc[i].vendor_err;
    }
    total += n;
    if (n < want) break;
  }
  return total;
}

absl::Status IbvCq::RequestNotify() {
  if (int rc = ibv_req_notify_cq(core_->cq.get(), 0); rc != 0) {
    return ErrnoStatus(rc, "ibv_req_notify_cq");
  }
  return absl::OkStatus();
}

void IbvCq::ConsumeEvents() {
  unsigned int n = 0;
  ibv_cq* cq;
  void* ctx;
  while (ibv_get_cq_event(core_->channel.get(), &cq, &ctx) == 0) ++n;
  if (n > 0) ibv_ack_cq_events(core_->cq.get(), n);
}

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

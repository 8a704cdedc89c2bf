// ibverbs provider internals: RAII owners of rdma-core objects and the classes implementing
// device.h. Each child holds a shared_ptr to its parent's owner, declared before its own
// handle, so a child's verbs object is always destroyed before its parent's.
// Thread-safety: as msg/rdma/verbs/device.h.
#ifndef MSGR_MSG_RDMA_VERBS_IBVERBS_IBV_OBJECTS_H_
#define MSGR_MSG_RDMA_VERBS_IBVERBS_IBV_OBJECTS_H_

#include <infiniband/verbs.h>

#include <memory>

#include "msg/rdma/verbs/device.h"

namespace msgr {
namespace verbs {
namespace ibverbs {

struct ContextDeleter {
  void operator()(ibv_context* c) const { ibv_close_device(c); }
};
struct PdDeleter {
  void operator()(ibv_pd* p) const { ibv_dealloc_pd(p); }
};
struct MrDeleter {
  void operator()(ibv_mr* m) const { ibv_dereg_mr(m); }
};
struct ChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqDeleter {
  void operator()(ibv_cq* c) const { ibv_destroy_cq(c); }
};
struct QpDeleter {
  void operator()(ibv_qp* q) const { ibv_destroy_qp(q); }
};
using ContextPtr = std::unique_ptr<ibv_context, ContextDeleter>;
using PdPtr = std::unique_ptr<ibv_pd, PdDeleter>;
using MrPtr = std::unique_ptr<ibv_mr, MrDeleter>;
using ChannelPtr = std::unique_ptr<ibv_comp_channel, ChannelDeleter>;
using CqPtr = std::unique_ptr<ibv_cq, CqDeleter>;
using QpPtr = std::unique_ptr<ibv_qp, QpDeleter>;

struct ContextCore {
  ContextPtr ctx;
  PortAttr port;
};

struct PdCore {
  std::shared_ptr<ContextCore> dev;
  PdPtr pd;
};

struct CqCore {
  std::shared_ptr<ContextCore> dev;
  ChannelPtr channel;
  CqPtr cq;  // Destroyed before the channel.
};

// Memory owned by a region (anonymous mapping), released after deregistration.
class Mapping {
 public:
  Mapping() = default;
  Mapping(void* addr, size_t bytes) : addr_(addr), bytes_(bytes) {}
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;
  ~Mapping();
  void* addr() const { return addr_; }

 private:
  void* addr_ = nullptr;
  size_t bytes_ = 0;
};

class IbvMr : public MemoryRegion {
 public:
  IbvMr(std::shared_ptr<PdCore> pd, std::unique_ptr<Mapping> mem, MrPtr mr, uint32_t access);
  absl::Status Deregister() override;
  bool registered() const override { return mr_ != nullptr; }
  absl::Status Reregister() override;

 private:
  std::shared_ptr<PdCore> pd_;
  std::unique_ptr<Mapping> mem_;  // Null for caller memory.
  MrPtr mr_;                      // Deregistered first.
};

class IbvCq : public CompletionQueue {
 public:
  IbvCq(std::shared_ptr<CqCore> core, int depth);
  int Poll(Completion* out, int max) override;
  int event_fd() const override { return core_->channel->fd; }
  absl::Status RequestNotify() override;
  void ConsumeEvents() override;
  const std::shared_ptr<CqCore>& core() const { return core_; }

 private:
  std::shared_ptr<CqCore> core_;
};

class IbvQp : public QueuePair {
 public:
  IbvQp(std::shared_ptr<PdCore> pd, std::shared_ptr<CqCore> send_cq,
        std::shared_ptr<CqCore> recv_cq, QpPtr qp, const QpConfig& config, uint32_t psn,
        uint32_t max_inline);
  QpEndpoint local_endpoint() const override;
  absl::Status ModifyToInit();
  absl::Status ModifyToRtr(const QpEndpoint& remote) override;
  absl::Status ModifyToRts() override;
  absl::Status ModifyToError() override;
  QpState state() const override;
  absl::Status PostSend(absl::Span<const SendWr> wrs, size_t* posted) override;
  absl::Status PostRecv(absl::Span<const RecvWr> wrs, size_t* posted) override;
  absl::Status Close() override;
  // The path MTU (bytes) the QP runs at, as the device reports it (ibv_query_qp): after
  // ModifyToRtr, the smaller of both ports' active MTUs. For tests and diagnostics.
  absl::StatusOr<uint32_t> QueryPathMtu() const;

 private:
  absl::Status ValidateSendWr(const SendWr& wr) const;

  std::shared_ptr<PdCore> pd_;
  std::shared_ptr<CqCore> send_cq_;
  std::shared_ptr<CqCore> recv_cq_;
  QpPtr qp_;  // Destroyed before the CQs and PD it uses.
  const QpConfig config_;
  const uint32_t psn_;
};

class IbvPd : public ProtectionDomain {
 public:
  explicit IbvPd(std::shared_ptr<PdCore> core) : core_(std::move(core)) {}
  absl::StatusOr<std::unique_ptr<MemoryRegion>> AllocRegion(size_t bytes, uint32_t access,
                                                            bool huge_pages) override;
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t len,
                                                               uint32_t access) override;
  absl::StatusOr<std::unique_ptr<QueuePair>> CreateQp(const QpConfig& config) override;

 private:
  std::shared_ptr<PdCore> core_;
};

class IbvDevice : public Device {
 public:
  IbvDevice(std::shared_ptr<ContextCore> core, DeviceAttr attr)
      : core_(std::move(core)), attr_(std::move(attr)) {}
  const DeviceAttr& attr() const override { return attr_; }
  const PortAttr& port() const override { return core_->port; }
  absl::StatusOr<std::unique_ptr<ProtectionDomain>> CreatePd() override;
  absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override;
  int async_fd() const override;
  int PollAsyncEvents(AsyncEvent* out, int max) override;

 private:
  std::shared_ptr<ContextCore> core_;
  DeviceAttr attr_;
};

// Mapping helpers shared by the provider's files.
WcStatus FromIbvStatus(ibv_wc_status s);
WcOpcode FromIbvOpcode(ibv_wc_opcode op);
int ToIbvAccess(uint32_t access);

}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_IBVERBS_IBV_OBJECTS_H_

// Soft provider internals: the device core (region table, listening socket, service thread,
// QP registry), protection domains and memory regions.
//
// Threads: user threads call the public objects; one service thread per open device accepts
// peer connections and handles control messages (SEND payloads, WRITE_WITH_IMM
// notifications, ACK/NAK, region-fd requests). RDMA WRITE/READ data is copied by the
// initiating user thread directly between its memory and the peer's shared region.
//
// Thread-safety: DeviceCore is fully thread-safe (mu_ guards its maps; the region table is
// lock-free for readers).
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_SOFT_DEVICE_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_SOFT_DEVICE_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "msg/rdma/verbs/device.h"
#include "msg/rdma/verbs/soft/region_table.h"
#include "msg/rdma/verbs/soft/wire.h"

namespace msgr {
namespace verbs {
namespace soft {

class QpCore;

// One Unix-socket connection between two soft devices, bound to one local QP. An outgoing
// connection is a QP's link to its peer (requests out, responses in); an incoming one is the
// peer QP's link to us (requests in, responses out).
struct Conn {
  Conn(int fd, bool outgoing) : fd(fd), outgoing(outgoing) {}
  ~Conn();
  const int fd;
  const bool outgoing;
  absl::Mutex write_mu;       // One writer at a time per direction.
  std::weak_ptr<QpCore> qp;   // Set before the conn is added (outgoing) or on kHello.
};

class DeviceCore : public std::enable_shared_from_this<DeviceCore> {
 public:
  static absl::StatusOr<std::shared_ptr<DeviceCore>> Create(const DeviceOptions& options);
  ~DeviceCore();

  const std::string& locator() const { return locator_; }

  // Regions. `memfd` (or -1 for unshared caller memory) is owned by the device afterwards.
  absl::StatusOr<uint32_t> RegisterRegion(uint32_t pd_id, void* addr, size_t len,
                                          uint32_t access, int memfd);
  void DeregisterRegion(uint32_t key);
  bool LookupLocal(uint32_t key, RegionView* out) const { return table_.Lookup(key, out); }
  // A dup of the memfd behind `key` (caller closes it), or -1.
  int DupRegionFd(uint32_t key, uint64_t* uid);
  int table_fd() const { return table_.fd(); }

  uint32_t NewPdId() { return next_pd_id_.fetch_add(1); }
  uint32_t NewQpNum() { return next_qp_num_.fetch_add(1) & 0xffffff; }
  void AddQp(uint32_t qp_num, const std::shared_ptr<QpCore>& qp);
  void RemoveQp(uint32_t qp_num);
  std::shared_ptr<QpCore> FindQp(uint32_t qp_num);

  // Hands a connection to the service thread.
  absl::Status AddConn(const std::shared_ptr<Conn>& conn);

  // Asynchronous events: queued by QPs (e.g. a peer's access violation), read by the owner.
  void PushAsyncEvent(const AsyncEvent& ev);
  int PollAsyncEvents(AsyncEvent* out, int max);
  void DropAsyncEvents(uint32_t qp_num);  // the QP is destroyed
  int async_fd() const { return async_fd_; }
  // DeviceOptions::soft_async_event_delay (tests): QP events trail their completions.
  absl::Duration async_event_delay() const { return async_event_delay_; }

  // Service thread control (called by SoftDevice).
  void ServiceLoop();
  void StopService();

 private:
  DeviceCore() = default;
  void Accept();
  void DropConn(int fd);
  // Handles one message on `conn`; false when the connection is finished.
  bool HandleMessage(const std::shared_ptr<Conn>& conn);
  bool HandleHello(const std::shared_ptr<Conn>& conn, const WireHeader& hdr);

  struct LocalSlot {
    bool used = false;
    uint8_t gen = 0;
    uint32_t key = 0;
    uint64_t uid = 0;
    int fd = -1;
  };

  std::string locator_;
  RegionTable table_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int async_fd_ = -1;  // eventfd: readable while async_events_ is not empty
  absl::Duration async_event_delay_ = absl::ZeroDuration();
  std::atomic<bool> stop_{false};
  std::atomic<uint32_t> next_pd_id_{1};
  std::atomic<uint32_t> next_qp_num_{0x100};

  mutable absl::Mutex mu_;
  std::vector<LocalSlot> slots_ ABSL_GUARDED_BY(mu_);
  std::deque<uint32_t> free_slots_ ABSL_GUARDED_BY(mu_);
  uint64_t next_uid_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint32_t, std::weak_ptr<QpCore>> qps_ ABSL_GUARDED_BY(mu_);
  std::map<int, std::shared_ptr<Conn>> conns_ ABSL_GUARDED_BY(mu_);
  std::deque<AsyncEvent> async_events_ ABSL_GUARDED_BY(mu_);
};

struct PdCore {
  std::shared_ptr<DeviceCore> dev;
  uint32_t id = 0;
};

class SoftMr : public MemoryRegion {
 public:
  static absl::StatusOr<std::unique_ptr<MemoryRegion>> Alloc(std::shared_ptr<PdCore> pd,
                                                             size_t bytes, uint32_t access,
                                                             bool huge);
  static absl::StatusOr<std::unique_ptr<MemoryRegion>> Register(std::shared_ptr<PdCore> pd,
                                                                void* addr, size_t len,
                                                                uint32_t access);
  ~SoftMr() override;
  absl::Status Deregister() override;
  bool registered() const override { return registered_.load(); }
  absl::Status Reregister() override;

 private:
  explicit SoftMr(std::shared_ptr<PdCore> pd) : pd_(std::move(pd)) {}
  std::shared_ptr<PdCore> pd_;
  size_t map_bytes_ = 0;  // Non-zero when we own a mapping.
  std::atomic<bool> registered_{false};
};

class SoftPd : public ProtectionDomain {
 public:
  explicit SoftPd(std::shared_ptr<PdCore> core) : core_(std::move(core)) {}
  absl::StatusOr<std::unique_ptr<MemoryRegion>> AllocRegion(size_t bytes, uint32_t access,
                                                            bool huge_pages) override;
  absl::StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(void* addr, size_t len,
                                                               uint32_t access) override;
  absl::StatusOr<std::unique_ptr<QueuePair>> CreateQp(const QpConfig& config) override;

 private:
  std::shared_ptr<PdCore> core_;
};

class SoftDevice : public Device {
 public:
  static absl::StatusOr<std::unique_ptr<Device>> Open(const DeviceOptions& options);
  ~SoftDevice() override;
  const DeviceAttr& attr() const override { return attr_; }
  const PortAttr& port() const override { return port_; }
  absl::StatusOr<std::unique_ptr<ProtectionDomain>> CreatePd() override;
  absl::StatusOr<std::unique_ptr<CompletionQueue>> CreateCq(int depth) override;
  int async_fd() const override { return core_->async_fd(); }
  int PollAsyncEvents(AsyncEvent* out, int max) override {
    return core_->PollAsyncEvents(out, max);
  }

 private:
  explicit SoftDevice(std::shared_ptr<DeviceCore> core);
  std::shared_ptr<DeviceCore> core_;
  DeviceAttr attr_;
  PortAttr port_;
  std::thread service_;  // Runs core_->ServiceLoop(); joined before core_ is released.
};

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_SOFT_DEVICE_H_

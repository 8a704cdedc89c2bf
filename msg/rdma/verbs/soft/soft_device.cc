#include "msg/rdma/verbs/soft/soft_device.h"

#include <pthread.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "msg/base/errno_status.h"
#include "msg/rdma/verbs/soft/soft_cq.h"
#include "msg/rdma/verbs/soft/provider.h"
#include "msg/rdma/verbs/soft/soft_qp.h"

namespace msgr {
namespace verbs {
namespace soft {

namespace {

constexpr int kMaxMessagesPerWake = 64;
constexpr size_t kHugePageBytes = 2u << 20;
constexpr int kMaxCqDepth = 1 << 20;
constexpr uint32_t kMaxQpWr = 16384;
constexpr uint32_t kMaxSge = 32;
constexpr size_t kMaxAsyncEvents = 1024;
std::atomic<uint32_t> g_device_counter{0};

size_t RoundUp(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Conn::~Conn() { ::close(fd); }

// ---------------------------------------------------------------------------------------
// DeviceCore setup and registries.

absl::StatusOr<std::shared_ptr<DeviceCore>> DeviceCore::Create(const DeviceOptions& options) {
  std::shared_ptr<DeviceCore> core(new DeviceCore());
  absl::StatusOr<RegionTable> table = RegionTable::Create();
  if (!table.ok()) return table.status();
  core->table_ = std::move(*table);
  {
    absl::MutexLock l(&core->mu_);
    core->slots_.resize(kMaxRegions);
    for (uint32_t i = 0; i < kMaxRegions; ++i) core->free_slots_.push_back(i);
  }
  std::random_device rd;
  core->locator_ = absl::StrFormat("msgr-soft.%s.%d.%u.%08x", HostScope(), ::getpid(),
                                   g_device_counter.fetch_add(1), rd());
  absl::StatusOr<int> lfd = ListenAbstract(core->locator_);
  if (!lfd.ok()) return lfd.status();
  core->listen_fd_ = *lfd;
  core->epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (core->epoll_fd_ < 0) return ErrnoStatus(errno, "soft: epoll_create1");
  core->wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (core->wake_fd_ < 0) return ErrnoStatus(errno, "soft: eventfd");
  core->async_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (core->async_fd_ < 0) return ErrnoStatus(errno, "soft: eventfd (async events)");
  core->async_event_delay_ = options.soft_async_event_delay;
  for (int fd : {core->listen_fd_, core->wake_fd_}) {
    struct epoll_event ev = {};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(core->epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) {
      return ErrnoStatus(errno, "soft: epoll_ctl");
    }
  }
  return core;
}

DeviceCore::~DeviceCore() {
  {
    absl::MutexLock l(&mu_);
    for (LocalSlot& s : slots_) {
      if (s.fd >= 0) ::close(s.fd);
      s.fd = -1;
    }
    conns_.clear();
  }
  if (listen_fd_ >= 0) ::close(listen_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (wake_fd_ >= 0) ::close(wake_fd_);
  if (async_fd_ >= 0) ::close(async_fd_);
}

absl::StatusOr<uint32_t> DeviceCore::RegisterRegion(uint32_t pd_id, void* addr, size_t len,
                                                    uint32_t access, int memfd) {
  absl::MutexLock l(&mu_);
  if (free_slots_.empty()) {
    if (memfd >= 0) ::close(memfd);
    return absl::ResourceExhaustedError(
        absl::StrCat("soft: all ", kMaxRegions, " memory-region slots are in use"));
  }
  uint32_t slot = free_slots_.front();
  free_slots_.pop_front();
  LocalSlot& s = slots_[slot];
  s.used = true;
  s.gen = static_cast<uint8_t>(s.gen + 1);
  s.key = RegionTable::MakeKey(slot, s.gen);
  s.uid = next_uid_++;
  s.fd = memfd;
  RegionView v;
  v.key = s.key;
  v.access = access;
  v.pd_id = pd_id;
  v.base = reinterpret_cast<uint64_t>(addr);
  v.length = len;
  v.uid = s.uid;
  table_.Publish(slot, v);
  return s.key;
}

void DeviceCore::DeregisterRegion(uint32_t key) {
  absl::MutexLock l(&mu_);
  uint32_t slot = RegionTable::SlotOf(key);
  if (slot >= kMaxRegions || !slots_[slot].used || slots_[slot].key != key) return;
  table_.Revoke(slot);
  LocalSlot& s = slots_[slot];
  if (s.fd >= 0) ::close(s.fd);
  s.fd = -1;
  s.used = false;
  s.key = 0;
  free_slots_.push_back(slot);  // FIFO: a slot is reused as late as possible.
}

int DeviceCore::DupRegionFd(uint32_t key, uint64_t* uid) {
  absl::MutexLock l(&mu_);
  uint32_t slot = RegionTable::SlotOf(key);
  if (key < 0x100 || slot >= kMaxRegions) return -1;
  const LocalSlot& s = slots_[slot];
  if (!s.used || s.key != key || s.fd < 0) return -1;
  *uid = s.uid;
  return ::fcntl(s.fd, F_DUPFD_CLOEXEC, 0);
}

void DeviceCore::AddQp(uint32_t qp_num, const std::shared_ptr<QpCore>& qp) {
  absl::MutexLock l(&mu_);
  qps_[qp_num] = qp;
}

void DeviceCore::RemoveQp(uint32_t qp_num) {
  absl::MutexLock l(&mu_);
  qps_.erase(qp_num);
}

std::shared_ptr<QpCore> DeviceCore::FindQp(uint32_t qp_num) {
  absl::MutexLock l(&mu_);
  auto it = qps_.find(qp_num);
  return it == qps_.end() ? nullptr : it->second.lock();
}

absl::Status DeviceCore::AddConn(const std::shared_ptr<Conn>& conn) {
  absl::MutexLock l(&mu_);
  if (stop_.load()) return absl::FailedPreconditionError("soft: device is closed");
  conns_[conn->fd] = conn;
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  ev.data.fd = conn->fd;
  if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, conn->fd, &ev) != 0) {
    conns_.erase(conn->fd);
    return ErrnoStatus(errno, "soft: epoll_ctl(add connection)");
  }
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// Asynchronous events. The eventfd counts nothing: it is non-zero exactly while the queue
// is not empty (both change under mu_).

void DeviceCore::PushAsyncEvent(const AsyncEvent& ev) {
  absl::MutexLock l(&mu_);
  // Bounded like an HCA's event queue: an owner that never reads loses the oldest.
  if (async_events_.size() >= kMaxAsyncEvents) async_events_.pop_front();
  async_events_.push_back(ev);
  const uint64_t one = 1;
  (void)!::write(async_fd_, &one, sizeof(one));
}

void DeviceCore::DropAsyncEvents(uint32_t qp_num) {
  absl::MutexLock l(&mu_);
  const auto gone = std::remove_if(async_events_.begin(), async_events_.end(),
                                   [&](const AsyncEvent& e) { return e.qp_num == qp_num; });
  if (gone == async_events_.end()) return;
  async_events_.erase(gone, async_events_.end());
  if (async_events_.empty()) {
    uint64_t v;
    (void)!::read(async_fd_, &v, sizeof(v));
  }
}

int DeviceCore::PollAsyncEvents(AsyncEvent* out, int max) {
  absl::MutexLock l(&mu_);
  int n = 0;
  while (n < max && !async_events_.empty()) {
    out[n++] = async_events_.front();
    async_events_.pop_front();
  }
  if (async_events_.empty()) {
    uint64_t v;
    (void)!::read(async_fd_, &v, sizeof(v));
  }
  return n;
}

// ---------------------------------------------------------------------------------------
// Service thread.

void DeviceCore::StopService() {
  stop_.store(true);
  uint64_t one = 1;
  ssize_t w = ::write(wake_fd_, &one, sizeof(one));
  (void)w;
}

void DeviceCore::ServiceLoop() {
  struct epoll_event events[32];
  while (!stop_.load()) {
    int n = ::epoll_wait(epoll_fd_, events, 32, -1);
    if (n < 0) {
      if (errno == EINTR) continue;
      std::perror("soft: epoll_wait");
      break;
    }
    for (int i = 0; i < n && !stop_.load(); ++i) {
      int fd = events[i].data.fd;
      if (fd == wake_fd_) continue;
      if (fd == listen_fd_) {
        Accept();
        continue;
      }
      std::shared_ptr<Conn> conn;
      {
        absl::MutexLock l(&mu_);
        auto it = conns_.find(fd);
        if (it != conns_.end()) conn = it->second;
      }
      if (!conn) continue;
      for (int m = 0; m < kMaxMessagesPerWake; ++m) {
        char b;
        ssize_t r = ::recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) break;
        if (r <= 0 || !HandleMessage(conn)) {
          DropConn(fd);
          std::shared_ptr<QpCore> qp = conn->qp.lock();
          if (qp) qp->OnPeerGone();
          break;
        }
      }
    }
  }
  // Closing every connection tells the peers our QPs are gone.
  std::map<int, std::shared_ptr<Conn>> conns;
  {
    absl::MutexLock l(&mu_);
    conns.swap(conns_);
  }
  for (auto& kv : conns) ::shutdown(kv.first, SHUT_RDWR);
}

void DeviceCore::Accept() {
  int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
  if (fd < 0) return;
  // Abstract sockets have no file permissions: only processes of our own user may connect
  // (an rkey is a capability; it must not leak to other users).
  struct ucred cred;
  socklen_t len = sizeof(cred);
  if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0 || cred.uid != ::getuid()) {
    std::fprintf(stderr, "soft: refusing a connection from another user\n");
    ::close(fd);
    return;
  }
  absl::Status st = AddConn(std::make_shared<Conn>(fd, /*outgoing=*/false));
  if (!st.ok()) std::fprintf(stderr, "%s\n", st.ToString().c_str());
}

void DeviceCore::DropConn(int fd) {
  absl::MutexLock l(&mu_);
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  conns_.erase(fd);
}

bool DeviceCore::HandleMessage(const std::shared_ptr<Conn>& conn) {
  WireHeader hdr;
  int fd = -1;
  if (!RecvHeader(conn->fd, &hdr, &fd).ok()) return false;
  std::shared_ptr<QpCore> qp = conn->qp.lock();
  auto type = static_cast<MsgType>(hdr.type);
  if (conn->outgoing) {
    if (!qp) {
      if (fd >= 0) ::close(fd);
      return false;
    }
    qp->OnResponse(hdr, fd);
    return true;
  }
  if (type == MsgType::kHello) {
    if (fd >= 0) ::close(fd);
    return HandleHello(conn, hdr);
  }
  if (!qp) {  // Our QP was destroyed: the peer sees EOF.
    if (fd >= 0) ::close(fd);
    return false;
  }
  return qp->OnRequest(conn, hdr, fd);
}

bool DeviceCore::HandleHello(const std::shared_ptr<Conn>& conn, const WireHeader& hdr) {
  std::shared_ptr<QpCore> qp = FindQp(hdr.a);
  WireHeader rep;
  if (!qp || !conn->qp.expired()) {
    rep.type = static_cast<uint32_t>(MsgType::kHelloErr);
    rep.status = 1;
    absl::MutexLock l(&conn->write_mu);
    (void)SendMessage(conn->fd, rep);
    return false;
  }
  conn->qp = qp;
  qp->AddIncoming(conn);
  rep.type = static_cast<uint32_t>(MsgType::kHelloOk);
  rep.a = qp->pd_id();
  {
    absl::MutexLock l(&conn->write_mu);
    if (!SendMessage(conn->fd, rep, nullptr, 0, table_.fd()).ok()) return false;
  }
  return qp->SendInbox(conn);
}

// ---------------------------------------------------------------------------------------
// Memory regions.

absl::StatusOr<std::unique_ptr<MemoryRegion>> SoftMr::Alloc(std::shared_ptr<PdCore> pd,
                                                            size_t bytes, uint32_t access,
                                                            bool huge) {
  if (bytes == 0) return absl::InvalidArgumentError("soft: AllocRegion of 0 bytes");
  if ((access & kRemoteWrite) && !(access & kLocalWrite)) {
    return absl::InvalidArgumentError("kRemoteWrite requires kLocalWrite (as in verbs)");
  }
  size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t map_bytes = RoundUp(bytes, huge ? kHugePageBytes : page);
  absl::StatusOr<int> fd = CreateMemfd("msgr-soft-region", map_bytes, huge);
  if (!fd.ok()) return fd.status();
  // The memfd's pages exist (CreateMemfd allocates them); MAP_POPULATE maps them now,
  // during registration, as ibv_reg_mr faults in what it pins -- not one page fault at a
  // time on the data path. (Unlike ibv_reg_mr nothing is locked: the pages may swap.)
  void* p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE,
                   *fd, 0);
  if (p == MAP_FAILED && huge) {
    // Hugetlb memfds reserve their pages here, not in ftruncate: none configured is seen
    // only now. Fall back to ordinary pages, as CreateMemfd does when it can tell.
    ::close(*fd);
    map_bytes = RoundUp(bytes, page);
    fd = CreateMemfd("msgr-soft-region", map_bytes, false);
    if (!fd.ok()) return fd.status();
    p = ::mmap(nullptr, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, *fd, 0);
  }
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(*fd);
    return ErrnoStatus(err, absl::StrCat("soft: mmap(", map_bytes, " bytes of memfd)"));
  }
  std::unique_ptr<SoftMr> mr(new SoftMr(pd));
  mr->addr_ = p;
  mr->length_ = bytes;
  mr->map_bytes_ = map_bytes;
  mr->access_ = access;
  mr->owns_memory_ = true;
  absl::StatusOr<uint32_t> key = pd->dev->RegisterRegion(pd->id, p, bytes, access, *fd);
  if (!key.ok()) return key.status();  // ~SoftMr unmaps.
  mr->lkey_ = mr->rkey_ = *key;
  mr->registered_.store(true);
  return std::unique_ptr<MemoryRegion>(std::move(mr));
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> SoftMr::Register(std::shared_ptr<PdCore> pd,
                                                               void* addr, size_t len,
                                                               uint32_t access) {
  if (addr == nullptr || len == 0) {
    return absl::InvalidArgumentError("soft: RegisterMemory needs a non-empty buffer");
  }
  if (access & ~static_cast<uint32_t>(kLocalWrite)) {
    return absl::InvalidArgumentError(
        "soft: caller memory can only be registered for local access; memory a peer may "
        "access must come from AllocRegion (it has to be shared memory)");
  }
  std::unique_ptr<SoftMr> mr(new SoftMr(pd));
  mr->addr_ = addr;
  mr->length_ = len;
  mr->access_ = access;
  absl::StatusOr<uint32_t> key = pd->dev->RegisterRegion(pd->id, addr, len, access, -1);
  if (!key.ok()) return key.status();
  mr->lkey_ = mr->rkey_ = *key;
  mr->registered_.store(true);
  return std::unique_ptr<MemoryRegion>(std::move(mr));
}

SoftMr::~SoftMr() {
  (void)Deregister();
  if (map_bytes_ > 0) ::munmap(addr_, map_bytes_);
}

absl::Status SoftMr::Deregister() {
  if (registered_.exchange(false)) pd_->dev->DeregisterRegion(lkey_);
  return absl::OkStatus();
}

absl::Status SoftMr::Reregister() {
  if (!registered_.load()) return absl::FailedPreconditionError("soft: region is deregistered");
  // The new registration needs its own descriptor of the shared memory (peers map it
  // through the fd); Deregister closes the old one.
  int fd = -1;
  if (owns_memory_) {
    uint64_t uid = 0;
    fd = pd_->dev->DupRegionFd(lkey_, &uid);
    if (fd < 0) return absl::InternalError("soft: cannot duplicate the region's memfd");
  }
  pd_->dev->DeregisterRegion(lkey_);
  absl::StatusOr<uint32_t> key = pd_->dev->RegisterRegion(pd_->id, addr_, length_, access_, fd);
  if (!key.ok()) {
    registered_.store(false);
    if (fd >= 0) ::close(fd);
    return key.status();
  }
  lkey_ = rkey_ = *key;
  return absl::OkStatus();
}

// ---------------------------------------------------------------------------------------
// PD and device.

absl::StatusOr<std::unique_ptr<MemoryRegion>> SoftPd::AllocRegion(size_t bytes,
                                                                  uint32_t access,
                                                                  bool huge_pages) {
  return SoftMr::Alloc(core_, bytes, access, huge_pages);
}

absl::StatusOr<std::unique_ptr<MemoryRegion>> SoftPd::RegisterMemory(void* addr, size_t len,
                                                                     uint32_t access) {
  return SoftMr::Register(core_, addr, len, access);
}

absl::StatusOr<std::unique_ptr<QueuePair>> SoftPd::CreateQp(const QpConfig& config) {
  auto* scq = dynamic_cast<SoftCq*>(config.send_cq);
  auto* rcq = dynamic_cast<SoftCq*>(config.recv_cq);
  if (scq == nullptr || rcq == nullptr) {
    return absl::InvalidArgumentError("soft: QpConfig needs send_cq and recv_cq of a soft device");
  }
  if (config.max_send_wr == 0 || config.max_send_wr > kMaxQpWr || config.max_recv_wr == 0 ||
      config.max_recv_wr > kMaxQpWr) {
    return absl::InvalidArgumentError(
        absl::StrCat("soft: max_send_wr/max_recv_wr must be in [1, ", kMaxQpWr, "]"));
  }
  if (config.max_send_sge > kMaxSge || config.max_recv_sge > kMaxSge) {
    return absl::InvalidArgumentError(absl::StrCat("soft: at most ", kMaxSge, " SGEs"));
  }
  absl::StatusOr<SharedRq> rq = SharedRq::Create(config.max_recv_wr);
  if (!rq.ok()) return rq.status();
  std::random_device rd;
  auto core = std::make_shared<QpCore>(core_, scq->core(), rcq->core(), std::move(*rq), config,
                                       core_->dev->NewQpNum(), rd() & 0xffffff);
  core_->dev->AddQp(core->qp_num(), core);
  return std::unique_ptr<QueuePair>(new SoftQp(std::move(core)));
}

absl::StatusOr<std::unique_ptr<Device>> SoftDevice::Open(const DeviceOptions& options) {
  absl::StatusOr<std::shared_ptr<DeviceCore>> core = DeviceCore::Create(options);
  if (!core.ok()) return core.status();
  return std::unique_ptr<Device>(new SoftDevice(std::move(*core)));
}

SoftDevice::SoftDevice(std::shared_ptr<DeviceCore> core) : core_(std::move(core)) {
  attr_.name = "soft";
  attr_.provider = "soft";
  attr_.max_mr_size = uint64_t{1} << 40;
  attr_.max_qp = 1 << 16;
  attr_.max_qp_wr = kMaxQpWr;
  attr_.max_sge = kMaxSge;
  attr_.max_cqe = kMaxCqDepth;
  attr_.max_mr = kMaxRegions;
  port_.port_num = 1;
  port_.active_mtu = 4096;
  service_ = std::thread([c = core_.get()] {
    pthread_setname_np(pthread_self(), "soft-hca");
    c->ServiceLoop();
  });
}

SoftDevice::~SoftDevice() {
  core_->StopService();
  service_.join();
}

absl::StatusOr<std::unique_ptr<ProtectionDomain>> SoftDevice::CreatePd() {
  auto pd = std::make_shared<PdCore>();
  pd->dev = core_;
  pd->id = core_->NewPdId();
  return std::unique_ptr<ProtectionDomain>(new SoftPd(std::move(pd)));
}

absl::StatusOr<std::unique_ptr<CompletionQueue>> SoftDevice::CreateCq(int depth) {
  if (depth > kMaxCqDepth) {
    return absl::InvalidArgumentError(absl::StrCat("soft: CQ depth above ", kMaxCqDepth));
  }
  absl::StatusOr<std::shared_ptr<CqCore>> cq = CqCore::Create(depth);
  if (!cq.ok()) return cq.status();
  return std::unique_ptr<CompletionQueue>(new SoftCq(std::move(*cq), depth));
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

namespace msgr {
namespace verbs {
namespace soft {

absl::StatusOr<std::unique_ptr<Device>> OpenSoftDevice(const DeviceOptions& options) {
  return SoftDevice::Open(options);
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

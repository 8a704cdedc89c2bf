#include "msg/rdma/verbs/soft/shared_queues.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <type_traits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"
#include "msg/rdma/verbs/soft/wire.h"

namespace msgr {
namespace verbs {
namespace soft {

static_assert(std::is_trivially_copyable_v<Completion>, "completions are copied between processes");

namespace {

constexpr size_t kHeaderBytes = 256;  // room for either header, slots start cache-aligned

void InitRobustMutex(pthread_mutex_t* m) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  pthread_mutexattr_setpshared(&a, PTHREAD_PROCESS_SHARED);
  pthread_mutexattr_setrobust(&a, PTHREAD_MUTEX_ROBUST);
  pthread_mutex_init(m, &a);
  pthread_mutexattr_destroy(&a);
}

// Holds a robust mutex; takes it over from a holder that died (whatever that one did is
// either published -- `tail`/`head` moved -- or not: nothing to repair).
class ShmLock {
 public:
  explicit ShmLock(pthread_mutex_t* m) : m_(m) {
    if (pthread_mutex_lock(m_) == EOWNERDEAD) pthread_mutex_consistent(m_);
  }
  ~ShmLock() { pthread_mutex_unlock(m_); }
  ShmLock(const ShmLock&) = delete;
  ShmLock& operator=(const ShmLock&) = delete;

 private:
  pthread_mutex_t* m_;
};

}  // namespace

// What both queues' pages start with; slots follow at kHeaderBytes.
struct QueueHeader {
  pthread_mutex_t mu;
  uint64_t capacity;  // for peers; the owner keeps its own copy
  std::atomic<uint64_t> head;
  std::atomic<uint64_t> tail;
};

struct SharedCq::Header : QueueHeader {
  std::atomic<uint32_t> armed;
  std::atomic<uint32_t> overrun;
};

struct SharedRq::Header : QueueHeader {
  std::atomic<uint32_t> open;
};

namespace {

// A new zeroed page for `capacity` slots of `Slot` behind an initialized `H`.
template <typename H, typename Slot>
absl::StatusOr<SharedPage> NewQueuePage(const char* name, size_t capacity) {
  absl::StatusOr<SharedPage> page =
      SharedPage::Create(name, kHeaderBytes + capacity * sizeof(Slot));
  if (!page.ok()) return page.status();
  auto* h = new (page->data()) H();  // value-initialized: zeroes
  InitRobustMutex(&h->mu);
  h->capacity = capacity;
  return page;
}

// A peer's page: the capacity its header states, if the page holds that many `Slot`s.
template <typename Slot>
absl::StatusOr<size_t> PeerCapacity(const SharedPage& page) {
  const uint64_t capacity = reinterpret_cast<const QueueHeader*>(page.data())->capacity;
  if (capacity == 0 || capacity > (page.bytes() - kHeaderBytes) / sizeof(Slot)) {
    return absl::InvalidArgumentError("soft: a peer's queue page does not hold its capacity");
  }
  return static_cast<size_t>(capacity);
}

}  // namespace

static_assert(sizeof(SharedCq::Header) <= kHeaderBytes && sizeof(SharedRq::Header) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
                  std::atomic<uint32_t>::is_always_lock_free,
              "shared between processes: must be lock-free");

// ---------------------------------------------------------------------------------------
// SharedPage

SharedPage::SharedPage(SharedPage&& o) noexcept : fd_(o.fd_), base_(o.base_), bytes_(o.bytes_) {
  o.fd_ = -1;
  o.base_ = nullptr;
  o.bytes_ = 0;
}

SharedPage& SharedPage::operator=(SharedPage&& o) noexcept {
  std::swap(fd_, o.fd_);  // ours is released with `o`
  std::swap(base_, o.base_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

SharedPage::~SharedPage() {
  if (base_ != nullptr) ::munmap(base_, bytes_);
  if (fd_ >= 0) ::close(fd_);
}

absl::StatusOr<SharedPage> SharedPage::Create(const char* name, size_t bytes) {
  absl::StatusOr<int> fd = CreateMemfd(name, bytes, /*huge=*/false);
  if (!fd.ok()) return fd.status();
  return Attach(*fd, bytes);
}

absl::StatusOr<SharedPage> SharedPage::Attach(int fd, size_t min_bytes) {
  struct stat sb;
  if (::fstat(fd, &sb) != 0 || static_cast<size_t>(sb.st_size) < min_bytes) {
    ::close(fd);
    return absl::InvalidArgumentError(
        absl::StrCat("soft: shared queue page smaller than ", min_bytes, " bytes"));
  }
  const size_t bytes = static_cast<size_t>(sb.st_size);
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "soft: mmap of a shared queue");
  }
  SharedPage page;
  page.fd_ = fd;
  page.base_ = static_cast<uint8_t*>(p);
  page.bytes_ = bytes;
  return page;
}

// ---------------------------------------------------------------------------------------
// SharedCq

SharedCq::SharedCq(SharedPage page, int efd, size_t capacity) noexcept
    : page_(std::move(page)), efd_(efd), capacity_(capacity) {}

SharedCq::SharedCq(SharedCq&& o) noexcept
    : page_(std::move(o.page_)),
      efd_(o.efd_),
      capacity_(o.capacity_),
      overrun_logged_(o.overrun_logged_) {
  o.efd_ = -1;
}

SharedCq& SharedCq::operator=(SharedCq&& o) noexcept {
  std::swap(page_, o.page_);  // ours are released with `o`
  std::swap(efd_, o.efd_);
  std::swap(capacity_, o.capacity_);
  std::swap(overrun_logged_, o.overrun_logged_);
  return *this;
}

SharedCq::~SharedCq() {
  if (efd_ >= 0) ::close(efd_);
}

SharedCq::Header* SharedCq::header() const { return reinterpret_cast<Header*>(page_.data()); }

Completion* SharedCq::slots() const {
  return reinterpret_cast<Completion*>(page_.data() + kHeaderBytes);
}

absl::StatusOr<SharedCq> SharedCq::Create(size_t capacity) {
  absl::StatusOr<SharedPage> page = NewQueuePage<Header, Completion>("msgr-soft-cq", capacity);
  if (!page.ok()) return page.status();
  int efd = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (efd < 0) return ErrnoStatus(errno, "soft: eventfd");
  return SharedCq(std::move(*page), efd, capacity);
}

absl::StatusOr<SharedCq> SharedCq::Attach(int mem_fd, int event_fd) {
  absl::StatusOr<SharedPage> page = SharedPage::Attach(mem_fd, kHeaderBytes);
  absl::StatusOr<size_t> capacity =
      page.ok() ? PeerCapacity<Completion>(*page) : absl::StatusOr<size_t>(page.status());
  if (!capacity.ok()) {
    ::close(event_fd);
    return capacity.status();
  }
  return SharedCq(std::move(*page), event_fd, *capacity);
}

bool SharedCq::PushHeld(const Completion& c) {
  Header* h = header();
  const uint64_t head = h->head.load(std::memory_order_acquire);
  const uint64_t tail = h->tail.load(std::memory_order_relaxed);
  if (tail - head >= capacity_) {
    h->overrun.store(1, std::memory_order_release);
  } else {
    std::memcpy(&slots()[tail % capacity_], &c, sizeof(c));
    // seq_cst pairs with Arm(): either the consumer sees this completion after arming, or
    // this producer sees the channel armed.
    h->tail.store(tail + 1, std::memory_order_seq_cst);
  }
  return h->armed.exchange(0, std::memory_order_seq_cst) != 0;
}

void SharedCq::Wake() {
  uint64_t one = 1;
  ssize_t w = ::write(efd_, &one, sizeof(one));
  (void)w;  // EAGAIN only if the counter is saturated: readable already.
}

void SharedCq::Push(const Completion& c) {
  bool wake;
  {
    ShmLock l(&header()->mu);
    wake = PushHeld(c);
  }
  if (wake) Wake();
}

int SharedCq::Poll(Completion* out, int max) {
  Header* h = header();
  const uint64_t tail = h->tail.load(std::memory_order_acquire);
  const uint64_t head = h->head.load(std::memory_order_relaxed);
  const bool failed = h->overrun.load(std::memory_order_acquire) != 0 || tail - head > capacity_;
  if (failed) {
    if (!overrun_logged_) {
      std::fprintf(stderr, "soft: CQ overrun (depth %zu): completion queue failed\n", capacity_);
      overrun_logged_ = true;
    }
    return -1;
  }
  int n = 0;
  while (n < max && head + n != tail) {
    std::memcpy(&out[n], &slots()[(head + n) % capacity_], sizeof(Completion));
    ++n;
  }
  if (n > 0) h->head.store(head + n, std::memory_order_release);
  return n;
}

void SharedCq::Arm() {
  Header* h = header();
  h->armed.store(1, std::memory_order_seq_cst);
  // ibv_req_notify_cq fires only for completions after arming; waking early when some are
  // queued already is allowed and closes the lost-wakeup window.
  if (h->tail.load(std::memory_order_seq_cst) != h->head.load(std::memory_order_relaxed) ||
      h->overrun.load(std::memory_order_acquire) != 0) {
    if (h->armed.exchange(0, std::memory_order_seq_cst) != 0) Wake();
  }
}

void SharedCq::AbandonLockForTest() { pthread_mutex_lock(&header()->mu); }

void SharedCq::ConsumeEvents() {
  uint64_t v;
  while (::read(efd_, &v, sizeof(v)) == static_cast<ssize_t>(sizeof(v))) {
  }
}

// ---------------------------------------------------------------------------------------
// SharedRq

SharedRq::SharedRq(SharedPage page, size_t capacity) noexcept
    : page_(std::move(page)), capacity_(capacity) {}

SharedRq::Header* SharedRq::header() const { return reinterpret_cast<Header*>(page_.data()); }

uint64_t* SharedRq::slots() const {
  return reinterpret_cast<uint64_t*>(page_.data() + kHeaderBytes);
}

absl::StatusOr<SharedRq> SharedRq::Create(size_t capacity) {
  absl::StatusOr<SharedPage> page = NewQueuePage<Header, uint64_t>("msgr-soft-rq", capacity);
  if (!page.ok()) return page.status();
  reinterpret_cast<Header*>(page->data())->open.store(1);
  return SharedRq(std::move(*page), capacity);
}

absl::StatusOr<SharedRq> SharedRq::Attach(int mem_fd) {
  absl::StatusOr<SharedPage> page = SharedPage::Attach(mem_fd, kHeaderBytes);
  if (!page.ok()) return page.status();
  absl::StatusOr<size_t> capacity = PeerCapacity<uint64_t>(*page);
  if (!capacity.ok()) return capacity.status();
  return SharedRq(std::move(*page), *capacity);
}

int SharedRq::Post(uint64_t wr_id) {
  Header* h = header();
  ShmLock l(&h->mu);
  const uint64_t head = h->head.load(std::memory_order_relaxed);
  const uint64_t tail = h->tail.load(std::memory_order_relaxed);
  if (h->open.load(std::memory_order_relaxed) == 0 || tail - head >= capacity_) return -1;
  const size_t slot = tail % capacity_;
  slots()[slot] = wr_id;
  h->tail.store(tail + 1, std::memory_order_release);
  return static_cast<int>(slot);
}

bool SharedRq::Take(uint64_t* wr_id, size_t* slot) {
  Header* h = header();
  ShmLock l(&h->mu);
  const uint64_t head = h->head.load(std::memory_order_relaxed);
  const uint64_t tail = h->tail.load(std::memory_order_relaxed);
  if (h->open.load(std::memory_order_relaxed) == 0 || head == tail || tail - head > capacity_) {
    return false;
  }
  *slot = head % capacity_;
  *wr_id = slots()[*slot];
  h->head.store(head + 1, std::memory_order_release);
  return true;
}

std::vector<uint64_t> SharedRq::Close() {
  Header* h = header();
  ShmLock l(&h->mu);
  std::vector<uint64_t> left;
  if (h->open.exchange(0) == 0) return left;
  uint64_t head = h->head.load(std::memory_order_relaxed);
  const uint64_t tail = h->tail.load(std::memory_order_relaxed);
  if (tail - head > capacity_) head = tail;  // a peer scribbled on the indices
  for (; head != tail; ++head) left.push_back(slots()[head % capacity_]);
  h->head.store(head, std::memory_order_release);
  return left;
}

WcStatus SharedRq::DeliverWriteImm(SharedCq& cq, uint32_t qp_num, uint32_t byte_len, uint32_t imm) {
  Header* h = header();
  bool wake = false;
  {
    ShmLock l(&h->mu);
    if (h->open.load(std::memory_order_relaxed) == 0) return WcStatus::kRetryExceeded;
    const uint64_t head = h->head.load(std::memory_order_relaxed);
    const uint64_t tail = h->tail.load(std::memory_order_acquire);
    if (head == tail || tail - head > capacity_) return WcStatus::kRnrRetryExceeded;
    Completion c;
    c.wr_id = slots()[head % capacity_];
    c.status = WcStatus::kSuccess;
    c.opcode = WcOpcode::kRecvRdmaWithImm;
    c.byte_len = byte_len;
    c.imm_data = imm;
    c.has_imm = true;
    c.qp_num = qp_num;
    h->head.store(head + 1, std::memory_order_release);
    ShmLock cl(&cq.header()->mu);
    wake = cq.PushHeld(c);
  }
  if (wake) cq.Wake();
  return WcStatus::kSuccess;
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

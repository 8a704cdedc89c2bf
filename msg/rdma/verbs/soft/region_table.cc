#include "msg/rdma/verbs/soft/region_table.h"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>

#include "msg/base/errno_status.h"
#include "msg/rdma/verbs/soft/wire.h"

namespace msgr {
namespace verbs {
namespace soft {

namespace {
constexpr int kLookupRetries = 1000;  // A writer that died mid-update must not hang readers.
}

absl::StatusOr<RegionTable> RegionTable::Create() {
  absl::StatusOr<int> fd = CreateMemfd("msgr-soft-regions", kRegionTableBytes, false);
  if (!fd.ok()) return fd.status();
  void* p = ::mmap(nullptr, kRegionTableBytes, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(*fd);
    return ErrnoStatus(err, "soft: mmap(region table)");
  }
  return RegionTable(*fd, static_cast<RegionSlot*>(p), true);
}

absl::StatusOr<RegionTable> RegionTable::Attach(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) != kRegionTableBytes) {
    ::close(fd);
    return absl::InvalidArgumentError("soft: peer region table has the wrong size");
  }
  void* p = ::mmap(nullptr, kRegionTableBytes, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "soft: mmap(peer region table)");
  }
  return RegionTable(fd, static_cast<RegionSlot*>(p), false);
}

RegionTable::RegionTable(RegionTable&& other) noexcept
    : fd_(other.fd_), slots_(other.slots_), writable_(other.writable_) {
  other.fd_ = -1;
  other.slots_ = nullptr;
}

RegionTable& RegionTable::operator=(RegionTable&& other) noexcept {
  if (this != &other) {
    Reset();
    fd_ = other.fd_;
    slots_ = other.slots_;
    writable_ = other.writable_;
    other.fd_ = -1;
    other.slots_ = nullptr;
  }
  return *this;
}

RegionTable::~RegionTable() { Reset(); }

void RegionTable::Reset() {
  if (slots_ != nullptr) ::munmap(slots_, kRegionTableBytes);
  if (fd_ >= 0) ::close(fd_);
  slots_ = nullptr;
  fd_ = -1;
}

void RegionTable::Publish(uint32_t slot, const RegionView& v) {
  RegionSlot& s = slots_[slot];
  uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.access.store(v.access, std::memory_order_relaxed);
  s.pd_id.store(v.pd_id, std::memory_order_relaxed);
  s.base.store(v.base, std::memory_order_relaxed);
  s.length.store(v.length, std::memory_order_relaxed);
  s.uid.store(v.uid, std::memory_order_relaxed);
  s.key.store(v.key, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

void RegionTable::Revoke(uint32_t slot) {
  RegionSlot& s = slots_[slot];
  uint32_t seq = s.seq.load(std::memory_order_relaxed);
  s.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  s.key.store(0, std::memory_order_relaxed);
  s.seq.store(seq + 2, std::memory_order_release);
}

bool RegionTable::Lookup(uint32_t key, RegionView* out) const {
  if (slots_ == nullptr || key < 0x100) return false;
  uint32_t slot = SlotOf(key);
  if (slot >= kMaxRegions) return false;
  const RegionSlot& s = slots_[slot];
  for (int i = 0; i < kLookupRetries; ++i) {
    uint32_t seq1 = s.seq.load(std::memory_order_acquire);
    if (seq1 & 1) continue;
    RegionView v;
    v.key = s.key.load(std::memory_order_relaxed);
    v.access = s.access.load(std::memory_order_relaxed);
    v.pd_id = s.pd_id.load(std::memory_order_relaxed);
    v.base = s.base.load(std::memory_order_relaxed);
    v.length = s.length.load(std::memory_order_relaxed);
    v.uid = s.uid.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s.seq.load(std::memory_order_relaxed) != seq1) continue;
    if (v.key != key) return false;
    *out = v;
    return true;
  }
  return false;
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

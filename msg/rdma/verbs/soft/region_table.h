// Soft provider: the table of registered regions of one soft device, in shared memory.
//
// The owning device writes it; peers that connected a QP to the device map it read-only and
// consult it on every RDMA operation, exactly where a real HCA would check its MR table: the
// key must match a live slot, the range must lie inside, the access must be allowed. A
// deregistration is therefore visible to peers at once, without any message.
//
// Keys: key = (slot index + 1) << 8 | 8-bit generation; lkey == rkey. Each registration also
// gets a 64-bit uid that is never reused, so a peer's cached mapping of an old region can
// never be mistaken for a new region in a reused slot.
//
// Thread/process-safety: one writer (the owner, serialized by its device mutex); any number
// of readers in any process, lock-free (a per-slot seqlock).
#ifndef MSGR_MSG_RDMA_VERBS_SOFT_REGION_TABLE_H_
#define MSGR_MSG_RDMA_VERBS_SOFT_REGION_TABLE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "absl/status/statusor.h"

namespace msgr {
namespace verbs {
namespace soft {

constexpr uint32_t kMaxRegions = 8192;

struct RegionSlot {
  std::atomic<uint32_t> seq;  // Odd while being written.
  std::atomic<uint32_t> key;  // 0 when not registered.
  std::atomic<uint32_t> access;
  std::atomic<uint32_t> pd_id;
  std::atomic<uint64_t> base;    // Address of the region in the owner's address space.
  std::atomic<uint64_t> length;
  std::atomic<uint64_t> uid;
  uint64_t reserved;
};
static_assert(sizeof(RegionSlot) == 48, "region slot layout is shared between processes");
static_assert(std::atomic<uint64_t>::is_always_lock_free, "needs lock-free 64-bit atomics");

constexpr size_t kRegionTableBytes = sizeof(RegionSlot) * kMaxRegions;

// A consistent snapshot of one slot.
struct RegionView {
  uint32_t key = 0;
  uint32_t access = 0;
  uint32_t pd_id = 0;
  uint64_t base = 0;
  uint64_t length = 0;
  uint64_t uid = 0;
};

class RegionTable {
 public:
  // Creates a zeroed table in a new memfd (owner side).
  static absl::StatusOr<RegionTable> Create();
  // Maps a peer's table from its fd (read-only); takes ownership of `fd`.
  static absl::StatusOr<RegionTable> Attach(int fd);

  RegionTable() = default;
  RegionTable(RegionTable&& other) noexcept;
  RegionTable& operator=(RegionTable&& other) noexcept;
  ~RegionTable();

  int fd() const { return fd_; }
  bool valid() const { return slots_ != nullptr; }

  static uint32_t SlotOf(uint32_t key) { return (key >> 8) - 1; }
  static uint32_t MakeKey(uint32_t slot, uint32_t gen) { return ((slot + 1) << 8) | (gen & 0xff); }

  // Owner only.
  void Publish(uint32_t slot, const RegionView& view);
  void Revoke(uint32_t slot);

  // Any process: true and *out filled when `key` names a live region.
  bool Lookup(uint32_t key, RegionView* out) const;

 private:
  RegionTable(int fd, RegionSlot* slots, bool writable)
      : fd_(fd), slots_(slots), writable_(writable) {}
  void Reset();

  int fd_ = -1;
  RegionSlot* slots_ = nullptr;
  bool writable_ = false;
};

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

#endif  // MSGR_MSG_RDMA_VERBS_SOFT_REGION_TABLE_H_

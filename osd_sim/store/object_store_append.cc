// The write path: validate, reserve log space and a seq under the lock, pwritev the
// record from the caller's buffers without the lock, then publish it in the index.
// Large payloads in aligned buffers are written with O_DIRECT in the aligned layout.
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "absl/synchronization/notification.h"
#include "osd_sim/store/object_store_impl.h"
#include "osd_sim/store/posix_error.h"
#include "spdlog/spdlog.h"

namespace msgr::store {
namespace {

constexpr char kZeros[kRecordAlign] = {};

bool DirectEligible(const StoreOptions& o, const struct iovec* iov, int iovcnt, uint64_t len) {
  if (!o.direct_io || o.mode == Durability::kMemory || len == 0 || len < o.direct_min_bytes) {
    return false;
  }
  for (int i = 0; i < iovcnt; ++i) {
    if (reinterpret_cast<uintptr_t>(iov[i].iov_base) % kDirectAlign != 0 ||
        iov[i].iov_len % kDirectAlign != 0) {
      return false;
    }
  }
  return true;
}

// Splits `v` (total `len` bytes) into `n` parts at kDirectAlign multiples; returns each
// part's byte offset and buffers. The buffers themselves are not copied.
std::vector<std::pair<uint64_t, std::vector<struct iovec>>> SplitIov(absl::Span<const struct iovec> v,
                                                                    uint64_t len, int n) {
  std::vector<std::pair<uint64_t, std::vector<struct iovec>>> parts(static_cast<size_t>(n));
  const uint64_t step = AlignUp((len + n - 1) / n, kDirectAlign);
  uint64_t at = 0;  // byte offset of the current buffer position
  size_t p = 0;
  for (const struct iovec& io : v) {
    uint64_t off = 0;
    while (off < io.iov_len) {
      const uint64_t part_end = p + 1 == parts.size() ? len : std::min<uint64_t>(len, (p + 1) * step);
      if (parts[p].second.empty()) parts[p].first = at;
      const uint64_t take = std::min<uint64_t>(io.iov_len - off, part_end - at);
      parts[p].second.push_back({static_cast<char*>(io.iov_base) + off, take});
      off += take;
      at += take;
      if (at == part_end && p + 1 < parts.size()) ++p;
    }
  }
  while (!parts.empty() && parts.back().second.empty()) parts.pop_back();
  return parts;
}

// The header block of an aligned record: [header | oid | zeros], one per thread, aligned
// for O_DIRECT.
char* HeaderBlock() {
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  thread_local std::unique_ptr<char, Free> block(
      static_cast<char*>(std::aligned_alloc(kDirectAlign, kDirectAlign)));
  return block.get();
}

absl::Status ValidateAppend(std::string_view oid, uint64_t off, const struct iovec* iov,
                            int iovcnt, uint32_t flags, uint32_t write_id,
                            uint64_t* payload_len) {
  if (oid.empty() || oid.size() > kMaxOidBytes) {
    return absl::InvalidArgumentError(absl::StrCat("oid length ", oid.size(), " not in [1, ",
                                                   kMaxOidBytes, "]"));
  }
  if (iovcnt < 0 || iovcnt > ObjectStore::kMaxIovcnt || (iovcnt > 0 && iov == nullptr)) {
    return absl::InvalidArgumentError(absl::StrCat("bad iovec count ", iovcnt));
  }
  if ((flags & ~kKnownFlags) != 0) {
    return absl::InvalidArgumentError(absl::StrCat("unknown append flags ", flags));
  }
  uint64_t len = 0;
  for (int i = 0; i < iovcnt; ++i) len += iov[i].iov_len;
  if (len > kMaxPayloadBytes || off > UINT64_MAX - len) {
    return absl::InvalidArgumentError(absl::StrCat("write of ", len, " bytes at ", off,
                                                   " is too large"));
  }
  if ((flags & kTruncate) != 0 && off != 0) {
    return absl::InvalidArgumentError("kTruncate requires offset 0");
  }
  if (write_id != 0 && (flags & kTruncate) != 0) {
    return absl::InvalidArgumentError("kTruncate only on the first part of a write");
  }
  if ((flags & kDelete) != 0 && (len != 0 || (flags & kKnownFlags) != (kTruncate | kDelete))) {
    return absl::InvalidArgumentError("a delete is kTruncate | kDelete with no payload");
  }
  *payload_len = len;
  return absl::OkStatus();
}

}  // namespace

absl::Status ObjectStore::Impl::RollSegmentLocked() {
  if (active_ != nullptr) {
    SegmentState& sealed = segments_.at(active_->id());
    sealed.sealed_at = absl::Now();
    sealed.sealed_at_bytes = appended_bytes_;
  }
  const uint64_t id = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
  absl::StatusOr<std::unique_ptr<SegmentFile>> seg =
      SegmentFile::Open(absl::StrCat(opts_.dir, "/", SegmentName(id)), id, true, SyncStreams());
  if (!seg.ok()) return seg.status();
  // The new file's directory entry must be durable before any write in it is acked.
  if (opts_.mode == Durability::kDurable) {
    if (absl::Status s = SyncDir(opts_.dir); !s.ok()) {
      // Not in segments_: remove it, or every later roll would pick the same id and fail.
      (void)::unlink((*seg)->path().c_str());
      return s;
    }
  }
  PreallocateSegment(**seg);
  active_ = seg->get();
  active_tail_ = 0;
  SegmentState st;
  st.file = std::move(*seg);
  segments_.emplace(id, std::move(st));
  compact_cv_.Signal();  // a segment was sealed: maybe one to compact
  return absl::OkStatus();
}

void ObjectStore::Impl::StartIoPool() {
  if (opts_.direct_io && opts_.direct_write_streams > 1) {
    io_pool_ = std::make_unique<IoPool>(opts_.direct_write_streams - 1);
  }
}

void ObjectStore::Impl::PreallocateSegment(const SegmentFile& seg) const {
  if (!opts_.preallocate) return;
  if (absl::Status s = seg.Preallocate(opts_.segment_bytes); !s.ok()) {
    spdlog::debug("store {}: not preallocated: {}", opts_.dir, std::string(s.message()));
  }
}

absl::StatusOr<ObjectStore::Impl::Reservation> ObjectStore::Impl::Reserve(std::string_view oid,
                                                                          uint64_t payload_len,
                                                                          bool want_direct,
                                                                          uint64_t apply_seq) {
  Reservation r;
  const uint32_t layout = apply_seq != 0 ? kRecordRelocated : 0;
  // Sized for the aligned layout (plus its worst-case padding) if it may be used.
  r.bytes = want_direct ? RecordBytes(oid.size(), payload_len, layout | kRecordAlignedPayload) + kDirectAlign
                        : RecordBytes(oid.size(), payload_len, layout);
  absl::MutexLock l(&mu_);
  // First, as it may let go of mu_: everything checked below must hold when it returns.
  if (opts_.mode != Durability::kMemory) WaitZeroingLocked(r.bytes);
  if (!sticky_error_.ok()) return sticky_error_;
  // A compaction copy is not refused by the capacity: it is there to free a segment.
  if (apply_seq == 0 && opts_.capacity_bytes != 0 &&
      stats_.log_bytes + r.bytes > opts_.capacity_bytes) {
    ++stats_.append_errors;
    ++stats_.full_errors;
    return absl::ResourceExhaustedError(
        absl::StrCat("store full: object '", Sv(oid), "' needs ", r.bytes, " bytes, ",
                     stats_.log_bytes, " of capacity ", opts_.capacity_bytes, " used"));
  }
  if (opts_.mode != Durability::kMemory) {
    if (active_ == nullptr || (active_tail_ > 0 && active_tail_ + r.bytes > opts_.segment_bytes)) {
      if (absl::Status s = RollSegmentLocked(); !s.ok()) {
        ++stats_.append_errors;
        if (absl::IsResourceExhausted(s)) ++stats_.full_errors;
        return s;
      }
    }
    r.seg = active_;
    r.direct = want_direct && active_->has_direct();
    if (r.direct) {
      r.bytes = RecordBytes(oid.size(), payload_len, layout | kRecordAlignedPayload);
      r.pad = AlignUp(active_tail_, kDirectAlign) - active_tail_;
    } else {
      r.bytes = RecordBytes(oid.size(), payload_len, layout);
    }
    r.pos = active_tail_ + r.pad;
    active_tail_ = r.pos + r.bytes;
    if (r.direct) {
      ++direct_in_flight_;
      last_direct_at_ = absl::Now();
    }
  } else {
    r.bytes = payload_len;  // memory mode holds the payload only (see Append)
  }
  stats_.log_bytes += r.pad + r.bytes;
  appended_bytes_ += r.pad + r.bytes;
  // A seq whose low 32 bits are 0 is skipped: WriteIdOf(seq) is then the seq's low bits,
  // unique among writes open at the same time.
  if (static_cast<uint32_t>(next_seq_) == 0) ++next_seq_;
  r.seq = next_seq_++;
  not_durable_.Add(r.seq);
  if (r.seg != nullptr) {
    // Noted now, under the lock that gave out the seq: compaction, deciding whether a
    // delete may be dropped, must see every record of the object, written or about to be.
    SegmentState& st = segments_.at(r.seg->id());
    // By view: an object seen before costs no copy of its name.
    st.objects.try_emplace(Sv(oid)).first->second.Add(apply_seq != 0 ? apply_seq : r.seq);
    st.max_seq = r.seq;
    st.used = active_tail_;
  }
  return r;
}

void ObjectStore::Impl::RollbackLocked(const Reservation& r, const absl::Status& why,
                                       bool client) {
  if (client) {
    ++stats_.append_errors;
    if (absl::IsResourceExhausted(why)) ++stats_.full_errors;
  }
  not_durable_.Remove(r.seq);  // Append returns `why`: the caller never learns this ticket
  NotDurableShrankLocked();
  if (r.direct) --direct_in_flight_;
  // The cut below must not race a zeroing of this segment (its zeros would land past
  // the new end, taking blocks if the space is not preallocated again).
  while (zeroing_.seg != nullptr && zeroing_.seg.get() == r.seg) zero_cv_.Wait(&mu_);
  if (r.seg == active_ && active_tail_ == r.pos + r.bytes) {
    // Nobody reserved space after us: give it back and cut what was partly written
    // (the space after the tail must read as zeros again for the recovery scan).
    active_tail_ = r.pos - r.pad;
    stats_.log_bytes -= r.pad + r.bytes;
    segments_.at(r.seg->id()).used = active_tail_;
    if (absl::Status s = r.seg->Truncate(active_tail_); !s.ok()) {
      spdlog::warn("store {}: {}", opts_.dir, std::string(s.message()));
    } else {
      PreallocateSegment(*r.seg);
    }
    // The zeros past the tail went with the cut (fallocate makes unwritten space again).
    if (zeroed_seg_id_ == r.seg->id()) zeroed_end_ = std::min(zeroed_end_, active_tail_);
  } else {
    // A later record follows: leave the partial record; recovery skips it by checksum.
    spdlog::warn("store {}: failed record left at {} offset {} ({} bytes)", opts_.dir,
                 r.seg->path(), r.pos, r.bytes);
  }
}

absl::Status ObjectStore::Impl::WriteRecord(const Reservation& r, std::string_view oid,
                                             uint64_t off, const struct iovec* iov, int iovcnt,
                                             uint64_t len, uint32_t payload_crc, uint32_t flags,
                                             uint32_t write_id, bool* fell_back,
                                             uint64_t apply_seq) {
  absl::InlinedVector<struct iovec, 16> v;  // no allocation for the usual few buffers
  v.reserve(static_cast<size_t>(iovcnt) + 4);
  if (apply_seq != 0) flags |= kRecordRelocated;
  if (r.direct) {
    // [header block][payload]: one O_DIRECT write, the payload straight from the caller.
    const RecordHeader h =
        MakeRecordHeader(oid, r.seq, off, len, payload_crc, flags | kRecordAlignedPayload,
                         write_id, apply_seq);
    char* block = HeaderBlock();
    const uint64_t head = PayloadOffset(oid.size(), flags | kRecordAlignedPayload);
    std::memset(block, 0, head);
    std::memcpy(block, &h, sizeof(h));
    if (apply_seq != 0) std::memcpy(block + sizeof(h), &apply_seq, kApplySeqBytes);
    std::memcpy(block + HeaderBytes(flags), oid.data(), oid.size());
    v.push_back({block, head});
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len > 0) v.push_back(iov[i]);
    }
    const uint64_t total = head + len;
    if (io_pool_ == nullptr || len < opts_.direct_split_bytes) {
      return r.seg->WriteFull(r.pos, v.data(), static_cast<int>(v.size()), /*direct=*/true,
                              fell_back);
    }
    // Several pwritev in flight: the pool's idle threads write parts, this thread the
    // first part and any part no idle thread took.
    auto parts = SplitIov(v, total, opts_.direct_write_streams);
    std::vector<absl::Status> status(parts.size());
    std::vector<size_t> mine = {0};
    // One per part; a Notification may be destroyed as soon as its wait returns.
    std::vector<absl::Notification> handed_off(parts.size());
    std::vector<bool> pooled(parts.size(), false);
    std::unique_ptr<bool[]> part_fell_back(new bool[parts.size()]());
    for (size_t i = 1; i < parts.size(); ++i) {
      absl::AnyInvocable<void() &&> task = [&, i] {
        status[i] = r.seg->WriteFull(r.pos + parts[i].first, parts[i].second.data(),
                                     static_cast<int>(parts[i].second.size()), /*direct=*/true,
                                     &part_fell_back[i]);
        handed_off[i].Notify();
      };
      pooled[i] = io_pool_->TryRun(task);
      if (!pooled[i]) mine.push_back(i);
    }
    for (size_t i : mine) {
      status[i] = r.seg->WriteFull(r.pos + parts[i].first, parts[i].second.data(),
                                   static_cast<int>(parts[i].second.size()), /*direct=*/true,
                                   &part_fell_back[i]);
    }
    for (size_t i = 1; i < parts.size(); ++i) {
      if (pooled[i]) handed_off[i].WaitForNotification();
    }
    for (size_t i = 0; i < parts.size(); ++i) *fell_back = *fell_back || part_fell_back[i];
    for (absl::Status& s : status) {
      if (!s.ok()) return s;
    }
    return absl::OkStatus();
  }
  const RecordHeader h =
      MakeRecordHeader(oid, r.seq, off, len, payload_crc, flags, write_id, apply_seq);
  v.push_back({const_cast<RecordHeader*>(&h), sizeof(h)});
  if (apply_seq != 0) v.push_back({&apply_seq, kApplySeqBytes});
  v.push_back({const_cast<char*>(oid.data()), oid.size()});
  for (int i = 0; i < iovcnt; ++i) {
    if (iov[i].iov_len > 0) v.push_back(iov[i]);
  }
  const size_t pad = r.bytes - (HeaderBytes(flags) + oid.size() + len);
  if (pad > 0) v.push_back({const_cast<char*>(kZeros), pad});
  return r.seg->WriteFull(r.pos, v.data(), static_cast<int>(v.size()));
}

uint64_t ObjectStore::Impl::PublishLocked(std::string_view oid, Extent e, uint32_t flags,
                                          uint32_t write_id) {
  const bool truncate = (flags & kTruncate) != 0;
  if ((flags & kDelete) != 0) return index_.Delete(oid, e.seq);
  if (write_id == 0) return index_.Apply(oid, std::move(e), truncate);
  if (WriteIdOf(e.seq) == write_id && (flags & kContinued) != 0) {
    return index_.BeginWrite(oid, write_id, std::move(e), truncate);
  }
  const uint64_t len = e.len;
  const bool had_write = index_.HasWrite(oid, write_id);
  uint64_t dropped = 0;
  if ((flags & kContinued) != 0) {
    if (index_.AddPart(oid, write_id, std::move(e), &dropped)) return 0;
  } else if (std::optional<uint64_t> freed =
                 index_.Commit(oid, write_id, std::move(e), &dropped)) {
    return *freed;
  }
  // A part of a write that is no longer open (aborted meanwhile), or that does not follow
  // the part before it (one is missing, so the write was dropped): never visible.
  ++stats_.orphan_parts;
  if (had_write) ++stats_.writes_aborted;
  return len + dropped;
}

void ObjectStore::Impl::AbortWrite(std::string_view oid, uint32_t write_id) {
  absl::MutexLock l(&mu_);
  AbortWriteLocked(oid, write_id);
}

void ObjectStore::Impl::AbortWriteLocked(std::string_view oid, uint32_t write_id) {
  if (!index_.HasWrite(oid, write_id)) return;
  const uint64_t freed = index_.Abort(oid, write_id);
  ++stats_.writes_aborted;
  // Memory mode holds the payloads: they no longer count against the capacity.
  if (opts_.mode == Durability::kMemory) stats_.log_bytes -= std::min(stats_.log_bytes, freed);
}

absl::StatusOr<uint64_t> ObjectStore::Impl::Append(std::string_view oid, uint64_t off,
                                                   const struct iovec* iov, int iovcnt,
                                                   uint32_t payload_crc, uint32_t flags,
                                                   uint32_t write_id, DurableCallback* done) {
  uint64_t len = 0;
  if (absl::Status s = ValidateAppend(oid, off, iov, iovcnt, flags, write_id, &len); !s.ok()) {
    return s;
  }
  if (write_id != 0) {
    absl::MutexLock l(&mu_);
    const std::optional<uint64_t> next = index_.NextPartOffset(oid, write_id);
    if (!next) {
      return absl::FailedPreconditionError(absl::StrCat(
          "write ", write_id, " of '", Sv(oid), "' is not open (never begun, or aborted)"));
    }
    if (off != *next) {
      // A gap or an overlap can never make the write whole: refuse the part (it would be
      // stored and then dropped, yet reported written) and drop the write.
      AbortWriteLocked(oid, write_id);
      return absl::FailedPreconditionError(absl::StrCat(
          "part at offset ", off, " of write ", write_id, " of '", Sv(oid),
          "' does not start where the previous part ended (", *next, "); write dropped"));
    }
  }
  absl::StatusOr<Reservation> r = Reserve(oid, len, DirectEligible(opts_, iov, iovcnt, len));
  if (!r.ok()) return r.status();
  // kContinued without an id begins a write of several records: its id follows from the
  // seq just reserved (WriteIdOf), which the caller learns from the returned ticket.
  if ((flags & kContinued) != 0 && write_id == 0) write_id = WriteIdOf(r->seq);

  bool fell_back = false;  // a direct record written through the buffered descriptor
  Extent e;
  e.seq = r->seq;
  e.object_off = off;
  e.len = len;
  e.payload_crc = payload_crc;
  if (r->seg == nullptr) {
    // kMemory: the one mode where the store keeps its own copy.
    auto copy = std::make_shared<std::string>();
    copy->reserve(len);
    for (int i = 0; i < iovcnt; ++i) copy->append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
    e.mem = std::move(copy);
  } else {
    absl::Status s =
        WriteRecord(*r, oid, off, iov, iovcnt, len, payload_crc, flags, write_id, &fell_back);
    if (!s.ok()) {
      absl::MutexLock l(&mu_);
      RollbackLocked(*r, s);
      return s;
    }
    e.segment_id = r->seg->id();
    e.file_off = r->pos + PayloadOffset(oid.size(), r->direct ? kRecordAlignedPayload : 0);
  }
  e.record_bytes = r->bytes;  // memory mode: the payload

  Fired fire;
  {
    absl::MutexLock l(&mu_);
    const uint64_t freed = PublishLocked(oid, std::move(e), flags, write_id);
    // Memory mode holds only live payloads: what an overwrite replaced no longer counts
    // against the capacity. (The log on disk keeps every record until it is removed.)
    if (r->seg == nullptr) stats_.log_bytes -= std::min(stats_.log_bytes, freed);
    ++stats_.appends;
    if (r->direct) ++stats_.direct_appends;
    if (fell_back) ++stats_.direct_fallbacks;
    stats_.append_bytes += len;
    // A CPU copy of the payload: memory mode's own copy, or a buffered write's copy into
    // the page cache (an O_DIRECT write is the disk's DMA from the ring).
    if (!r->direct || fell_back) stats_.payload_bytes_copied += len;
    CommitWrittenLocked(*r, len, done, &fire);
  }
  Fire(&fire);
  return r->seq;
}

absl::StatusOr<ObjectStore::Impl::Reservation> ObjectStore::Impl::AppendRelocated(
    std::string_view oid, uint64_t off, const char* data, uint64_t len, uint32_t payload_crc,
    uint32_t flags, uint32_t write_id, uint64_t apply_seq) {
  struct iovec iov = {const_cast<char*>(data), len};
  const int iovcnt = len > 0 ? 1 : 0;
  absl::StatusOr<Reservation> r =
      Reserve(oid, len, DirectEligible(opts_, &iov, iovcnt, len), apply_seq);
  if (!r.ok()) return r.status();
  bool fell_back = false;
  absl::Status s = WriteRecord(*r, oid, off, &iov, iovcnt, len, payload_crc, flags, write_id,
                               &fell_back, apply_seq);
  Fired fire;  // stays empty: no callback
  absl::MutexLock l(&mu_);
  if (!s.ok()) {
    RollbackLocked(*r, s, /*client=*/false);
    return s;
  }
  if (fell_back) ++stats_.direct_fallbacks;
  CommitWrittenLocked(*r, len, nullptr, &fire);
  return r;
}

}  // namespace msgr::store

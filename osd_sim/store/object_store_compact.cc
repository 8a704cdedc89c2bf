// Compaction: a sealed segment whose records are mostly dead (overwritten, deleted) has
// its live records copied to the end of the log and is deleted (README "Compaction").
//
// Compacting one segment S:
//  1. Plan, under mu_: S must be sealed, every seq reserved in it durable, and no part of
//     an open write in it. Copy every extent the index has in S, and every extent of a
//     write of several records that may have a record in S (its parts are replayed only
//     together: once one is gone, each live part needs a copy of its own). An extent of
//     the write at the object's trunc_seq is copied with kTruncate. If S may hold the
//     record that carries the object's trunc_seq (a delete, or a truncating write no
//     longer live) and no copy carries it, and a record of the object with an older seq
//     is left in another segment, a delete at trunc_seq is written again ("barrier"), so
//     that replay cannot bring that older record back.
//  2. Copy, without the lock: read each payload, check its crc (a bad one is not copied:
//     counted, S kept), append it as a relocated record: a fresh seq, applying at the seq
//     of the write it copies, so it never wins over a newer write, at run time or replay.
//  3. Wait until every seq below max(the plan's next seq, the last copy's) is durable:
//     the copies, and every write the plan saw the effect of (what made a record of S
//     dead must be durable before S goes). Buffered mode: fdatasync the copies' segments
//     and fsync the directory.
//  4. Repoint, under mu_: each extent still there (a newer write may have replaced it
//     meanwhile: then its copy is simply dead) now points at its copy.
//  5. unlink S; fsync the directory (once for several segments unlinked in a row), and
//     only then forget S: a later decision that S's records are gone must not be undone
//     by a crash.
// A crash anywhere leaves S or the copies or both: replay applies each by its seq, and a
// copy beside its original is one extent (ObjectIndex::Apply).
#include <pthread.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <set>

#include "absl/strings/str_cat.h"
#include "msg/base/thread_cpu.h"
#include "osd_sim/store/object_store_impl.h"
#include "osd_sim/store/posix_error.h"
#include "spdlog/spdlog.h"

namespace msgr::store {
namespace {

struct FreeDeleter {
  void operator()(char* p) const { std::free(p); }
};
using AlignedBuffer = std::unique_ptr<char, FreeDeleter>;

// A kDirectAlign-aligned buffer of at least `len` bytes (so that a large copy can take
// the O_DIRECT path, as its original did).
void Grow(AlignedBuffer* buf, uint64_t* cap, uint64_t len) {
  const uint64_t want = AlignUp(std::max<uint64_t>(len, 1), kDirectAlign);
  if (*cap >= want) return;
  buf->reset(static_cast<char*>(std::aligned_alloc(kDirectAlign, want)));
  *cap = want;
}

}  // namespace

// Segments unlinked per directory fsync, at most (until then they still count).
constexpr size_t kUnlinkBatch = 16;

void ObjectStore::Impl::StartCompactor() {
  compactor_ = std::thread([this] { CompactorLoop(); });
  pthread_setname_np(compactor_.native_handle(), "store-compact");
}

void ObjectStore::Impl::CompactorLoop() {
  // Below the client's threads: compaction only has to keep up on average.
  (void)::setpriority(PRIO_PROCESS, static_cast<id_t>(::syscall(SYS_gettid)), 10);
  const ThreadCpuGroup::Member cpu(&thread_cpu_);  // until the thread returns
  // Not GetStats(): that reads every store thread's CPU clock.
  auto segments_freed = [this] {
    absl::MutexLock l(&mu_);
    return stats_.segments_freed;
  };
  while (true) {
    std::vector<uint64_t> ids;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) break;
      compact_cv_.WaitWithTimeout(&mu_, opts_.compaction_interval);
      if (stopping_) break;
      if (!sticky_error_.ok()) continue;
      ids = CandidatesLocked(/*background=*/true);
    }
    // Passes follow each other without a pause while they free segments.
    while (!ids.empty()) {
      absl::MutexLock cl(&compact_mu_);
      const uint64_t freed_before = segments_freed();
      for (uint64_t id : ids) {
        absl::StatusOr<Compacted> c = CompactSegment(id, /*background=*/true);
        if (!c.ok()) {
          spdlog::warn("store {}: compaction of {} stopped: {}", opts_.dir, SegmentName(id),
                       std::string(c.status().message()));
          break;
        }
        if (*c == Compacted::kNotNow) break;  // retried at the next check
        if (unlinked_.size() >= kUnlinkBatch) (void)ForgetUnlinked();
      }
      const bool freed = segments_freed() != freed_before;
      if (absl::Status s = ForgetUnlinked(); !s.ok()) {
        spdlog::warn("store {}: compaction: {}", opts_.dir, std::string(s.message()));
      }
      ids.clear();
      if (!freed) break;
      absl::MutexLock l(&mu_);
      if (stopping_ || !sticky_error_.ok()) break;
      ids = CandidatesLocked(/*background=*/true);
    }
  }
}

absl::Status ObjectStore::Impl::ForgetUnlinked() {
  if (unlinked_.empty()) return absl::OkStatus();
  if (absl::Status s = SyncDir(opts_.dir); !s.ok()) {
    absl::MutexLock l(&mu_);
    ++stats_.compaction_errors;
    return s;  // kept (as unlinked) until a later sync succeeds
  }
  for (uint64_t id : unlinked_) {
    {
      absl::MutexLock l(&mu_);
      auto it = segments_.find(id);
      if (it == segments_.end()) continue;
      stats_.log_bytes -= std::min(stats_.log_bytes, it->second.used);
      segments_.erase(it);
    }
    Hook(CompactionStep::kFreed, id);
  }
  unlinked_.clear();
  return absl::OkStatus();
}

absl::Status ObjectStore::Impl::Compact() {
  if (opts_.mode == Durability::kMemory) return absl::OkStatus();
  absl::MutexLock cl(&compact_mu_);
  std::set<uint64_t> todo;
  {
    absl::MutexLock l(&mu_);
    if (!sticky_error_.ok()) return sticky_error_;
    for (uint64_t id : CandidatesLocked(/*background=*/false)) todo.insert(id);
  }
  // Only the segments that were candidates when called: the copies fill new segments,
  // which must not be compacted again in the same call.
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (!todo.empty()) {
    std::set<uint64_t> later;
    for (uint64_t id : todo) {
      absl::StatusOr<Compacted> c = CompactSegment(id, /*background=*/false);
      if (!c.ok()) {
        (void)ForgetUnlinked();
        return c.status();
      }
      if (*c == Compacted::kNotNow) later.insert(id);
    }
    if (absl::Status s = ForgetUnlinked(); !s.ok()) return s;
    if (later.empty() || absl::Now() > give_up) break;
    {
      absl::MutexLock l(&mu_);
      if (stopping_) break;
      // Still there and still a candidate (it may have stopped being one).
      const std::vector<uint64_t> now = CandidatesLocked(/*background=*/false);
      todo.clear();
      for (uint64_t id : later) {
        if (std::find(now.begin(), now.end(), id) != now.end()) todo.insert(id);
      }
    }
    if (!todo.empty()) absl::SleepFor(absl::Milliseconds(2));
  }
  return absl::OkStatus();
}

std::vector<uint64_t> ObjectStore::Impl::CandidatesLocked(bool background) const {
  std::vector<std::pair<uint64_t, uint64_t>> found;  // live bytes, id
  const uint64_t durable_below = DurableBelowLocked();
  const absl::Time now = absl::Now();
  const uint64_t min_age_bytes = static_cast<uint64_t>(
      opts_.compaction_min_age_segments * static_cast<double>(opts_.segment_bytes));
  // Near a capacity limit, space now is worth more than copies saved by waiting.
  const bool tight = opts_.capacity_bytes != 0 && stats_.log_bytes > opts_.capacity_bytes / 10 * 8;
  for (const auto& [id, st] : segments_) {
    if (st.file.get() == active_ || st.unlinked || st.max_seq >= durable_below ||
        index_.HasOpenParts(id)) {
      continue;
    }
    const uint64_t live = index_.LiveBytes(id);
    if (live > 0) {
      if (st.pinned) continue;
      const double size = static_cast<double>(std::max(st.used, opts_.segment_bytes));
      if (static_cast<double>(live) >= opts_.compact_live_ratio * size) continue;
      // Let it age first: under overwrites most of what is live in a segment just sealed
      // dies soon by itself, and copying it would be wasted.
      const bool aged = appended_bytes_ - std::min(appended_bytes_, st.sealed_at_bytes) >=
                            min_age_bytes ||
                        now - st.sealed_at >= opts_.compaction_min_age;
      if (background && !aged && !tight) continue;
    }
    found.emplace_back(live, id);
  }
  std::sort(found.begin(), found.end());
  std::vector<uint64_t> ids;
  for (const auto& [live, id] : found) ids.push_back(id);
  return ids;
}

std::optional<ObjectStore::Impl::CompactionPlan> ObjectStore::Impl::PlanLocked(
    uint64_t id, bool* sync_first) const {
  *sync_first = false;
  auto it = segments_.find(id);
  if (it == segments_.end() || it->second.file.get() == active_ || it->second.unlinked) {
    return std::nullopt;
  }
  const SegmentState& st = it->second;
  const uint64_t durable_below = DurableBelowLocked();
  if (st.max_seq >= durable_below || index_.HasOpenParts(id)) return std::nullopt;
  CompactionPlan plan;
  plan.id = id;
  plan.file = st.file;
  plan.used = st.used;
  plan.next_seq = next_seq_;
  for (const auto& [oid, range] : st.objects) {
    const ObjectEntry* e = index_.Peek(oid);
    if (e == nullptr) continue;  // only records that never took effect (orphan parts)
    bool truncation_copied = false;
    for (const Extent& x : e->extents) {
      const bool here = x.segment_id == id;
      // A write of several records with a record here: all its live parts are copied.
      const bool part = x.first_seq != 0 && range.Overlaps(x.first_seq, x.seq);
      if (!here && !part) continue;
      // Its last part (x.seq) may be in a later segment, not durable yet: copying its
      // parts before would let a crash show part of an unacknowledged write.
      if (x.seq >= durable_below) return std::nullopt;
      auto seg = segments_.find(x.segment_id);
      if (seg == segments_.end()) {
        spdlog::error("store {}: '{}' has an extent in segment {}, which is gone", opts_.dir,
                      oid, x.segment_id);
        return std::nullopt;
      }
      CopyItem c;
      c.oid = oid;
      c.from = x;
      c.seg = seg->second.file;
      c.flags = x.seq == e->trunc_seq ? kTruncate : 0;
      c.write_id = x.first_seq != 0 ? WriteIdOf(x.first_seq) : 0;
      truncation_copied = truncation_copied || c.flags != 0;
      plan.copies.push_back(std::move(c));
    }
    // The record the object's state starts from (its delete or truncating write, at
    // trunc_seq, whose records span [trunc_first_seq, trunc_seq]) may be here.
    if (e->trunc_seq == 0 || truncation_copied ||
        !range.Overlaps(e->trunc_first_seq, e->trunc_seq)) {
      continue;
    }
    for (const auto& [other_id, other] : segments_) {
      if (other_id == id) continue;
      auto o = other.objects.find(oid);
      if (o != other.objects.end() && o->second.min < e->trunc_seq) {
        // An unlinked segment's records may still come back after a crash, until the
        // directory is synced: sync it rather than keep the delete for nothing.
        if (other.unlinked) {
          *sync_first = true;
          return std::nullopt;
        }
        plan.barriers.emplace_back(oid, e->trunc_seq);
        break;
      }
    }
  }
  return plan;
}

bool ObjectStore::Impl::WaitDurableBelow(uint64_t seq) {
  absl::MutexLock l(&mu_);
  ++durable_waiters_;
  while (DurableBelowLocked() < seq && !stopping_ && sticky_error_.ok()) {
    durable_cv_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
  }
  --durable_waiters_;
  return DurableBelowLocked() >= seq && sticky_error_.ok();
}

absl::StatusOr<ObjectStore::Impl::Compacted> ObjectStore::Impl::CompactSegment(uint64_t id,
                                                                               bool background) {
  std::optional<CompactionPlan> plan;
  for (int attempt = 0; attempt < 2 && !plan; ++attempt) {
    bool sync_first = false;
    {
      absl::MutexLock l(&mu_);
      if (stopping_ || !sticky_error_.ok()) return Compacted::kNotNow;
      plan = PlanLocked(id, &sync_first);
    }
    if (!sync_first) break;
    if (absl::Status s = ForgetUnlinked(); !s.ok()) return s;
  }
  if (!plan) return Compacted::kNotNow;
  Hook(CompactionStep::kPlanned, id);
  auto failed = [&](absl::Status s) {
    absl::MutexLock l(&mu_);
    ++stats_.compaction_errors;
    return s;
  };

  // 2. Copy.
  std::vector<std::optional<Reservation>> placed(plan->copies.size());
  std::set<SegmentFile*> written;  // the active segment(s): not freed while we run
  uint64_t last_seq = 0;
  bool corrupt = false;
  AlignedBuffer buf;
  uint64_t cap = 0;
  uint64_t copied = 0;
  const absl::Time start = absl::Now();
  for (size_t i = 0; i < plan->copies.size(); ++i) {
    const CopyItem& c = plan->copies[i];
    const uint64_t len = c.from.len;
    Grow(&buf, &cap, len);
    if (len > 0) {
      if (absl::Status s = c.seg->ReadFull(c.from.file_off, buf.get(), len); !s.ok()) {
        return failed(s);
      }
    }
    const uint32_t crc = PayloadCrc(c.oid, buf.get(), len);
    if (crc != c.from.payload_crc) {
      // Never copied: a copy would vouch for bad bytes with a good record. The extent
      // stays where it is (and reads as DATA_LOSS), and so does the segment.
      spdlog::error("store {}: compaction: '{}' ({} bytes at {} of {}) fails its crc (want {}, "
                    "got {}); not copied, {} kept",
                    opts_.dir, c.oid, len, c.from.file_off, c.seg->path(), c.from.payload_crc,
                    crc, plan->file->path());
      absl::MutexLock l(&mu_);
      ++stats_.compaction_crc_errors;
      corrupt = true;
      continue;
    }
    absl::StatusOr<Reservation> r = AppendRelocated(c.oid, c.from.object_off, buf.get(), len,
                                                    c.from.payload_crc, c.flags, c.write_id,
                                                    c.from.seq);
    if (!r.ok()) return failed(r.status());
    last_seq = r->seq;
    written.insert(r->seg);
    placed[i] = *r;
    copied += len;
    {
      absl::MutexLock l(&mu_);
      ++stats_.records_relocated;
      stats_.bytes_relocated += len;
      if (stopping_) return Compacted::kNotNow;
    }
    if (background && opts_.compaction_bytes_per_sec > 0) {
      const absl::Duration due =
          absl::Seconds(static_cast<double>(copied) / static_cast<double>(opts_.compaction_bytes_per_sec));
      const absl::Duration ahead = due - (absl::Now() - start);
      if (ahead > absl::ZeroDuration()) absl::SleepFor(std::min(ahead, absl::Seconds(1)));
    }
  }
  for (const auto& [oid, seq] : plan->barriers) {
    absl::StatusOr<Reservation> r = AppendRelocated(
        oid, 0, nullptr, 0, PayloadCrc(oid, nullptr, 0), kTruncate | kDelete, 0, seq);
    if (!r.ok()) return failed(r.status());
    last_seq = r->seq;
    written.insert(r->seg);
    absl::MutexLock l(&mu_);
    ++stats_.deletes_kept;
  }
  Hook(CompactionStep::kCopied, id);

  // 3. Durable: the copies, and every write whose effect the plan saw.
  if (!WaitDurableBelow(std::max(plan->next_seq, last_seq + 1))) {
    absl::MutexLock l(&mu_);
    if (!sticky_error_.ok()) return sticky_error_;
    return Compacted::kNotNow;  // stopping
  }
  if (opts_.mode == Durability::kBuffered && !written.empty()) {
    for (SegmentFile* seg : written) {
      if (absl::Status s = seg->Sync(); !s.ok()) return failed(s);
    }
    if (absl::Status s = SyncDir(opts_.dir); !s.ok()) return failed(s);
  }
  Hook(CompactionStep::kDurable, id);

  // 4. Repoint.
  {
    absl::MutexLock l(&mu_);
    for (size_t i = 0; i < plan->copies.size(); ++i) {
      if (!placed[i]) continue;
      const CopyItem& c = plan->copies[i];
      const Reservation& r = *placed[i];
      const uint32_t layout = kRecordRelocated | (r.direct ? kRecordAlignedPayload : 0);
      index_.Relocate(c.oid, c.from, r.seg->id(), r.pos + PayloadOffset(c.oid.size(), layout),
                      r.bytes);
    }
    if (!plan->copies.empty()) ++stats_.compactions;
    auto it = segments_.find(id);
    if (it == segments_.end()) return Compacted::kKept;
    if (corrupt) {
      it->second.pinned = true;
      return Compacted::kKept;
    }
    if (const uint64_t live = index_.LiveBytes(id); live > 0) {
      // Cannot happen (the plan copied everything live here, and nothing new comes in):
      // keep the segment rather than lose what is left in it.
      spdlog::error("store {}: {} still has {} live bytes after compaction; kept", opts_.dir,
                    plan->file->path(), live);
      it->second.pinned = true;
      return Compacted::kKept;
    }
  }
  Hook(CompactionStep::kRepointed, id);

  // 5. Delete the segment (durably: ForgetUnlinked).
  absl::StatusOr<uint64_t> file_bytes = plan->file->Size();
  if (::unlink(plan->file->path().c_str()) != 0 && errno != ENOENT) {
    return failed(PosixError("unlink", plan->file->path(), errno));
  }
  {
    absl::MutexLock l(&mu_);
    auto it = segments_.find(id);
    if (it != segments_.end()) it->second.unlinked = true;
    ++stats_.segments_freed;
    stats_.bytes_reclaimed += file_bytes.ok() ? *file_bytes : plan->used;
  }
  unlinked_.push_back(id);
  spdlog::debug("store {}: compacted {}: {} records copied, {} deletes kept", opts_.dir,
                plan->file->path(), plan->copies.size(), plan->barriers.size());
  Hook(CompactionStep::kUnlinked, id);
  return Compacted::kFreed;
}

}  // namespace msgr::store

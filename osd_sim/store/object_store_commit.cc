// Durability: group commit in kDurable mode, immediate completion otherwise.
//
// A ticket is "not durable" from its reservation until (a) its pwritev returned, in
// kBuffered / kMemory mode, or (b) an fdatasync that *started after* its pwritev
// returned has succeeded, in kDurable mode. The flusher only takes writes already
// in unsynced_ (i.e. completed) into a round, so (b) holds by construction.
//
// Zeroing ahead (StoreOptions::zero_ahead_bytes): after a round of small records a
// flusher writes zeros over the next chunk of the active segment, well ahead of its tail,
// and syncs them; appends landing there later change no extent state, so their rounds'
// fdatasync needs no journal commit. An append never lands in a range while it is being
// zeroed (Reserve waits), so the zeros never overwrite a record.
#include <pthread.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "osd_sim/store/object_store_impl.h"
#include "msg/base/thread_cpu.h"
#include "spdlog/spdlog.h"

namespace msgr::store {

void ObjectStore::Impl::Fire(Fired* fire) {
  for (auto& [cb, status] : *fire) cb(std::move(status));
  fire->erase(fire->begin(), fire->end());  // keeps its memory (clear() would free it)
}

void ObjectStore::Impl::MarkDurableLocked(uint64_t seq, const absl::Status& s, Fired* fire) {
  not_durable_.Remove(seq);
  NotDurableShrankLocked();
  if (!s.ok()) failed_.emplace(seq, s);
  auto it = waiters_.find(seq);
  if (it == waiters_.end()) return;
  for (DurableCallback& cb : it->second) fire->emplace_back(std::move(cb), s);
  waiters_.erase(it);
}

void ObjectStore::Impl::CommitWrittenLocked(const Reservation& r, uint64_t payload_len,
                                            DurableCallback* done, Fired* fire) {
  if (r.direct) {
    --direct_in_flight_;
    last_direct_at_ = absl::Now();
  }
  if (opts_.mode != Durability::kDurable) {
    not_durable_.Remove(r.seq);
    NotDurableShrankLocked();
    if (done != nullptr) fire->emplace_back(std::move(*done), absl::OkStatus());
    return;
  }
  if (done != nullptr) waiters_[r.seq].push_back(std::move(*done));
  // A write that finds others not yet durable is one of a group that a window batches.
  window_policy_.Observe(!unsynced_.empty() || rounds_flushing_ > 0);
  if (unsynced_.empty()) first_unsynced_at_ = absl::Now();
  unsynced_.push_back({r.seq, r.seg, payload_len});
  unsynced_bytes_ += payload_len;
  // A finished direct write may be what a held round waits for.
  if (unsynced_.size() == 1 || unsynced_.size() >= opts_.max_batch || r.direct) flush_cv_.Signal();
}

void ObjectStore::Impl::WhenDurable(uint64_t ticket, DurableCallback done) {
  absl::Status s;
  {
    absl::MutexLock l(&mu_);
    if (ticket == 0 || ticket >= next_seq_) {
      s = absl::InvalidArgumentError(absl::StrCat("unknown ticket ", ticket));
    } else if (not_durable_.Contains(ticket)) {
      waiters_[ticket].push_back(std::move(done));
      return;
    } else if (auto it = failed_.find(ticket); it != failed_.end()) {
      s = it->second;
    }
  }
  done(std::move(s));
}

void ObjectStore::Impl::StartFlusher() {
  zero_supported_ = opts_.zero_ahead_bytes > 0 && opts_.preallocate && HasUnwrittenExtents(opts_.dir);
  for (int i = 0; i < opts_.flush_threads; ++i) {
    flushers_.emplace_back([this, i] { FlusherLoop(i); });
    pthread_setname_np(flushers_.back().native_handle(), "store-flush");
  }
}

void ObjectStore::Impl::FlusherLoop(int index) {
  const ThreadCpuGroup::Member cpu(&thread_cpu_);  // until the thread returns
  std::vector<Unsynced> batch;
  Fired fire;
  absl::MutexLock l(&mu_);
  while (true) {
    while (unsynced_.empty() && !stopping_) flush_cv_.Wait(&mu_);
    if (unsynced_.empty()) break;  // stopping, nothing left
    // Group commit window: let writers that are about to finish join this round -- if
    // writes come in groups (most recent ones found others not yet durable); a lone
    // writer's next write comes only after this round's ack, so waiting would only delay
    // it (4 KiB -t 1 here: 200 us of an 800 us op). (Deadlines are re-read on every
    // wake-up: another flusher may have taken the round this one was waiting for, and new
    // writes started a new one.)
    if (!window_policy_.spinning()) {
      ++stats_.flushes_at_once;
    } else {
      while (!stopping_ && !unsynced_.empty() && unsynced_.size() < opts_.max_batch) {
        if (flush_cv_.WaitWithDeadline(&mu_, first_unsynced_at_ + opts_.group_commit_window)) break;
      }
    }
    // Large records: hold the round while direct writes keep coming — one is in progress,
    // or one began or ended less than a window ago (a pipelined writer's next one is
    // about to start) — up to group_commit_bytes / group_commit_max_hold.
    while (!stopping_ && !unsynced_.empty() && unsynced_.size() < opts_.max_batch &&
           unsynced_bytes_ < opts_.group_commit_bytes) {
      const absl::Time now = absl::Now();
      absl::Time until = first_unsynced_at_ + opts_.group_commit_max_hold;
      if (direct_in_flight_ == 0) until = std::min(until, last_direct_at_ + opts_.group_commit_window);
      if (now >= until) break;
      flush_cv_.WaitWithDeadline(&mu_, until);
    }
    // Another flusher may have taken the round while this one waited.
    if (unsynced_.empty()) continue;
    batch.swap(unsynced_);
    unsynced_bytes_ = 0;
    ++rounds_flushing_;
    absl::InlinedVector<SegmentFile*, 4> segs;  // each once; a round spans one or two
    for (const Unsynced& u : batch) {
      if (std::find(segs.begin(), segs.end(), u.seg) == segs.end()) segs.push_back(u.seg);
    }

    mu_.Unlock();
    // Monotonic: a wall-clock step must not make a flush negative (or the sum go back).
    const auto t0 = std::chrono::steady_clock::now();
    absl::Status status;
    for (SegmentFile* seg : segs) {
      absl::Status s = seg->Sync(/*stream=*/index);
      if (!s.ok() && status.ok()) status = std::move(s);
    }
    const absl::Duration took = absl::FromChrono(std::chrono::steady_clock::now() - t0);
    const uint64_t us = static_cast<uint64_t>(absl::ToInt64Microseconds(took));
    flush_latency_.Record(static_cast<uint64_t>(absl::ToInt64Nanoseconds(took)));
    mu_.Lock();
    --rounds_flushing_;

    ++stats_.flushes;
    stats_.flushed_appends += batch.size();
    stats_.max_batch = std::max<uint64_t>(stats_.max_batch, batch.size());
    stats_.flush_latency_sum_us += us;
    stats_.flush_latency_max_us = std::max(stats_.flush_latency_max_us, us);
    if (!status.ok()) {
      // After a failed fdatasync the page cache can no longer be trusted (the kernel may
      // have dropped the dirty pages): fail this round and every later append.
      spdlog::error("store {}: {}; the store refuses further writes", opts_.dir, std::string(status.message()));
      // Not "full" even when the flush said ENOSPC: freeing space does not bring the lost
      // pages back. Reads go on; writes need a restart (recovery re-reads the log).
      if (sticky_error_.ok()) {
        sticky_error_ = absl::FailedPreconditionError(absl::StrCat(
            "store ", opts_.dir, " refuses writes after a failed flush (",
            status.message(), "); restart the OSD"));
      }
    }
    uint64_t round_bytes = 0;
    for (const Unsynced& u : batch) {
      MarkDurableLocked(u.seq, status, &fire);
      round_bytes += u.bytes;
    }
    batch.clear();
    if (!fire.empty()) {
      mu_.Unlock();
      Fire(&fire);
      mu_.Lock();
    }
    ZeroAheadLocked(index, round_bytes);
  }
}

void ObjectStore::Impl::WaitZeroingLocked(uint64_t bytes) {
  bool waited = false;
  // A record that starts a new segment does not land in this one's zeroed range.
  while (zeroing_.seg != nullptr && zeroing_.seg.get() == active_ &&
         !(active_tail_ > 0 && active_tail_ + bytes > opts_.segment_bytes) &&
         AlignUp(active_tail_, kDirectAlign) + bytes > zeroing_.begin) {
    if (!waited) ++stats_.zero_waits;
    waited = true;
    zero_cv_.Wait(&mu_);
  }
}

void ObjectStore::Impl::ZeroAheadLocked(int index, uint64_t round_bytes) {
  if (!zero_supported_ || round_bytes > opts_.zero_round_max_bytes || zero_failed_ ||
      stopping_ || !sticky_error_.ok() || active_ == nullptr || zeroing_.seg != nullptr) {
    return;
  }
  if (zeroed_seg_id_ != active_->id()) {
    zeroed_seg_id_ = active_->id();
    zeroed_end_ = 0;
  }
  // Zeros start on a page of their own: a page shared with the last record could be
  // written back over that record's O_DIRECT write. Chunks of at most half the lead, so
  // that a chunk's gap from the tail leaves room to zero ahead.
  static const uint64_t kPage = std::max<uint64_t>(kDirectAlign, static_cast<uint64_t>(sysconf(_SC_PAGESIZE)));
  const uint64_t chunk = std::min(opts_.zero_chunk_bytes, opts_.zero_ahead_bytes / 2) / kPage * kPage;
  if (chunk == 0) return;
  const uint64_t tail = AlignUp(active_tail_, kPage);
  if (zeroed_end_ >= tail + opts_.zero_ahead_bytes) return;  // far enough ahead
  // A chunk's gap from the tail, so that appends seldom reach a range being zeroed.
  const uint64_t begin = std::max(zeroed_end_, tail + chunk);
  const uint64_t end = std::min(begin + chunk, opts_.segment_bytes / kPage * kPage);
  if (begin >= end) return;
  zeroing_ = Zeroing{segments_.at(active_->id()).file, begin, end};
  const Zeroing z = zeroing_;

  mu_.Unlock();
  // Only space that preallocation reserved: zeros past the file's end would take blocks
  // from the records to come (where fallocate failed for want of room).
  const absl::StatusOr<uint64_t> size = z.seg->Size();
  const bool preallocated = size.ok() && *size >= z.end;
  absl::Status s;
  if (preallocated) {
    if (opts_.zero_hook) opts_.zero_hook(z.seg->id(), z.begin, z.end);
    // One block of zeros, repeated, through the page cache -- not O_DIRECT: records do
    // not fill whole pages, and a buffered write into part of a page that is on disk but
    // not in the cache reads it first (a synchronous read per append; measured 0.85x),
    // while the zero pages stay cached. Then a sync that commits the extents' new state.
    static constexpr size_t kZeroBlock = 256 << 10;
    static const std::string* const zeros = new std::string(kZeroBlock, '\0');
    for (uint64_t off = z.begin; off < z.end && s.ok(); off += kZeroBlock) {
      struct iovec iov = {const_cast<char*>(zeros->data()), std::min<uint64_t>(kZeroBlock, z.end - off)};
      s = z.seg->WriteFull(off, &iov, 1);
    }
    if (s.ok()) s = z.seg->Sync(index);
  }
  mu_.Lock();

  if (!preallocated) {
    if (zeroed_seg_id_ == z.seg->id()) zeroed_end_ = UINT64_MAX;  // not this segment again
  } else if (!s.ok()) {
    // A failed sync is sticky in the segment: the next round reports it. A failed write
    // (an I/O error) only ends the zeroing.
    spdlog::warn("store {}: zeroing ahead of the log's tail stopped: {}", opts_.dir,
                 std::string(s.message()));
    zero_failed_ = true;
  } else {
    stats_.zeroed_bytes += z.end - z.begin;
    if (zeroed_seg_id_ == z.seg->id()) zeroed_end_ = std::max(zeroed_end_, z.end);
  }
  zeroing_ = Zeroing{};
  zero_cv_.SignalAll();
}

}  // namespace msgr::store

#include "osd_sim/store/object_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/notification.h"
#include "msg/base/crc32c.h"
#include "osd_sim/store/object_store_impl.h"
#include "osd_sim/store/posix_error.h"
#include "osd_sim/store/segment_scan.h"
#include "osd_sim/store/store_format.h"
#include "spdlog/spdlog.h"

namespace msgr::store {

// ---- facade -------------------------------------------------------------------------

absl::StatusOr<std::unique_ptr<ObjectStore>> ObjectStore::Open(const StoreOptions& options) {
  if (options.mode != Durability::kMemory && options.dir.empty()) {
    return absl::InvalidArgumentError("StoreOptions.dir is empty");
  }
  if (options.segment_bytes < 4096) {
    return absl::InvalidArgumentError(
        absl::StrCat("StoreOptions.segment_bytes ", options.segment_bytes, " < 4096"));
  }
  if (options.flush_threads < 1 || options.flush_threads > 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("StoreOptions.flush_threads ", options.flush_threads, " not in [1, 8]"));
  }
  if (options.direct_write_streams < 1 || options.direct_write_streams > 16) {
    return absl::InvalidArgumentError(absl::StrCat("StoreOptions.direct_write_streams ",
                                                   options.direct_write_streams, " not in [1, 16]"));
  }
  if (!(options.compaction_min_age_segments >= 0)) {
    return absl::InvalidArgumentError(absl::StrCat("StoreOptions.compaction_min_age_segments ",
                                                   options.compaction_min_age_segments, " < 0"));
  }
  if (!(options.compact_live_ratio >= 0 && options.compact_live_ratio <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("StoreOptions.compact_live_ratio ",
                                                   options.compact_live_ratio, " not in [0, 1]"));
  }
  auto impl = std::make_unique<Impl>(options);
  if (options.mode != Durability::kMemory) {
    if (absl::Status s = impl->Recover(); !s.ok()) return s;
  }
  if (options.mode == Durability::kDurable) impl->StartFlusher();
  if (options.mode != Durability::kMemory) impl->StartIoPool();
  if (options.mode != Durability::kMemory && options.background_compaction) {
    impl->StartCompactor();
  }
  return std::unique_ptr<ObjectStore>(new ObjectStore(std::move(impl)));
}

ObjectStore::ObjectStore(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
ObjectStore::~ObjectStore() = default;

absl::StatusOr<uint64_t> ObjectStore::Append(std::string_view oid, uint64_t off,
                                             const struct iovec* iov, int iovcnt,
                                             uint32_t payload_crc, uint32_t flags) {
  return impl_->Append(oid, off, iov, iovcnt, payload_crc, flags, 0, nullptr);
}

absl::StatusOr<uint64_t> ObjectStore::Append(std::string_view oid, uint64_t off,
                                             const struct iovec* iov, int iovcnt,
                                             uint32_t payload_crc, uint32_t flags,
                                             DurableCallback done) {
  return impl_->Append(oid, off, iov, iovcnt, payload_crc, flags, 0, &done);
}

absl::StatusOr<uint64_t> ObjectStore::AppendPart(std::string_view oid, uint64_t off,
                                                 const struct iovec* iov, int iovcnt,
                                                 uint32_t payload_crc, uint32_t flags,
                                                 uint32_t write_id, DurableCallback done) {
  return impl_->Append(oid, off, iov, iovcnt, payload_crc, flags, write_id, &done);
}

void ObjectStore::AbortWrite(std::string_view oid, uint32_t write_id) {
  impl_->AbortWrite(oid, write_id);
}

void ObjectStore::WhenDurable(uint64_t ticket, DurableCallback done) {
  impl_->WhenDurable(ticket, std::move(done));
}

absl::Status ObjectStore::WaitDurable(uint64_t ticket) {
  absl::Notification n;
  absl::Status result;
  impl_->WhenDurable(ticket, [&](absl::Status s) {
    result = std::move(s);
    n.Notify();
  });
  n.WaitForNotification();
  return result;
}

absl::Status ObjectStore::WaitDurable(const std::vector<uint64_t>& tickets) {
  absl::Status first;
  for (uint64_t t : tickets) {
    absl::Status s = WaitDurable(t);
    if (first.ok()) first = std::move(s);
  }
  return first;
}

absl::StatusOr<std::string> ObjectStore::Read(std::string_view oid) {
  return impl_->Read(oid, 0, UINT64_MAX);
}

absl::StatusOr<std::string> ObjectStore::Read(std::string_view oid, uint64_t offset,
                                              uint64_t length) {
  return impl_->Read(oid, offset, length);
}

absl::StatusOr<uint64_t> ObjectStore::Stat(std::string_view oid) { return impl_->Stat(oid); }

absl::StatusOr<uint64_t> ObjectStore::Delete(std::string_view oid) {
  if (absl::StatusOr<uint64_t> size = impl_->Stat(oid); !size.ok()) return size.status();
  const uint32_t crc = PayloadCrc(oid, nullptr, 0);
  return impl_->Append(oid, 0, nullptr, 0, crc, kTruncate | kDelete, 0, nullptr);
}

std::vector<ObjectIndex::Listed> ObjectStore::List(std::string_view prefix,
                                                   std::string_view after, size_t max) const {
  return impl_->List(prefix, after, max);
}

std::vector<ObjectIndex::Written> ObjectStore::ListWrittenSince(std::string_view prefix,
                                                               std::string_view after,
                                                               uint64_t since,
                                                               size_t max) const {
  return impl_->ListWrittenSince(prefix, after, since, max);
}

uint64_t ObjectStore::NextSeq() const { return impl_->NextSeq(); }

absl::Status ObjectStore::Compact() { return impl_->Compact(); }

StoreStats ObjectStore::GetStats() const { return impl_->GetStats(); }

// ---- open / recovery ----------------------------------------------------------------

ObjectStore::Impl::~Impl() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    flush_cv_.SignalAll();
    compact_cv_.SignalAll();
    durable_cv_.SignalAll();
  }
  // The compactor first: it may wait for the flushers (a compaction stopped half way
  // leaves copies that are merely dead records; the old segment stays).
  if (compactor_.joinable()) compactor_.join();
  for (std::thread& t : flushers_) t.join();
  io_pool_.reset();
  if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the flock
}

absl::Status ObjectStore::Impl::Recover() {
  const std::string& dir = opts_.dir;
  if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return PosixError("mkdir", dir, errno);
  const std::string lock_path = dir + "/LOCK";
  lock_fd_ = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (lock_fd_ < 0) return PosixError("open", lock_path, errno);
  if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) {
    if (errno == EWOULDBLOCK) {
      return absl::UnavailableError(absl::StrCat("store ", dir, " is open in another process"));
    }
    return PosixError("flock", lock_path, errno);
  }
  // Before any segment is read: a build that misread another format's records would
  // take them for damage and cut them off as a torn tail.
  if (absl::Status s = CheckStoreFormat(dir); !s.ok()) return s;

  std::vector<uint64_t> ids;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return PosixError("opendir", dir, errno);
  while (struct dirent* e = ::readdir(d)) {
    uint64_t id;
    if (ParseSegmentName(e->d_name, &id)) ids.push_back(id);
  }
  ::closedir(d);
  std::sort(ids.begin(), ids.end());

  absl::MutexLock l(&mu_);
  uint64_t last_seq = 0;
  // Writes of several records some of whose parts compaction copied (as writes of one
  // record each): their original parts left in the log never complete, and are not news.
  std::set<std::pair<std::string, uint32_t>> relocated_writes;
  for (size_t i = 0; i < ids.size(); ++i) {
    absl::StatusOr<std::unique_ptr<SegmentFile>> seg =
        SegmentFile::Open(absl::StrCat(dir, "/", SegmentName(ids[i])), ids[i], false,
                          SyncStreams());
    if (!seg.ok()) return seg.status();
    absl::StatusOr<SegmentScan> scan = ScanSegment(**seg, last_seq);
    if (!scan.ok()) return scan.status();
    SegmentState st;
    for (const ScannedRecord& r : scan->records) {
      const RecordHeader& h = r.header;
      Extent e;
      e.seq = r.apply_seq;  // a relocated record applies at the seq of the write it copies
      e.object_off = h.object_off;
      e.len = h.payload_len;
      e.payload_crc = h.payload_crc;
      e.segment_id = ids[i];
      e.file_off = r.pos + PayloadOffset(h.oid_len, h.flags);
      e.record_bytes = RecordBytes(h.oid_len, h.payload_len, h.flags);
      st.objects[r.oid].Add(r.apply_seq);
      const bool relocated = (h.flags & kRecordRelocated) != 0;
      // A copy is a write of one record; its write_id only names the write it came from.
      if (relocated && h.write_id != 0) relocated_writes.emplace(r.oid, h.write_id);
      PublishLocked(r.oid, std::move(e), h.flags, relocated ? 0 : h.write_id);
    }
    st.max_seq = scan->last_seq;
    last_seq = scan->last_seq;
    stats_.recovered_records += scan->records.size();
    stats_.torn_records += scan->torn_records;
    stats_.torn_bytes += scan->torn_bytes;
    stats_.corrupt_records += scan->corrupt_records;
    stats_.corrupt_bytes += scan->corrupt_bytes;
    if (scan->corrupt_records > 0) {
      spdlog::error("store {}: {} corrupt record(s), {} bytes skipped in {}; objects named by "
                    "intact headers: [{}] (they read as their previous version)",
                    dir, scan->corrupt_records, scan->corrupt_bytes, (*seg)->path(),
                    absl::StrJoin(scan->corrupt_oids, ", "));
    }
    uint64_t keep = scan->file_size - scan->free_bytes;
    if (i + 1 == ids.size()) {
      // The active segment: new appends must follow valid data, so cut the torn tail
      // (the space after the tail must read as zeros: preallocate it again).
      keep = scan->valid_end;
      if (scan->torn_bytes > 0) {
        spdlog::warn("store {}: discarding torn tail of {}: {} bytes after offset {}", dir,
                     (*seg)->path(), scan->torn_bytes, keep);
        if (absl::Status s = (*seg)->Truncate(keep); !s.ok()) return s;
      }
      PreallocateSegment(**seg);  // no-op if it already is
      if (scan->torn_bytes > 0) {
        if (absl::Status s = (*seg)->Sync(); !s.ok()) return s;
      }
      active_ = seg->get();
      active_tail_ = keep;
    } else if (scan->torn_bytes > 0) {
      spdlog::warn("store {}: {} has {} unreadable bytes at its end (never acknowledged)", dir,
                   (*seg)->path(), scan->torn_bytes);
    }
    stats_.log_bytes += keep;
    st.used = keep;
    st.sealed_at = absl::Now();  // its age counts from now
    st.file = std::move(*seg);
    segments_.emplace(ids[i], std::move(st));
  }
  next_seq_ = last_seq + 1;
  // Writes of several records whose last part never reached the log: their writer died
  // or gave up; what they replaced stays.
  size_t open = 0;
  for (const auto& [oid, id] : index_.OpenWrites()) {
    if (relocated_writes.count({oid, id}) == 0) ++open;
    index_.Abort(oid, id);
  }
  if (open > 0) {
    stats_.writes_aborted += open;
    spdlog::warn("store {}: {} write(s) of several records never completed; dropped", dir,
                 open);
  }
  spdlog::info("store {}: recovered {} records of {} objects from {} segments", dir,
               stats_.recovered_records, index_.object_count(), segments_.size());
  return absl::OkStatus();
}

// ---- reads, stats -------------------------------------------------------------------

absl::StatusOr<std::string> ObjectStore::Impl::Read(std::string_view oid, uint64_t offset,
                                                    uint64_t length) {
  std::optional<ObjectEntry> entry;
  // Held until the read is done: compaction may delete a segment meanwhile (its file
  // stays readable through the open descriptor).
  std::vector<std::shared_ptr<const SegmentFile>> segs;
  {
    absl::MutexLock l(&mu_);
    entry = index_.Lookup(oid);
    if (!entry) return absl::NotFoundError(absl::StrCat("object '", Sv(oid), "' not found"));
    for (const Extent& e : entry->extents) {
      auto it = segments_.find(e.segment_id);
      segs.push_back(e.mem || it == segments_.end() ? nullptr : it->second.file);
    }
  }
  const uint64_t size = entry->Size();
  const uint64_t begin = std::min(offset, size);
  const uint64_t end = begin + std::min(length, size - begin);
  std::string out(end - begin, '\0');
  std::string scratch;  // an extent that sticks out of the range is read whole, for its crc
  for (size_t i = 0; i < entry->extents.size(); ++i) {
    const Extent& e = entry->extents[i];
    if (e.len == 0 || e.end() <= begin || e.object_off >= end) continue;
    const bool inside = e.object_off >= begin && e.end() <= end;
    char* dst;
    if (inside) {
      dst = out.data() + (e.object_off - begin);  // later extents overwrite earlier ones
    } else {
      scratch.resize(e.len);
      dst = scratch.data();
    }
    std::string where;
    if (e.mem) {
      std::memcpy(dst, e.mem->data(), e.len);
      where = "memory";
    } else {
      if (segs[i] == nullptr) return absl::InternalError(absl::StrCat("segment ", e.segment_id, " missing"));
      where = absl::StrCat(segs[i]->path(), " at ", e.file_off);
      if (absl::Status s = segs[i]->ReadFull(e.file_off, dst, e.len); !s.ok()) {
        return absl::DataLossError(absl::StrCat("object '", Sv(oid), "': ", std::string(s.message())));
      }
    }
    const uint32_t crc = PayloadCrc(oid, dst, e.len);
    if (crc != e.payload_crc) {
      absl::MutexLock l(&mu_);
      ++stats_.read_crc_errors;
      return absl::DataLossError(absl::StrCat("object '", Sv(oid), "': payload crc mismatch in ", where,
                                              " (", e.len, " bytes, want ", e.payload_crc,
                                              ", got ", crc, ")"));
    }
    if (!inside) {
      const uint64_t from = std::max(begin, e.object_off);
      const uint64_t to = std::min(end, e.end());
      std::memcpy(out.data() + (from - begin), dst + (from - e.object_off), to - from);
    }
  }
  return out;
}

absl::StatusOr<uint64_t> ObjectStore::Impl::Stat(std::string_view oid) {
  absl::MutexLock l(&mu_);
  std::optional<ObjectEntry> entry = index_.Lookup(oid);
  if (!entry) return absl::NotFoundError(absl::StrCat("object '", Sv(oid), "' not found"));
  return entry->Size();
}

std::vector<ObjectIndex::Listed> ObjectStore::Impl::List(std::string_view prefix,
                                                         std::string_view after,
                                                         size_t max) const {
  absl::MutexLock l(&mu_);
  return index_.List(prefix, after, max);
}

std::vector<ObjectIndex::Written> ObjectStore::Impl::ListWrittenSince(std::string_view prefix,
                                                                     std::string_view after,
                                                                     uint64_t since,
                                                                     size_t max) const {
  absl::MutexLock l(&mu_);
  return index_.ListWrittenSince(prefix, after, since, max);
}

uint64_t ObjectStore::Impl::NextSeq() const {
  absl::MutexLock l(&mu_);
  return next_seq_;
}

StoreStats ObjectStore::Impl::GetStats() const {
  // The threads' clocks, read here (a system call each) rather than by the threads per
  // round or task; outside mu_, which the flushers take.
  const uint64_t cpu_ns = thread_cpu_.Ns() + (io_pool_ ? io_pool_->thread_cpu_ns() : 0);
  absl::MutexLock l(&mu_);
  StoreStats s = stats_;
  s.thread_cpu_ns = cpu_ns;
  s.objects = index_.object_count();
  s.segments = segments_.size();
  s.live_bytes = index_.live_bytes();
  s.dead_bytes = s.log_bytes - std::min(s.log_bytes, s.live_bytes);
  s.flush_latency = flush_latency_.Snapshot();
  return s;
}

std::string StoreStats::ToString() const {
  return absl::StrCat("appends=", appends, " direct=", direct_appends,
                      " direct_fallbacks=", direct_fallbacks, " bytes=", append_bytes,
                      " errors=", append_errors,
                      " full=", full_errors, " log_bytes=", log_bytes, " live=", live_bytes,
                      " dead=", dead_bytes, " objects=", objects,
                      " segments=", segments, " compactions=", compactions,
                      " segments_freed=", segments_freed, " relocated=", records_relocated,
                      " relocated_bytes=", bytes_relocated, " reclaimed=", bytes_reclaimed,
                      " deletes_kept=", deletes_kept,
                      " compaction_crc_errors=", compaction_crc_errors, " flushes=", flushes,
                      " flushed_appends=", flushed_appends, " max_batch=", max_batch,
                      " zeroed_bytes=", zeroed_bytes, " zero_waits=", zero_waits,
                      " flush_us_sum=", flush_latency_sum_us, " flush_us_max=", flush_latency_max_us,
                      " recovered=", recovered_records, " aborted_writes=", writes_aborted,
                      " orphan_parts=", orphan_parts, " torn=", torn_records,
                      " corrupt=", corrupt_records, " read_crc_errors=", read_crc_errors);
}

}  // namespace msgr::store

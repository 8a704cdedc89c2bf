// The write path: validate, reserve log space and a seq under the lock, pwritev the
// record from the caller's buffers without the lock, then publish it in the index.
#include <cstring>

#include "absl/strings/str_cat.h"
#include "osd_sim/store/object_store_impl.h"
#include "osd_sim/store/posix_error.h"
#include "spdlog/spdlog.h"

namespace msgr::store {
namespace {

constexpr char kZeros[kRecordAlign] = {};

absl::Status ValidateAppend(std::string_view oid, uint64_t off, const struct iovec* iov,
                            int iovcnt, uint32_t flags, uint64_t* payload_len) {
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
  *payload_len = len;
  return absl::OkStatus();
}

}  // namespace

absl::Status ObjectStore::Impl::RollSegmentLocked() {
  const uint64_t id = segments_.empty() ? 1 : segments_.rbegin()->first + 1;
  absl::StatusOr<std::unique_ptr<SegmentFile>> seg =
      SegmentFile::Open(absl::StrCat(opts_.dir, "/", SegmentName(id)), id, true);
  if (!seg.ok()) return seg.status();
  // The new file's directory entry must be durable before any write in it is acked.
  if (opts_.mode == Durability::kDurable) {
    if (absl::Status s = SyncDir(opts_.dir); !s.ok()) return s;
  }
  active_ = seg->get();
  active_tail_ = 0;
  segments_.emplace(id, std::move(*seg));
  return absl::OkStatus();
}

absl::StatusOr<ObjectStore::Impl::Reservation> ObjectStore::Impl::Reserve(std::string_view oid,
                                                                          uint64_t payload_len) {
  Reservation r;
  r.bytes = RecordBytes(oid.size(), payload_len);
  absl::MutexLock l(&mu_);
  if (!sticky_error_.ok()) return sticky_error_;
  if (opts_.capacity_bytes != 0 && stats_.log_bytes + r.bytes > opts_.capacity_bytes) {
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
    r.pos = active_tail_;
    active_tail_ += r.bytes;
  }
  stats_.log_bytes += r.bytes;
  r.seq = next_seq_++;
  not_durable_.insert(r.seq);
  return r;
}

void ObjectStore::Impl::RollbackLocked(const Reservation& r, const absl::Status& why) {
  ++stats_.append_errors;
  if (absl::IsResourceExhausted(why)) ++stats_.full_errors;
  not_durable_.erase(r.seq);
  failed_.emplace(r.seq, why);
  if (r.seg == active_ && active_tail_ == r.pos + r.bytes) {
    // Nobody reserved space after us: give it back and cut what was partly written.
    active_tail_ = r.pos;
    stats_.log_bytes -= r.bytes;
    if (absl::Status s = r.seg->Truncate(r.pos); !s.ok()) {
      spdlog::warn("store {}: {}", opts_.dir, std::string(s.message()));
    }
  } else {
    // A later record follows: leave the partial record; recovery skips it by checksum.
    spdlog::warn("store {}: failed record left at {} offset {} ({} bytes)", opts_.dir,
                 r.seg->path(), r.pos, r.bytes);
  }
}

absl::StatusOr<uint64_t> ObjectStore::Impl::Append(std::string_view oid, uint64_t off,
                                                   const struct iovec* iov, int iovcnt,
                                                   uint32_t payload_crc, uint32_t flags,
                                                   DurableCallback* done) {
  uint64_t len = 0;
  if (absl::Status s = ValidateAppend(oid, off, iov, iovcnt, flags, &len); !s.ok()) return s;
  absl::StatusOr<Reservation> r = Reserve(oid, len);
  if (!r.ok()) return r.status();

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
    const RecordHeader h = MakeRecordHeader(oid, r->seq, off, len, payload_crc, flags);
    std::vector<struct iovec> v;
    v.reserve(static_cast<size_t>(iovcnt) + 3);
    v.push_back({const_cast<RecordHeader*>(&h), sizeof(h)});
    v.push_back({const_cast<char*>(oid.data()), oid.size()});
    for (int i = 0; i < iovcnt; ++i) {
      if (iov[i].iov_len > 0) v.push_back(iov[i]);
    }
    const size_t pad = r->bytes - (sizeof(h) + oid.size() + len);
    if (pad > 0) v.push_back({const_cast<char*>(kZeros), pad});
    absl::Status s = r->seg->WriteFull(r->pos, v.data(), static_cast<int>(v.size()));
    if (!s.ok()) {
      absl::MutexLock l(&mu_);
      RollbackLocked(*r, s);
      return s;
    }
    e.segment_id = r->seg->id();
    e.file_off = r->pos + sizeof(h) + oid.size();
  }

  Fired fire;
  {
    absl::MutexLock l(&mu_);
    index_.Apply(oid, std::move(e), (flags & kTruncate) != 0);
    ++stats_.appends;
    stats_.append_bytes += len;
    CommitWrittenLocked(r->seq, r->seg, done, &fire);
  }
  Fire(&fire);
  return r->seq;
}

}  // namespace msgr::store

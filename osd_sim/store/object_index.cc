#include "osd_sim/store/object_index.h"

#include <algorithm>

#include "osd_sim/store/posix_error.h"

namespace msgr::store {
namespace {

// True if `outer` (non-empty) covers every byte and the end of `inner`.
bool Covers(const Extent& outer, const Extent& inner) {
  return outer.len > 0 && inner.object_off >= outer.object_off && inner.end() <= outer.end();
}

// Extents of one seq are the parts of one write, which never overlap, or copies of one
// write's bytes: one inside another is a copy.
bool SameWriteWithin(const Extent& inner, const Extent& outer) {
  return inner.seq == outer.seq && inner.object_off >= outer.object_off &&
         inner.end() <= outer.end();
}

uint64_t FirstSeq(const Extent& e) { return e.first_seq != 0 ? e.first_seq : e.seq; }

// True if the extents of `xs` newer than `x` (non-empty) together cover every byte of it
// (then one of them reaches its end too): `x` can no longer be seen.
bool HiddenByNewer(const std::vector<Extent>& xs, const Extent& x) {
  if (x.len == 0) return false;  // Covers decides for those
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const Extent& y : xs) {
    if (y.seq > x.seq && y.len > 0 && y.object_off < x.end() && y.end() > x.object_off) {
      ranges.emplace_back(y.object_off, y.end());
    }
  }
  std::sort(ranges.begin(), ranges.end());
  uint64_t covered = x.object_off;  // [x.object_off, covered) is hidden
  for (const auto& [from, to] : ranges) {
    if (from > covered) return false;
    covered = std::max(covered, to);
    if (covered >= x.end()) return true;
  }
  return false;
}

bool Overlap(const Extent& a, const Extent& b) {
  return a.object_off < b.end() && b.object_off < a.end();
}

}  // namespace

void ObjectIndex::AddLive(const Extent& e) {
  live_[e.segment_id] += e.record_bytes;
  live_total_ += e.record_bytes;
}

void ObjectIndex::RemoveLive(const Extent& e) {
  auto it = live_.find(e.segment_id);
  if (it == live_.end()) return;
  const uint64_t n = std::min(it->second, e.record_bytes);
  it->second -= n;
  live_total_ -= std::min(live_total_, n);
  if (it->second == 0) live_.erase(it);
}

void ObjectIndex::RemoveOpenPart(const Extent& e) {
  auto it = open_parts_.find(e.segment_id);
  if (it == open_parts_.end()) return;
  if (--it->second == 0) open_parts_.erase(it);
}

uint64_t ObjectIndex::LiveBytes(uint64_t segment_id) const {
  auto it = live_.find(segment_id);
  return it == live_.end() ? 0 : it->second;
}

bool ObjectIndex::HasOpenParts(uint64_t segment_id) const {
  return open_parts_.count(segment_id) != 0;
}

std::vector<std::pair<std::string, uint32_t>> ObjectIndex::OpenWrites() const {
  std::vector<std::pair<std::string, uint32_t>> out;
  for (const auto& [key, w] : open_) out.push_back(key);
  return out;
}

uint64_t ObjectEntry::Size() const {
  uint64_t size = 0;
  for (const Extent& e : extents) size = std::max(size, e.end());
  return size;
}

ObjectEntry& ObjectIndex::Entry(std::string_view oid) {
  // Looked up by view: the name is copied only when the entry is made.
  auto [it, inserted] = objects_.try_emplace(Sv(oid));
  if (inserted) names_.emplace(it->first, &it->second);  // nodes never move
  return it->second;
}

uint64_t ObjectIndex::Apply(std::string_view oid, Extent e, bool truncate) {
  ObjectEntry& obj = Entry(oid);
  if (e.seq < obj.trunc_seq) return e.len;  // an older write already replaced by a truncate
  if (obj.deleted) {  // a write newer than the delete: the object exists again
    obj.deleted = false;
    --deleted_;
  }
  auto& xs = obj.extents;
  uint64_t freed = 0;
  auto drop = [&](auto pred) {
    auto it = std::remove_if(xs.begin(), xs.end(), pred);
    for (auto x = it; x != xs.end(); ++x) {
      freed += x->len;
      RemoveLive(*x);
    }
    xs.erase(it, xs.end());
  };
  if (truncate) {
    if (e.seq > obj.trunc_seq || obj.trunc_first_seq == 0) {
      obj.trunc_first_seq = FirstSeq(e);
    } else {  // another record of the same write (a copy): the earliest first seq
      obj.trunc_first_seq = std::min(obj.trunc_first_seq, FirstSeq(e));
    }
    obj.trunc_seq = e.seq;
    drop([&](const Extent& x) { return x.seq < e.seq; });
  }
  // A newer write that covers this one makes it invisible, as do several that cover it
  // together; so does a copy of its bytes.
  for (const Extent& x : xs) {
    if ((x.seq > e.seq && Covers(x, e)) || SameWriteWithin(e, x)) return freed + e.len;
  }
  if (HiddenByNewer(xs, e)) return freed + e.len;
  drop([&](const Extent& x) {
    return (x.seq < e.seq && Covers(e, x)) || SameWriteWithin(x, e);
  });
  auto pos = std::upper_bound(xs.begin(), xs.end(), e.seq,
                              [](uint64_t seq, const Extent& x) { return seq < x.seq; });
  Extent added;  // its seq and range, for the check below
  added.seq = e.seq;
  added.object_off = e.object_off;
  added.len = e.len;
  AddLive(e);
  xs.insert(pos, std::move(e));
  // Older writes this one overlaps may now be hidden by it and others together.
  std::vector<size_t> hidden;
  for (size_t i = 0; i < xs.size(); ++i) {
    if (xs[i].seq < added.seq && Overlap(xs[i], added) && HiddenByNewer(xs, xs[i])) {
      hidden.push_back(i);
    }
  }
  for (auto it = hidden.rbegin(); it != hidden.rend(); ++it) {
    freed += xs[*it].len;
    RemoveLive(xs[*it]);
    xs.erase(xs.begin() + static_cast<std::ptrdiff_t>(*it));
  }
  return freed;
}

uint64_t ObjectIndex::Delete(std::string_view oid, uint64_t seq) {
  auto it = objects_.find(Sv(oid));
  if (it == objects_.end()) {
    // Recovery may meet a delete whose writes were in segments since lost to damage;
    // remember it all the same, so an older write met later cannot bring the object back.
    ObjectEntry& fresh = Entry(oid);
    fresh.deleted = true;
    fresh.trunc_seq = seq;
    fresh.trunc_first_seq = seq;
    ++deleted_;
    return 0;
  }
  ObjectEntry& obj = it->second;
  if (seq < obj.trunc_seq) return 0;  // a newer truncating write (or delete) won already
  if (seq > obj.trunc_seq || obj.trunc_first_seq == 0) obj.trunc_first_seq = seq;
  obj.trunc_seq = seq;
  uint64_t freed = 0;
  auto& xs = obj.extents;
  auto keep = std::remove_if(xs.begin(), xs.end(), [&](const Extent& x) { return x.seq < seq; });
  for (auto x = keep; x != xs.end(); ++x) {
    freed += x->len;
    RemoveLive(*x);
  }
  xs.erase(keep, xs.end());
  if (xs.empty() && !obj.deleted) {
    obj.deleted = true;
    ++deleted_;
  }
  return freed;
}

uint64_t ObjectIndex::BeginWrite(std::string_view oid, uint32_t id, Extent first,
                                 bool truncate) {
  const uint64_t freed = Abort(oid, id);
  OpenWrite& w = open_[WriteKey(std::string(oid), id)];
  w.truncate = truncate;
  w.next_off = first.end();
  AddOpenPart(first);
  w.parts.push_back(std::move(first));
  return freed;
}

bool ObjectIndex::AddPart(std::string_view oid, uint32_t id, Extent part, uint64_t* dropped) {
  *dropped = 0;
  auto it = open_.find(WriteKey(std::string(oid), id));
  if (it == open_.end()) return false;
  if (part.object_off != it->second.next_off) {
    *dropped = Drop(it);  // a part is missing: the write can never be whole
    return false;
  }
  it->second.next_off = part.end();
  AddOpenPart(part);
  it->second.parts.push_back(std::move(part));
  return true;
}

bool ObjectIndex::HasWrite(std::string_view oid, uint32_t id) const {
  return open_.count(WriteKey(std::string(oid), id)) != 0;
}

std::optional<uint64_t> ObjectIndex::NextPartOffset(std::string_view oid, uint32_t id) const {
  auto it = open_.find(WriteKey(std::string(oid), id));
  if (it == open_.end()) return std::nullopt;
  return it->second.next_off;
}

std::optional<uint64_t> ObjectIndex::Commit(std::string_view oid, uint32_t id, Extent last,
                                            uint64_t* dropped) {
  *dropped = 0;
  auto it = open_.find(WriteKey(std::string(oid), id));
  if (it == open_.end()) return std::nullopt;
  if (last.object_off != it->second.next_off) {
    *dropped = Drop(it);  // a part is missing
    return std::nullopt;
  }
  OpenWrite w = std::move(it->second);
  open_.erase(it);
  for (const Extent& p : w.parts) RemoveOpenPart(p);
  // All at the last part's seq: the write takes effect where it completes. The parts do
  // not overlap, so their order among themselves does not matter past the first.
  const uint64_t at = last.seq;
  const uint64_t first_seq = w.parts.front().seq;
  w.parts.push_back(std::move(last));
  uint64_t freed = 0;
  for (size_t i = 0; i < w.parts.size(); ++i) {
    w.parts[i].seq = at;
    w.parts[i].first_seq = first_seq;
    freed += Apply(oid, std::move(w.parts[i]), i == 0 && w.truncate);
  }
  return freed;
}

uint64_t ObjectIndex::Abort(std::string_view oid, uint32_t id) {
  auto it = open_.find(WriteKey(std::string(oid), id));
  return it == open_.end() ? 0 : Drop(it);
}

uint64_t ObjectIndex::Drop(std::map<WriteKey, OpenWrite>::iterator it) {
  uint64_t freed = 0;
  for (const Extent& e : it->second.parts) {
    freed += e.len;
    RemoveOpenPart(e);
  }
  open_.erase(it);
  return freed;
}

size_t ObjectIndex::DropOpenWrites() {
  const size_t n = open_.size();
  open_.clear();
  open_parts_.clear();
  return n;
}

std::optional<ObjectEntry> ObjectIndex::Lookup(std::string_view oid) const {
  auto it = objects_.find(Sv(oid));
  if (it == objects_.end() || it->second.deleted) return std::nullopt;
  return it->second;
}

const ObjectEntry* ObjectIndex::Peek(std::string_view oid) const {
  auto it = objects_.find(Sv(oid));
  return it == objects_.end() ? nullptr : &it->second;
}

bool ObjectIndex::Relocate(std::string_view oid, const Extent& from, uint64_t segment_id,
                           uint64_t file_off, uint64_t record_bytes) {
  auto it = objects_.find(Sv(oid));
  if (it == objects_.end()) return false;
  for (Extent& x : it->second.extents) {
    if (x.seq == from.seq && x.object_off == from.object_off && x.len == from.len &&
        x.segment_id == from.segment_id && x.file_off == from.file_off) {
      RemoveLive(x);
      x.segment_id = segment_id;
      x.file_off = file_off;
      x.record_bytes = record_bytes;
      x.first_seq = 0;
      AddLive(x);
      return true;
    }
  }
  return false;
}

std::vector<ObjectIndex::Listed> ObjectIndex::List(std::string_view prefix,
                                                   std::string_view after, size_t max) const {
  std::vector<Listed> out;
  auto it = after < prefix ? names_.lower_bound(prefix) : names_.upper_bound(after);
  for (; it != names_.end() && out.size() < max; ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;  // past the prefix's range
    if (!it->second->deleted) out.push_back({std::string(it->first), it->second->Size()});
  }
  return out;
}

std::vector<ObjectIndex::Written> ObjectIndex::ListWrittenSince(std::string_view prefix,
                                                                std::string_view after,
                                                                uint64_t since,
                                                                size_t max) const {
  std::vector<Written> out;
  auto it = after < prefix ? names_.lower_bound(prefix) : names_.upper_bound(after);
  for (; it != names_.end() && out.size() < max; ++it) {
    if (it->first.compare(0, prefix.size(), prefix) != 0) break;
    const ObjectEntry& e = *it->second;
    // Extents are sorted by seq: the last one is the newest write still applied (a
    // relocated copy keeps the seq of the write it copies).
    const uint64_t seq = std::max(e.trunc_seq, e.extents.empty() ? 0 : e.extents.back().seq);
    if (seq < since) continue;
    out.push_back({std::string(it->first), seq, e.deleted, e.deleted ? 0 : e.Size()});
  }
  return out;
}

}  // namespace msgr::store

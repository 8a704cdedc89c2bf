#include "osd_sim/store/object_index.h"

#include <algorithm>


namespace msgr::store {
namespace {

// True if `outer` (non-empty) covers every byte and the end of `inner`.
bool Covers(const Extent& outer, const Extent& inner) {
  return outer.len > 0 && inner.object_off >= outer.object_off && inner.end() <= outer.end();
}

}  // namespace

uint64_t ObjectEntry::Size() const {
  uint64_t size = 0;
  for (const Extent& e : extents) size = std::max(size, e.end());
  return size;
}

uint64_t ObjectIndex::Apply(std::string_view oid, Extent e, bool truncate) {
  ObjectEntry& obj = objects_[std::string(oid)];
  if (e.seq < obj.trunc_seq) return e.len;  // an older write already replaced by a truncate
  if (obj.deleted) {  // a write newer than the delete: the object exists again
    obj.deleted = false;
    --deleted_;
  }
  auto& xs = obj.extents;
  uint64_t freed = 0;
  auto drop = [&](auto pred) {
    auto it = std::remove_if(xs.begin(), xs.end(), pred);
    for (auto x = it; x != xs.end(); ++x) freed += x->len;
    xs.erase(it, xs.end());
  };
  if (truncate) {
    obj.trunc_seq = e.seq;
    drop([&](const Extent& x) { return x.seq < e.seq; });
  }
  // A newer write that covers this one makes it invisible.
  for (const Extent& x : xs) {
    if (x.seq > e.seq && Covers(x, e)) return freed + e.len;
  }
  drop([&](const Extent& x) { return x.seq < e.seq && Covers(e, x); });
  auto pos = std::upper_bound(xs.begin(), xs.end(), e.seq,
                              [](uint64_t seq, const Extent& x) { return seq < x.seq; });
  xs.insert(pos, std::move(e));
  return freed;
}

uint64_t ObjectIndex::Delete(std::string_view oid, uint64_t seq) {
  auto it = objects_.find(std::string(oid));
  if (it == objects_.end()) {
    // Recovery may meet a delete whose writes were in segments since lost to damage;
    // remember it all the same, so an older write met later cannot bring the object back.
    it = objects_.emplace(std::string(oid), ObjectEntry{}).first;
    it->second.deleted = true;
    it->second.trunc_seq = seq;
    ++deleted_;
    return 0;
  }
  ObjectEntry& obj = it->second;
  if (seq < obj.trunc_seq) return 0;  // a newer truncating write (or delete) won already
  obj.trunc_seq = seq;
  uint64_t freed = 0;
  auto& xs = obj.extents;
  auto keep = std::remove_if(xs.begin(), xs.end(), [&](const Extent& x) { return x.seq < seq; });
  for (auto x = keep; x != xs.end(); ++x) freed += x->len;
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
  // All at the last part's seq: the write takes effect where it completes. The parts do
  // not overlap, so their order among themselves does not matter past the first.
  const uint64_t at = last.seq;
  w.parts.push_back(std::move(last));
  uint64_t freed = 0;
  for (size_t i = 0; i < w.parts.size(); ++i) {
    w.parts[i].seq = at;
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
  for (const Extent& e : it->second.parts) freed += e.len;
  open_.erase(it);
  return freed;
}

size_t ObjectIndex::DropOpenWrites() {
  const size_t n = open_.size();
  open_.clear();
  return n;
}

std::optional<ObjectEntry> ObjectIndex::Lookup(std::string_view oid) const {
  auto it = objects_.find(std::string(oid));
  if (it == objects_.end() || it->second.deleted) return std::nullopt;
  return it->second;
}

std::vector<ObjectIndex::Listed> ObjectIndex::List(std::string_view prefix,
                                                   std::string_view after, size_t max) const {
  std::vector<Listed> out;
  if (max == 0) return out;
  for (const auto& [oid, obj] : objects_) {
    if (obj.deleted || oid.compare(0, prefix.size(), prefix) != 0 || oid <= after) continue;
    out.push_back({oid, obj.Size()});
  }
  auto by_oid = [](const Listed& a, const Listed& b) { return a.oid < b.oid; };
  if (out.size() > max) {
    std::nth_element(out.begin(), out.begin() + max, out.end(), by_oid);
    out.resize(max);
  }
  std::sort(out.begin(), out.end(), by_oid);
  return out;
}

}  // namespace msgr::store

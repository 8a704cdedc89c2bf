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

std::optional<ObjectEntry> ObjectIndex::Lookup(std::string_view oid) const {
  auto it = objects_.find(std::string(oid));
  if (it == objects_.end()) return std::nullopt;
  return it->second;
}

}  // namespace msgr::store

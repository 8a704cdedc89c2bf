#include "client/scrub.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace msgr::client {

ScrubReport CompareCopies(const placement::PlacementMap& map,
                          const std::map<std::string, std::vector<ObjectCopy>>& copies,
                          const std::vector<int>& scanned) {
  ScrubReport r;
  auto was_scanned = [&](int osd) {
    return std::find(scanned.begin(), scanned.end(), osd) != scanned.end();
  };
  for (const auto& object : copies) {
    // Named references, not a structured binding: C++17 lambdas cannot capture those.
    const std::string& oid = object.first;
    const std::vector<ObjectCopy>& list = object.second;
    ++r.objects;
    r.copies += list.size();
    const std::vector<int>& acting = map.ActingOfPg(map.PgOf(oid));
    auto held_by = [&](int osd) {
      return std::any_of(list.begin(), list.end(), [&](const ObjectCopy& c) { return c.osd == osd; });
    };
    auto is_member = [&](int osd) { return std::find(acting.begin(), acting.end(), osd) != acting.end(); };
    // Copies outside the acting set are strays (left where a PG was: peering does not
    // remove them); only the members' copies are compared, and an object no member holds
    // (deleted since it moved) is a stray, not missing.
    const bool on_members = std::any_of(acting.begin(), acting.end(), held_by);
    for (int member : acting) {
      if (!on_members) break;
      const placement::OsdEntry* e = map.Find(member);
      if (e == nullptr || !e->up || !was_scanned(member) || held_by(member)) continue;
      ++r.missing;
      r.problems.push_back(absl::StrCat(oid, ": missing on osd.", member));
    }
    const ObjectCopy* first = nullptr;
    bool differ = false;
    for (const ObjectCopy& c : list) {
      if (!is_member(c.osd)) {
        ++r.stray;
        continue;
      }
      if (first == nullptr) first = &c;
      differ = differ || c.size != first->size || c.crc32c != first->crc32c;
    }
    if (differ) {
      ++r.mismatched;
      r.problems.push_back(absl::StrCat(
          oid, ": ", absl::StrJoin(list, ", ", [](std::string* out, const ObjectCopy& c) {
            absl::StrAppend(out, absl::StrFormat("osd.%d %u bytes crc 0x%08x", c.osd, c.size,
                                                 c.crc32c));
          })));
    }
  }
  return r;
}

}  // namespace msgr::client

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
    for (int member : acting) {
      const placement::OsdEntry* e = map.Find(member);
      if (e == nullptr || !e->up || !was_scanned(member) || held_by(member)) continue;
      ++r.missing;
      r.problems.push_back(absl::StrCat(oid, ": missing on osd.", member));
    }
    for (const ObjectCopy& c : list) {
      if (std::find(acting.begin(), acting.end(), c.osd) == acting.end()) ++r.stray;
    }
    const bool differ = std::any_of(list.begin(), list.end(), [&](const ObjectCopy& c) {
      return c.size != list.front().size || c.crc32c != list.front().crc32c;
    });
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

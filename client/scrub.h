// Scrub: do the copies of every object agree? (issue 19, item 6). The client lists each
// OSD's objects of a pool with their sizes and crc32c (kScrub pages, proto/osd_protocol.h)
// and CompareCopies checks them against the placement map:
//   * missing:    another member holds it and an up member of its acting set does not;
//   * mismatched: members hold copies of different sizes or crc32c;
//   * stray:      an OSD outside the acting set holds a copy (a PG moved away: peering
//                 copies to the new members but leaves the old copy; strays are not
//                 compared, and an object only strays hold was deleted since it moved).
// A scrub compares a quiet cluster: a write that lands between two OSDs' pages shows as a
// difference. Pure functions: thread-safe.
#ifndef MSGR_CLIENT_SCRUB_H_
#define MSGR_CLIENT_SCRUB_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "proto/placement.h"

namespace msgr::client {

struct ObjectCopy {
  int osd = -1;
  uint64_t size = 0;
  uint32_t crc32c = 0;
};

struct ScrubReport {
  uint64_t objects = 0;     // distinct object ids seen
  uint64_t copies = 0;      // copies seen on all OSDs
  uint64_t missing = 0;     // copies an up acting member lacks
  uint64_t mismatched = 0;  // objects whose copies differ
  uint64_t stray = 0;       // copies outside the acting set
  // One line per missing or mismatched object, e.g. "obj.7: missing on osd.2" or
  // "obj.9: osd.0 4096 bytes crc 0x1234abcd, osd.1 4096 bytes crc 0x00ff00ff".
  std::vector<std::string> problems;
  bool clean() const { return missing == 0 && mismatched == 0; }
};

// `copies`: every copy each OSD listed, by object id; `scanned`: the OSDs whose listing is
// in it (a member that was not scanned is not counted missing).
ScrubReport CompareCopies(const placement::PlacementMap& map,
                          const std::map<std::string, std::vector<ObjectCopy>>& copies,
                          const std::vector<int>& scanned);

}  // namespace msgr::client

#endif  // MSGR_CLIENT_SCRUB_H_

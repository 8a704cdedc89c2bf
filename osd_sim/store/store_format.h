// The object store's format version: a one-line FORMAT file in the store's directory.
//
// Segments are bare sequences of records (record.h) with no header of their own, and a
// record's version field only says how to read that record: a build that met records of
// a layout it does not know would take them for damage -- skip them as corrupt, or cut
// the active segment back as a torn tail. So the whole store's format is settled before
// any segment is read: DIR/FORMAT holds
//
//   msgr object store format 1
//
// written when the store is created (a temporary file, fsync, rename, fsync of the
// directory) and checked by ObjectStore::Open before recovery. A store made before the
// FORMAT file existed has none; its layout is format 1, so it opens as format 1 and gets
// the file. Bump kStoreFormatVersion for any change a build of the previous format would
// misread (a new record layout or flag, other segment names); a build that can still read
// the previous format must then say so in CheckStoreFormat.
//
// Thread-compatible: called under the store directory's lock.
#ifndef MSGR_OSD_SIM_STORE_STORE_FORMAT_H_
#define MSGR_OSD_SIM_STORE_STORE_FORMAT_H_

#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace msgr::store {

// 1: records of writes (record.h). 2: delete records (kDelete) too. 3: relocated records
// (kRecordRelocated, written by compaction: an apply seq after the header). A store of an
// older format opens here and is marked format 3 at once, before anything is written (a
// format-1 build would take a delete record for damage and bring the deleted object
// back; a format-2 build would take a relocated record for damage, and lose the live
// data compaction moved into it once the old segment is gone).
inline constexpr uint32_t kStoreFormatVersion = 3;
inline constexpr uint32_t kOldestReadableStoreFormat = 1;
inline constexpr char kFormatFileName[] = "FORMAT";

// The version in DIR/FORMAT, or nullopt if there is no such file. kFailedPrecondition
// for a file that is not one line "msgr object store format N".
absl::StatusOr<std::optional<uint32_t>> ReadStoreFormat(const std::string& dir);

// Writes DIR/FORMAT for `version`, durably (fsync of the file and of the directory).
absl::Status WriteStoreFormat(const std::string& dir, uint32_t version);

// Open's check: OK for a store of kOldestReadableStoreFormat..kStoreFormatVersion
// (writing DIR/FORMAT for kStoreFormatVersion if it has none or an older one);
// kFailedPrecondition naming both versions and what to do for any other, e.g.
// "store in DIR has format 2, this OSD reads format 1: use a matching msgr build or a
// new --data-dir".
absl::Status CheckStoreFormat(const std::string& dir);

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_STORE_FORMAT_H_

// File-per-object baseline, kept only to measure the segment log against it
// (store_benchmark). Each Put writes "<oid>.tmp", fdatasyncs it (kDurable), renames it
// over "<oid>" and fsyncs the directory (kDurable). Whole-object writes only.
// Thread-safe for distinct oids (no shared state besides the directory).
#ifndef MSGR_OSD_SIM_STORE_FILE_STORE_H_
#define MSGR_OSD_SIM_STORE_FILE_STORE_H_

#include <sys/uio.h>

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "osd_sim/store/object_store.h"

namespace msgr::store {

class FileStore {
 public:
  static absl::StatusOr<std::unique_ptr<FileStore>> Open(const std::string& dir, Durability mode);

  // Replaces object `oid` with the iovec bytes; returns once durable per the mode.
  // REQUIRES: oid is a valid file name.
  absl::Status Put(std::string_view oid, const struct iovec* iov, int iovcnt);
  absl::StatusOr<std::string> Read(std::string_view oid);

 private:
  FileStore(std::string dir, Durability mode) : dir_(std::move(dir)), mode_(mode) {}
  const std::string dir_;
  const Durability mode_;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_FILE_STORE_H_

// Small POSIX file helpers (the monitor's map, the daemons' address files): a whole-file
// read, and an atomic whole-file replace (temp file + fsync + rename + fsync of the directory).
//
// Thread-safety: all functions are thread-safe as long as callers do not write the same
// path concurrently (two writers of one path race on its temp file).
#ifndef MSGR_MSG_BASE_FILE_UTIL_H_
#define MSGR_MSG_BASE_FILE_UTIL_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace msgr {

// Creates `dir` (and missing parents) with mode 0755 if it does not exist.
absl::Status MakeDirs(const std::string& dir);

// Replaces `path` with `contents` atomically: after a crash at any point, `path` holds
// either its old contents or the new ones, never a mix. Writes `path + ".tmp"`, fsyncs
// it, renames it over `path`, then fsyncs the parent directory. A stale temp file left by
// an earlier crash is simply overwritten.
absl::Status WriteFileAtomic(const std::string& path, absl::string_view contents);

// Reads the whole file. NOT_FOUND if it does not exist.
absl::StatusOr<std::string> ReadFile(const std::string& path);

}  // namespace msgr

#endif  // MSGR_MSG_BASE_FILE_UTIL_H_

// The thrasher's object contents and history records (tools/thrash.sh, tools/thrash/check.py).
//
// Contents of version v of object `oid` (size >= kHeaderBytes):
//   ["MTHR" | u32 0 | u64 v, little-endian | MakePattern(oid "@" v, size - 16)]
// so a read tells which version it got, and whether that version's bytes are intact.
//
// History: one JSON object per line, appended (and flushed) by the workload process:
//   {"ev":"start","c":K,"op":"w|d|r","oid":..,"v":V,"size":N,"t":NS}  before the call
//   {"ev":"end","c":K,"op":..,"oid":..,"v":V,"t":NS,"ok":true|false,"err":"..",
//    "got":G,"corrupt":"..."}                                            after it
// t is CLOCK_MONOTONIC in nanoseconds (the same clock in every process of the host, and
// Python's time.monotonic_ns()). For reads, got is the version read (0: no such object);
// a read that failed has ok false and err saying why. A write or delete with a start and no
// end (its process was killed) or ok false is indeterminate.
// Thread-compatible.
#ifndef MSGR_CLIENT_THRASH_HISTORY_H_
#define MSGR_CLIENT_THRASH_HISTORY_H_

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace msgr::thrash {

inline constexpr size_t kHeaderBytes = 16;

std::string MakeContent(std::string_view oid, uint64_t version, size_t size);

// The version `data` holds; DATA_LOSS saying what is wrong if it is not exactly some
// version's contents of `oid`.
absl::StatusOr<uint64_t> CheckContent(std::string_view oid, std::string_view data);

uint64_t MonotonicNanos();

// The highest version this workload process (`client`) started per object, from an
// existing history file (a restarted process continues above them). A torn last line
// (the process was killed while writing it) is skipped.
std::map<std::string, uint64_t> VersionsInHistory(const std::string& path, int client);

}  // namespace msgr::thrash

#endif  // MSGR_CLIENT_THRASH_HISTORY_H_

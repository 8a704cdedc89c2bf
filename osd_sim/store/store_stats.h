// Counters the object store exposes (ObjectStore::GetStats returns a snapshot).
#ifndef MSGR_OSD_SIM_STORE_STORE_STATS_H_
#define MSGR_OSD_SIM_STORE_STORE_STATS_H_

#include <array>
#include <cstdint>
#include <string>

namespace msgr::store {

// Flush latency histogram: bucket i counts flushes with latency < 2^i us (last: rest).
inline constexpr int kFlushLatencyBuckets = 24;

struct StoreStats {
  // Writes.
  uint64_t appends = 0;        // successful appends
  uint64_t append_bytes = 0;   // payload bytes of successful appends
  uint64_t append_errors = 0;  // appends that failed (full, I/O error)
  uint64_t full_errors = 0;    // of which "store full"
  uint64_t direct_appends = 0; // of the successful appends, written with O_DIRECT
  uint64_t direct_fallbacks = 0; // of those, refused by O_DIRECT (EINVAL), written buffered
  uint64_t log_bytes = 0;      // bytes the log occupies (records + padding)
  // Writes of several records (ObjectStore::AppendPart) aborted by the caller or found
  // incomplete by recovery, and parts that arrived for a write no longer open.
  uint64_t writes_aborted = 0;
  uint64_t orphan_parts = 0;
  uint64_t objects = 0;
  uint64_t segments = 0;
  // Group commit.
  uint64_t flushes = 0;          // fdatasync rounds
  uint64_t flushed_appends = 0;  // appends made durable by those rounds
  uint64_t max_batch = 0;        // most appends covered by one round
  uint64_t flush_latency_sum_us = 0;
  uint64_t flush_latency_max_us = 0;
  std::array<uint64_t, kFlushLatencyBuckets> flush_latency_hist{};
  // Recovery (Open).
  uint64_t recovered_records = 0;
  uint64_t torn_records = 0;  // discarded at segment tails
  uint64_t torn_bytes = 0;
  uint64_t corrupt_records = 0;  // skipped in the middle of the log
  uint64_t corrupt_bytes = 0;
  // Run-time reads.
  uint64_t read_crc_errors = 0;

  std::string ToString() const;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_STORE_STATS_H_

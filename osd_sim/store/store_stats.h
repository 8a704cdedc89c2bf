// Counters the object store exposes (ObjectStore::GetStats returns a snapshot), listed
// once (msg/base/perf_counters.h).
#ifndef MSGR_OSD_SIM_STORE_STORE_STATS_H_
#define MSGR_OSD_SIM_STORE_STORE_STATS_H_

#include <array>
#include <cstdint>
#include <string>

#include "msg/base/perf_counters.h"

namespace msgr::store {

// Latency of each fdatasync round (its distribution; the sum and max are counters).
inline constexpr HistogramDesc kFlushLatencyDesc{
    "flush_latency", "latency of one group-commit round (fdatasync of the batch's segments)"};

#define MSGR_STORE_COUNTERS(X)                                                               \
  /* Writes. */                                                                              \
  X(appends, kCounter, kNone, "successful appends")                                          \
  X(append_bytes, kCounter, kBytes, "payload bytes of successful appends")                   \
  X(payload_bytes_copied, kCounter, kBytes,                                                  \
    "of those, bytes the CPU copied (memory mode; buffered writes into the page cache)")     \
  X(append_errors, kCounter, kNone, "appends that failed (full, I/O error)")                 \
  X(full_errors, kCounter, kNone, "of the failed appends, those refused as 'store full'")    \
  X(direct_appends, kCounter, kNone, "successful appends written with O_DIRECT from the ring") \
  X(direct_fallbacks, kCounter, kNone, "O_DIRECT appends refused (EINVAL), written buffered") \
  X(log_bytes, kGauge, kBytes, "bytes the log occupies (records + padding)")                 \
  /* Writes of several records aborted by the caller or found incomplete by recovery, */     \
  /* and parts that arrived for a write no longer open. */                                   \
  X(writes_aborted, kCounter, kNone, "writes of several records aborted or left incomplete") \
  X(orphan_parts, kCounter, kNone, "parts that arrived for a write no longer open")          \
  X(objects, kGauge, kNone, "objects in the index")                                          \
  X(thread_cpu_ns, kCounter, kNanoseconds,                                                   \
    "CPU time of the store's threads (store-io, store-flush, store-compact)")                \
  X(segments, kGauge, kNone, "log segments")                                                 \
  /* Space: live = records the index references; dead = the rest of log_bytes. */          \
  X(live_bytes, kGauge, kBytes, "log bytes of records the index references (memory: payloads)") \
  X(dead_bytes, kGauge, kBytes, "log bytes of overwritten, deleted or unused records")       \
  /* Compaction. */                                                                          \
  X(compactions, kCounter, kNone, "segments whose live records were copied forward")        \
  X(segments_freed, kCounter, kNone, "segments deleted by compaction")                       \
  X(records_relocated, kCounter, kNone, "live records copied forward by compaction")         \
  X(bytes_relocated, kCounter, kBytes, "payload bytes copied forward by compaction")         \
  X(bytes_reclaimed, kCounter, kBytes, "file bytes of the segments compaction deleted")      \
  X(deletes_kept, kCounter, kNone,                                                           \
    "delete records copied forward (an older record of the object was still in the log)")   \
  X(compaction_crc_errors, kCounter, kNone,                                                  \
    "live payloads that failed their crc when compaction copied them (segment kept)")        \
  X(compaction_errors, kCounter, kNone, "compactions stopped by an I/O error")               \
  /* Group commit. */                                                                        \
  X(flushes, kCounter, kNone, "fdatasync rounds")                                            \
  X(flushed_appends, kCounter, kNone, "appends made durable by those rounds")                \
  X(max_batch, kGauge, kNone, "most appends covered by one round")                           \
  X(flushes_at_once, kCounter, kNone,                                                        \
    "rounds that did not wait the group-commit window (writes were arriving further apart)") \
  X(flush_latency_sum_us, kCounter, kNone, "sum of flush latencies, microseconds")           \
  X(flush_latency_max_us, kGauge, kNone, "longest flush, microseconds")                      \
  /* Zeroing ahead of the tail (StoreOptions::zero_ahead_bytes). */                         \
  X(zeroed_bytes, kCounter, kBytes, "bytes of the active segment written with zeros ahead of its tail") \
  X(zero_waits, kCounter, kNone, "appends that waited for a zeroing write of their range to end") \
  /* Recovery (Open). */                                                                     \
  X(recovered_records, kCounter, kNone, "records found by recovery")                         \
  X(torn_records, kCounter, kNone, "records discarded at segment tails")                     \
  X(torn_bytes, kCounter, kBytes, "bytes discarded at segment tails")                        \
  X(corrupt_records, kCounter, kNone, "records skipped in the middle of the log")            \
  X(corrupt_bytes, kCounter, kBytes, "bytes skipped in the middle of the log")               \
  /* Run-time reads. */                                                                      \
  X(read_crc_errors, kCounter, kNone, "reads that found a bad crc32c")

MSGR_COUNTER_SNAPSHOT(StoreCounters, MSGR_STORE_COUNTERS);

struct StoreStats : StoreCounters {
  HistogramValue flush_latency{&kFlushLatencyDesc};

  // The counters and the flush latency histogram, for the registry.
  CounterGroup Group(std::string group_name) const {
    CounterGroup g = StoreCounters::Group(std::move(group_name));
    g.histograms.push_back(flush_latency);
    return g;
  }
  std::string ToString() const;
};

}  // namespace msgr::store

#endif  // MSGR_OSD_SIM_STORE_STORE_STATS_H_

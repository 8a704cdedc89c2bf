// RDMA-specific counters of an "rdma" messenger, beyond MessengerCounters: what was
// registered, how credits and wake-ups travelled, what was written from caller memory and
// what was staged. Listed once (msg/base/perf_counters.h); they reach perf dump as the
// messenger's "rdma" group (Messenger::perf_counters). RdmaStatsOf() gives the typed
// snapshot, for tests; it returns nullopt for a messenger of another backend.
#ifndef MSGR_MSG_RDMA_RDMA_STATS_H_
#define MSGR_MSG_RDMA_RDMA_STATS_H_

#include <cstdint>
#include <optional>

#include "msg/base/perf_counters.h"
#include "msg/messenger.h"

namespace msgr::rdma {

#define MSGR_RDMA_COUNTERS(X)                                                                 \
  X(registered_bytes, kGauge, kBytes, "registered memory held now, all connections")          \
  X(registered_max_bytes, kGauge, kBytes, "registered-memory budget (rdma_max_registered_mb)") \
  X(registration_refusals, kCounter, kNone,                                                   \
    "registrations the budget refused (sessions refused; payloads staged instead)")           \
  X(ring_credit_writes, kCounter, kNone, "OSD: released ring positions RDMA-written to peers") \
  X(sleep_word_writes, kCounter, kNone, "OSD: poller sleep/wake words written to peers")      \
  X(doorbells_sent, kCounter, kNone, "client: wake-ups sent to a sleeping poller")            \
  X(doorbells_received, kCounter, kNone, "OSD: wake-ups received")                           \
  X(record_imms_sent, kCounter, kNone, "client: records whose seq WRITE went WITH_IMM")     \
  X(record_imms_owed, kCounter, kNone,                                                        \
    "client: records posted without their imm (no credit); announced later")                 \
  X(record_imms_received, kCounter, kNone, "OSD: record imms its pollers' notifiers reaped")  \
  X(imm_count_writes, kCounter, kNone, "OSD: record-imm counts written to clients")          \
  X(credit_wakeups_asked, kCounter, kNone,                                                    \
    "client: times its completion thread asked for a credit WITH_IMM and slept")              \
  X(credit_wakeups_sent, kCounter, kNone, "OSD: ring credits written WITH_IMM (a client slept)") \
  X(record_payload_bytes_staged, kCounter, kBytes,                                            \
    "client: record payload copied into the registered staging mirror")                       \
  X(zero_copy_records, kCounter, kNone, "client: records written from caller memory")         \
  X(record_buffer_records, kCounter, kNone,                                                   \
    "client: of those, from a registered record buffer (AllocRecordBuffer: no registration)") \
  X(record_buffers_registered, kCounter, kNone,                                               \
    "record buffers registered (AllocRecordBuffer found none of its size to reuse)")          \
  X(record_buffers_unregistered, kCounter, kNone,                                             \
    "record buffers made of plain memory: the budget refused (their writes are staged)")      \
  X(record_buffer_cached_bytes, kGauge, kBytes,                                               \
    "registered record buffers let go, on the free lists for reuse")                          \
  X(sends_posted, kCounter, kNone, "SEND work requests posted")                               \
  X(recvs_completed, kCounter, kNone, "RECV completions reaped")                             \
  X(control_sends, kCounter, kNone, "control-only SENDs (acks, credits, doorbells)")              \
  X(record_writes_posted, kCounter, kNone, "RDMA WRITE work requests for ring records")       \
  X(qp_faults, kCounter, kNone, "QP errors and lost side channels handled")                   \
  X(ring_reregistrations, kCounter, kNone, "OSD: rings given new keys when a session resumed") \
  X(ring_resizes, kCounter, kNone,                                                            \
    "rings replaced by one of another size (client: asked and got; OSD: made)")               \
  X(peer_access_violations, kCounter, kNone,                                                  \
    "sessions cut off: the peer's RDMA access was refused")                                   \
  X(cutoff_refusals, kCounter, kNone, "connections of a cut-off peer refused while banned")    \
  X(cq_idle_periods, kCounter, kNone,                                                         \
    "completion thread: idle periods (an empty look after work, until the next work; a "     \
    "shared thread's count, for every messenger of the process it drives)")                   \
  X(cq_sleeps_at_once, kCounter, kNone,                                                       \
    "of those, slept without spinning: its adaptive spin found spinning did not pay")

MSGR_COUNTER_SNAPSHOT(RdmaStats, MSGR_RDMA_COUNTERS);

std::optional<RdmaStats> RdmaStatsOf(const Messenger& m);

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_STATS_H_

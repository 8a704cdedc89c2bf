// RDMA-specific counters of an "rdma" messenger, beyond MessengerCounters: what was
// registered, how credits and wake-ups travelled, and proof that the receive path copies
// no record payload. RdmaStatsOf() returns nullopt for a messenger of another backend.
#ifndef MSGR_MSG_RDMA_RDMA_STATS_H_
#define MSGR_MSG_RDMA_RDMA_STATS_H_

#include <cstdint>
#include <optional>

#include "msg/messenger.h"

namespace msgr::rdma {

struct RdmaStats {
  uint64_t registered_bytes = 0;       // registered memory currently held (all connections)
  uint64_t registered_max_bytes = 0;   // the budget (backend option rdma_max_registered_mb)
  uint64_t registration_refusals = 0;  // registrations refused by the budget (sessions
                                       // refused; zero-copy payloads copied instead)
  uint64_t ring_credit_writes = 0;     // OSD: released positions RDMA-written to clients
  uint64_t ring_credit_messages = 0;   // ring credits sent as messages (always 0: by design)
  uint64_t sleep_word_writes = 0;      // OSD: poller sleep/wake words written to clients
  uint64_t doorbells_sent = 0;         // client: wake-ups sent to a sleeping poller
  uint64_t doorbells_received = 0;     // OSD
  uint64_t record_payload_bytes_copied_rx = 0;  // OSD CPU copies of record payload (0)
  uint64_t record_payload_bytes_staged = 0;     // client: payload copied into the staging mirror
  uint64_t zero_copy_records = 0;               // client: payloads written from caller memory
  uint64_t sends_posted = 0, recvs_completed = 0, control_sends = 0;
  uint64_t record_writes_posted = 0;   // RDMA WRITE work requests for ring records
  uint64_t qp_faults = 0;              // QP errors / lost side channels handled
  uint64_t ring_reregistrations = 0;   // OSD: rings given new keys when a session resumed
  uint64_t peer_access_violations = 0; // sessions cut off: the peer's RDMA access was refused
  uint64_t cutoff_refusals = 0;        // connections of such a peer refused while banned
};

std::optional<RdmaStats> RdmaStatsOf(const Messenger& m);

}  // namespace msgr::rdma

#endif  // MSGR_MSG_RDMA_RDMA_STATS_H_

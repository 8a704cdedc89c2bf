// The live counters every backend keeps (relaxed atomics, bumped on the data path), and
// their conversion to the MessengerCounters snapshot of msg/messenger.h. Backends derive
// their own counter struct from it to add what only they count.
// Thread-safety: every field may be incremented and read from any thread.
#ifndef MSGR_MSG_MESSENGER_COUNTERS_H_
#define MSGR_MSG_MESSENGER_COUNTERS_H_

#include <atomic>
#include <cstdint>

#include "msg/messenger.h"

namespace msgr {

struct LiveMessengerCounters {
  std::atomic<uint64_t> msgs_sent{0}, msgs_received{0};
  std::atomic<uint64_t> bytes_sent{0}, bytes_received{0};
  std::atomic<uint64_t> records_sent{0}, records_received{0};
  std::atomic<uint64_t> record_bytes_sent{0}, record_bytes_received{0};
  std::atomic<uint64_t> resends{0}, duplicates_dropped{0};
  std::atomic<uint64_t> resets{0}, reconnects{0};
  std::atomic<uint64_t> crc_errors{0}, protocol_errors{0}, auth_failures{0};
  std::atomic<uint64_t> throttle_waits{0}, ring_credit_waits{0};
  std::atomic<uint64_t> keepalives_sent{0};
  std::atomic<uint64_t> connections_open{0};

  MessengerCounters Snapshot() const {
    MessengerCounters c;
    c.msgs_sent = msgs_sent;
    c.msgs_received = msgs_received;
    c.bytes_sent = bytes_sent;
    c.bytes_received = bytes_received;
    c.records_sent = records_sent;
    c.records_received = records_received;
    c.record_bytes_sent = record_bytes_sent;
    c.record_bytes_received = record_bytes_received;
    c.resends = resends;
    c.duplicates_dropped = duplicates_dropped;
    c.resets = resets;
    c.reconnects = reconnects;
    c.crc_errors = crc_errors;
    c.protocol_errors = protocol_errors;
    c.auth_failures = auth_failures;
    c.throttle_waits = throttle_waits;
    c.ring_credit_waits = ring_credit_waits;
    c.keepalives_sent = keepalives_sent;
    c.connections_open = connections_open;
    return c;
  }
};

}  // namespace msgr

#endif  // MSGR_MSG_MESSENGER_COUNTERS_H_

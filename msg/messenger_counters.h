// The live counters every backend keeps (relaxed atomics, bumped on the data path), from
// the one list in msg/messenger.h; Snapshot() gives its MessengerCounters. Backends
// derive their own counter struct from it to add what only they count.
// Thread-safety: every field may be incremented and read from any thread.
#ifndef MSGR_MSG_MESSENGER_COUNTERS_H_
#define MSGR_MSG_MESSENGER_COUNTERS_H_

#include "msg/base/perf_counters.h"
#include "msg/messenger.h"

namespace msgr {

MSGR_COUNTER_LIVE(LiveMessengerCounters, MessengerCounters, MSGR_MESSENGER_COUNTERS);

}  // namespace msgr

#endif  // MSGR_MSG_MESSENGER_COUNTERS_H_

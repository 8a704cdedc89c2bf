// The role of an OSD thread, from the name it gave itself (pthread_setname_np), for the
// bench's split of OSD CPU by role:
//   transport  ms-tcp-io, ms-rdma-cq, ms-rdma-disp, soft-hca  (the messengers, soft HCA)
//   poller     osd-poller-N                                     (ring consumers)
//   store      store-io, store-flush, store-compact             (object store threads)
//   other      everything else: the main thread, gRPC's, osd-read, the admin socket
// (The "crc" role of the report is not a thread: it is carved out of the pollers' time
// from their perf counters; see bench_report.h.)
//
// Thread-safety: pure functions.
#ifndef MSGR_CLIENT_BENCH_THREAD_ROLE_H_
#define MSGR_CLIENT_BENCH_THREAD_ROLE_H_

#include <array>
#include <string_view>
#include <vector>

#include "client/bench/cpu_usage.h"

namespace msgr::bench {

enum class ThreadRole { kTransport = 0, kPoller, kStore, kOther };
inline constexpr int kThreadRoles = 4;

ThreadRole RoleOfThread(std::string_view comm);
const char* ThreadRoleName(ThreadRole role);  // "transport", "poller", "store", "other"

// CPU seconds per role, indexed by static_cast<int>(ThreadRole).
using RoleCpu = std::array<double, kThreadRoles>;

// Adds each thread's cpu_s to its role's total in `sum`.
void AddByRole(const std::vector<ThreadCpu>& threads, RoleCpu* sum);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_THREAD_ROLE_H_

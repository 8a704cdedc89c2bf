// Counts heap allocations, for tests that assert a path allocates nothing per op.
//
// Linking this library replaces the global operator new (every form) with one that
// counts, then calls malloc. AllocationsOnThisThread() counts this thread's calls only,
// so a test can measure the work its own thread does while other threads run.
#ifndef MSGR_TESTS_MSG_BASE_ALLOC_COUNTER_H_
#define MSGR_TESTS_MSG_BASE_ALLOC_COUNTER_H_

#include <cstdint>

namespace msgr::testing {

uint64_t AllocationsOnThisThread();
uint64_t AllocationsOnAllThreads();

}  // namespace msgr::testing

#endif  // MSGR_TESTS_MSG_BASE_ALLOC_COUNTER_H_

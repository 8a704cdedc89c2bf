// KeepFreedMemoryForReuse: a store-like churn of 4 MiB buffers -- a window of live ones,
// each new one allocated and filled on one thread and an old one freed on another --
// faults in new pages only while the window fills, not for every buffer after it.
// (With glibc's defaults the same churn faults ~155 times per buffer; the policy: ~5.)
#include "msg/base/malloc_policy.h"

#include <sys/resource.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <thread>

#include "gtest/gtest.h"

namespace msgr {
namespace {

long MinorFaults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr bool kOwnAllocator = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
constexpr bool kOwnAllocator = true;
#else
constexpr bool kOwnAllocator = false;
#endif
#else
constexpr bool kOwnAllocator = false;
#endif

TEST(MallocPolicyTest, ChurnedPayloadBuffersAreReusedWithoutNewFaults) {
  if (kOwnAllocator) GTEST_SKIP() << "the sanitizer's allocator ignores glibc's mallopt";
  KeepFreedMemoryForReuse();
  constexpr size_t kSize = 4 << 20;
  constexpr int kLive = 32;
  constexpr int kRounds = 256;
  constexpr long kPages = kSize / 4096;
  std::deque<char*> live;
  const long start = MinorFaults();
  long warm = 0;  // faults once the window is full
  for (int i = 0; i < kRounds; ++i) {
    if (i == kLive) warm = MinorFaults();
    char* p = nullptr;
    std::thread([&p, i] {
      p = static_cast<char*>(std::malloc(kSize));
      std::memset(p, i, kSize);
    }).join();
    ASSERT_NE(p, nullptr);
    live.push_back(p);
    if (live.size() > kLive) {
      char* old = live.front();
      live.pop_front();
      std::thread([old] { std::free(old); }).join();
    }
  }
  const long steady = MinorFaults() - warm;
  for (char* p : live) std::free(p);
  // The count is real: filling the first window touched every page of it.
  EXPECT_GE(warm - start, kLive * kPages / 2);
  EXPECT_LT(steady, (kRounds - kLive) * kPages / 16)
      << steady / (kRounds - kLive) << " faults per buffer after the window filled";
}

}  // namespace
}  // namespace msgr

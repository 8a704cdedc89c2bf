#include "tests/msg/base/alloc_counter.h"

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <new>

namespace msgr::testing {
namespace {

thread_local uint64_t this_thread_count = 0;
std::atomic<uint64_t> all_count{0};

void* Counted(std::size_t n, std::size_t align) {
  ++this_thread_count;
  all_count.fetch_add(1, std::memory_order_relaxed);
  if (n == 0) n = 1;
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n);
  return p;
}

void* CountedOrThrow(std::size_t n, std::size_t align) {
  void* p = Counted(n, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

uint64_t AllocationsOnThisThread() { return this_thread_count; }
uint64_t AllocationsOnAllThreads() { return all_count.load(std::memory_order_relaxed); }

}  // namespace msgr::testing

using msgr::testing::Counted;
using msgr::testing::CountedOrThrow;

void* operator new(std::size_t n) { return CountedOrThrow(n, 0); }
void* operator new[](std::size_t n) { return CountedOrThrow(n, 0); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept { return Counted(n, 0); }
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept { return Counted(n, 0); }
void* operator new(std::size_t n, std::align_val_t a) {
  return CountedOrThrow(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return CountedOrThrow(n, static_cast<std::size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }

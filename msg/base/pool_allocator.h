// PoolAllocator<T>: a standard allocator over Boost.Pool's singleton pool for blocks of
// T's size, which keeps freed blocks for the next user: objects made per op
// (std::allocate_shared<T>(PoolAllocator<T>())) cost no heap allocation once the pool
// holds as many as are alive at once.
//
// Not boost::fast_pool_allocator itself: each of its constructors takes the pool's mutex
// (to force the singleton's construction, Boost ticket #2359), and allocate_shared
// constructs one and rebinds it twice per object, so an object cost five acquisitions of
// that mutex. This one takes it once to allocate and once to free. The singleton is still
// constructed before main (its static creator is instantiated with the pool).
//
// Thread-safety: allocate and free from any thread (the pool's own mutex).
#ifndef MSGR_MSG_BASE_POOL_ALLOCATOR_H_
#define MSGR_MSG_BASE_POOL_ALLOCATOR_H_

#include <cstddef>
#include <new>

#include "boost/pool/pool_alloc.hpp"
#include "boost/pool/singleton_pool.hpp"

namespace msgr {

template <typename T>
struct PoolAllocator {
  // Boost.Pool aligns its blocks for pointers only.
  static_assert(alignof(T) <= alignof(void*), "PoolAllocator: T needs more than pointer alignment");
  using value_type = T;
  // The tag and size fast_pool_allocator uses: blocks of one size are shared with it.
  using Pool = boost::singleton_pool<boost::fast_pool_allocator_tag, sizeof(T)>;

  PoolAllocator() = default;
  template <typename U>
  PoolAllocator(const PoolAllocator<U>&) {}  // NOLINT(runtime/explicit): rebinding

  // allocate_shared asks for one at a time; arrays (never asked for) come from the heap.
  T* allocate(size_t n) {
    if (n != 1) return static_cast<T*>(::operator new(n * sizeof(T)));
    void* p = Pool::malloc();
    if (p == nullptr) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, size_t n) {
    if (n != 1) return ::operator delete(p);
    Pool::free(p);
  }
  template <typename U>
  bool operator==(const PoolAllocator<U>&) const {
    return true;
  }
  template <typename U>
  bool operator!=(const PoolAllocator<U>&) const {
    return false;
  }
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_POOL_ALLOCATOR_H_

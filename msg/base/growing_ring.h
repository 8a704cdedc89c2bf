// A FIFO queue that allocates nothing once it has grown to its working size.
//
// std::deque frees a block as the front leaves it and allocates one as the back needs it:
// a queue with steady churn (records in flight, acks to come) allocates every few hundred
// bytes pushed. GrowingRing keeps its elements in one boost::circular_buffer, doubles it
// when it is full and never shrinks it, so push and pop cost no allocation after warm-up.
// Elements move when it grows: keep no pointers or iterators across a push or insert.
#ifndef MSGR_MSG_BASE_GROWING_RING_H_
#define MSGR_MSG_BASE_GROWING_RING_H_

#include <algorithm>
#include <cstddef>
#include <utility>

#include "boost/circular_buffer.hpp"

namespace msgr {

template <typename T>
class GrowingRing {
 public:
  using Buffer = boost::circular_buffer<T>;
  using iterator = typename Buffer::iterator;
  using const_iterator = typename Buffer::const_iterator;
  using reverse_iterator = typename Buffer::reverse_iterator;

  bool empty() const { return q_.empty(); }
  size_t size() const { return q_.size(); }
  T& front() { return q_.front(); }
  const T& front() const { return q_.front(); }
  T& back() { return q_.back(); }
  iterator begin() { return q_.begin(); }
  iterator end() { return q_.end(); }
  const_iterator begin() const { return q_.begin(); }
  const_iterator end() const { return q_.end(); }
  reverse_iterator rbegin() { return q_.rbegin(); }
  reverse_iterator rend() { return q_.rend(); }

  void push_back(T v) {
    GrowIfFull();
    q_.push_back(std::move(v));
  }
  // Before `at` (an iterator of this ring).
  iterator insert(iterator at, T v) {
    if (q_.full()) {
      const auto index = at - q_.begin();
      GrowIfFull();
      at = q_.begin() + index;
    }
    return q_.insert(at, std::move(v));
  }
  void pop_front() { q_.pop_front(); }
  void clear() { q_.clear(); }  // keeps the capacity

 private:
  static constexpr size_t kFirstCapacity = 16;
  void GrowIfFull() {
    if (q_.full()) q_.set_capacity(std::max(kFirstCapacity, q_.capacity() * 2));
  }
  Buffer q_;
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_GROWING_RING_H_

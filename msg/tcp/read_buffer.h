// ReadBuffer: a connection's receive buffer. One read_some into it usually brings in
// many small frames, so the reader makes one recv per batch instead of one per header,
// prefix and payload. Large frame bodies bypass it (see kDirectReadMinBytes in reader.cc).
//
// Layout: [consumed | unread (data(), size()) | free tail (PrepareRead())].
// Single owner (the connection's strand): thread-compatible.
#ifndef MSGR_MSG_TCP_READ_BUFFER_H_
#define MSGR_MSG_TCP_READ_BUFFER_H_

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>

namespace msgr::tcp {

class ReadBuffer {
 public:
  explicit ReadBuffer(size_t capacity) : capacity_(capacity) {}

  const uint8_t* data() const { return buf_.get() + rpos_; }
  size_t size() const { return wpos_ - rpos_; }
  size_t capacity() const { return capacity_; }

  // REQUIRES: n <= size().
  void Consume(size_t n) {
    assert(n <= size());
    rpos_ += n;
    if (rpos_ == wpos_) rpos_ = wpos_ = 0;
  }

  // Moves the unread bytes to the front (the reader only asks for more when fewer than
  // a frame header are left, so this copies < 48 bytes) and returns the free tail.
  // The memory is allocated on first use (a socket's first queued read).
  uint8_t* PrepareRead(size_t* room) {
    if (!buf_) buf_.reset(new uint8_t[capacity_]);
    if (rpos_ > 0) {
      std::memmove(buf_.get(), buf_.get() + rpos_, wpos_ - rpos_);
      wpos_ -= rpos_;
      rpos_ = 0;
    }
    *room = capacity_ - wpos_;
    return buf_.get() + wpos_;
  }
  // `n` bytes were read into the tail returned by PrepareRead.
  void Commit(size_t n) {
    assert(wpos_ + n <= capacity_);
    wpos_ += n;
  }

  // Drops everything (a new socket starts on a frame boundary).
  void Clear() { rpos_ = wpos_ = 0; }

 private:
  const size_t capacity_;
  std::unique_ptr<uint8_t[]> buf_;
  size_t rpos_ = 0;
  size_t wpos_ = 0;
};

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_READ_BUFFER_H_

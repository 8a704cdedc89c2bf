// Little-endian field encoding for frames and handshake payloads (msg/PROTOCOL.md).
//
// WireWriter appends to a std::string; WireReader reads from a byte span and never
// reads past its end (every getter returns false instead). msgr only runs on
// little-endian hosts (static_asserted in msg/ring/ring_format.h), so fields are copied
// as they are. Not thread-safe; use one object per thread.
#ifndef MSGR_MSG_BASE_WIRE_H_
#define MSGR_MSG_BASE_WIRE_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace msgr {

template <typename T>
inline void StoreLe(uint8_t* p, T v) {
  std::memcpy(p, &v, sizeof(v));
}
template <typename T>
inline T LoadLe(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

class WireWriter {
 public:
  explicit WireWriter(std::string* out) : out_(out) {}
  template <typename T>
  void Put(T v) {
    out_->append(reinterpret_cast<const char*>(&v), sizeof(v));
  }
  void PutBytes(std::string_view b) { out_->append(b.data(), b.size()); }
  // A u16 length then the bytes. REQUIRES: b.size() <= 65535.
  void PutString16(std::string_view b) {
    Put<uint16_t>(static_cast<uint16_t>(b.size()));
    PutBytes(b);
  }
  // A u32 length then the bytes (for payloads that may exceed 64 KiB).
  void PutString32(std::string_view b) {
    Put(static_cast<uint32_t>(b.size()));
    PutBytes(b);
  }

 private:
  std::string* out_;
};

class WireReader {
 public:
  WireReader(const void* data, size_t len) : p_(static_cast<const uint8_t*>(data)), left_(len) {}
  explicit WireReader(std::string_view s) : WireReader(s.data(), s.size()) {}

  template <typename T>
  bool Get(T* v) {
    if (left_ < sizeof(T)) return false;
    std::memcpy(v, p_, sizeof(T));
    p_ += sizeof(T);
    left_ -= sizeof(T);
    return true;
  }
  bool GetBytes(size_t n, std::string* out) {
    if (left_ < n) return false;
    out->assign(reinterpret_cast<const char*>(p_), n);
    p_ += n;
    left_ -= n;
    return true;
  }
  // A u16 length then at most `max` bytes.
  bool GetString16(size_t max, std::string* out) {
    uint16_t n;
    if (!Get(&n) || n > max) return false;
    return GetBytes(n, out);
  }
  // A u32 length then at most `max` bytes.
  bool GetString32(size_t max, std::string* out) {
    uint32_t n;
    if (!Get(&n) || n > max) return false;
    return GetBytes(n, out);
  }
  size_t remaining() const { return left_; }

 private:
  const uint8_t* p_;
  size_t left_;
};

}  // namespace msgr

#endif  // MSGR_MSG_BASE_WIRE_H_

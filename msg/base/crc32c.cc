#include "msg/base/crc32c.h"

#include <isa-l/crc.h>

#include <climits>

namespace msgr {

uint32_t Crc32c(uint32_t crc, const void* data, size_t len) {
  // ISA-L keeps the raw register (no pre/post inversion), so invert here to get the
  // standard crc32c values. Its length is an int: feed huge buffers in pieces.
  auto* p = static_cast<unsigned char*>(const_cast<void*>(data));
  uint32_t reg = ~crc;
  while (len > 0) {
    const int n = len > static_cast<size_t>(INT_MAX / 2) ? INT_MAX / 2 : static_cast<int>(len);
    reg = crc32_iscsi(p, n, reg);
    p += n;
    len -= static_cast<size_t>(n);
  }
  return ~reg;
}

}  // namespace msgr

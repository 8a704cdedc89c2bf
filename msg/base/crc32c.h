// crc32c (Castagnoli) for frames and ring records.
//
// Backed by ISA-L's crc32_iscsi (SSE4.2/PCLMUL-accelerated, as Ceph uses it).
// Thread-safe; no state.
#ifndef MSGR_MSG_BASE_CRC32C_H_
#define MSGR_MSG_BASE_CRC32C_H_

#include <cstddef>
#include <cstdint>

namespace msgr {

// Returns the crc32c of `len` bytes at `data`, continuing from `crc` (0 to start).
// Chaining is associative: Crc32c(Crc32c(0, a), b) == Crc32c(0, a + b).
uint32_t Crc32c(uint32_t crc, const void* data, size_t len);

}  // namespace msgr

#endif  // MSGR_MSG_BASE_CRC32C_H_

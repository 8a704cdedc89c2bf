// Deterministic object contents for the bench: any process can regenerate and verify an
// object from its id alone.
//
// Layout of an object of n bytes: [n as u64 LE | StableHash64(oid) as u64 LE | body],
// truncated to n bytes. The body is 64-bit words table[i % 1024] ^ seed ^ block(i / 1024)
// (seed from the oid), so it is cheap to generate (a vectorisable xor) and differs
// between objects and between 8 KiB blocks of one object. Because the size is part of
// the header, a torn or truncated object never verifies as a shorter valid one.
//
// Thread-safety: pure functions.
#ifndef MSGR_CLIENT_BENCH_PATTERN_H_
#define MSGR_CLIENT_BENCH_PATTERN_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace msgr::bench {

// Returns the `size`-byte contents of object `oid`.
std::string MakePattern(std::string_view oid, size_t size);
// The same bytes written to out[0, size) (a buffer the client sends without copying).
void FillPattern(std::string_view oid, char* out, size_t size);

// OK if `data` is exactly what MakePattern(oid, data.size()) gives; otherwise
// DATA_LOSS naming the first differing offset (or the size mismatch).
absl::Status VerifyPattern(std::string_view oid, std::string_view data);

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_PATTERN_H_

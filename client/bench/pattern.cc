#include "client/bench/pattern.h"

#include <array>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/placement.h"

namespace msgr::bench {
namespace {

constexpr size_t kTableWords = 1024;
constexpr size_t kHeaderBytes = 16;

uint64_t SplitMix(uint64_t* state) {
  uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

const std::array<uint64_t, kTableWords>& Table() {
  static const auto* t = [] {
    auto* a = new std::array<uint64_t, kTableWords>();
    uint64_t s = 0x6d736772u;  // "msgr"
    for (auto& w : *a) w = SplitMix(&s);
    return a;
  }();
  return *t;
}

// Hands the n body bytes (body words from word 0) to `put(bytes, len)`, 8 KiB at a time.
template <typename Put>
void ForEachBodyBlock(uint64_t seed, size_t n, Put put) {
  const auto& table = Table();
  uint64_t block_buf[kTableWords];
  size_t word = 0;
  while (n > 0) {
    uint64_t k = seed ^ ((word / kTableWords + 1) * 0xd6e8feb86659fd93ull);
    const size_t take = std::min(n, sizeof block_buf);
    const size_t words = (take + sizeof(uint64_t) - 1) / sizeof(uint64_t);
    for (size_t i = 0; i < words; ++i) block_buf[i] = table[i] ^ k;
    put(reinterpret_cast<const char*>(block_buf), take);
    n -= take;
    word += kTableWords;
  }
}

std::string Header(std::string_view oid, size_t size) {
  uint64_t h[2] = {static_cast<uint64_t>(size), placement::StableHash64(oid)};
  return std::string(reinterpret_cast<const char*>(h), kHeaderBytes);
}

}  // namespace

std::string MakePattern(std::string_view oid, size_t size) {
  // Appended, not filled into a zeroed string: at 4 MiB objects the zeroing pass cost as
  // much as the pattern itself.
  std::string out;
  out.reserve(size);
  out.append(Header(oid, size), 0, std::min(size, kHeaderBytes));
  if (size > kHeaderBytes) {
    ForEachBodyBlock(placement::StableHash64(oid), size - kHeaderBytes,
                     [&out](const char* p, size_t n) { out.append(p, n); });
  }
  return out;
}

void FillPattern(std::string_view oid, char* out, size_t size) {
  const std::string h = Header(oid, size);
  std::memcpy(out, h.data(), std::min(size, kHeaderBytes));
  if (size <= kHeaderBytes) return;
  out += kHeaderBytes;
  ForEachBodyBlock(placement::StableHash64(oid), size - kHeaderBytes,
                   [&out](const char* p, size_t n) {
                     std::memcpy(out, p, n);
                     out += n;
                   });
}

absl::Status VerifyPattern(std::string_view oid, std::string_view data) {
  if (data.size() >= 8) {
    uint64_t stored;
    std::memcpy(&stored, data.data(), sizeof stored);
    if (stored != data.size()) {
      return absl::DataLossError(absl::StrCat(std::string(oid), ": ", data.size(),
                                              " bytes but the pattern header says ", stored));
    }
  }
  std::string want = MakePattern(oid, data.size());
  if (want == data) return absl::OkStatus();
  size_t i = 0;
  while (i < data.size() && want[i] == data[i]) ++i;
  return absl::DataLossError(
      absl::StrCat(std::string(oid), ": content differs from its pattern at offset ", i, " of ", data.size()));
}

}  // namespace msgr::bench

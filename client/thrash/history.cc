#include "client/thrash/history.h"

#include <time.h>

#include <cstring>
#include <fstream>

#include "absl/strings/str_cat.h"
#include "client/bench/pattern.h"
#include "nlohmann/json.hpp"

namespace msgr::thrash {
namespace {

constexpr char kMagic[4] = {'M', 'T', 'H', 'R'};

std::string PatternKey(std::string_view oid, uint64_t version) {
  return absl::StrCat(absl::string_view(oid.data(), oid.size()), "@", version);
}

}  // namespace

std::string MakeContent(std::string_view oid, uint64_t version, size_t size) {
  std::string out(kHeaderBytes, '\0');
  std::memcpy(out.data(), kMagic, sizeof kMagic);
  for (int i = 0; i < 8; ++i) out[8 + i] = static_cast<char>(version >> (8 * i));
  if (size > kHeaderBytes) out += bench::MakePattern(PatternKey(oid, version), size - kHeaderBytes);
  out.resize(size);
  return out;
}

absl::StatusOr<uint64_t> CheckContent(std::string_view oid, std::string_view data) {
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0) {
    return absl::DataLossError(absl::StrCat("no thrasher header (", data.size(), " bytes)"));
  }
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<uint64_t>(static_cast<uint8_t>(data[8 + i])) << (8 * i);
  absl::Status s = bench::VerifyPattern(PatternKey(oid, v), data.substr(kHeaderBytes));
  if (!s.ok()) return absl::DataLossError(absl::StrCat("version ", v, ": ", s.message()));
  return v;
}

uint64_t MonotonicNanos() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

std::map<std::string, uint64_t> VersionsInHistory(const std::string& path, int client) {
  std::map<std::string, uint64_t> versions;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    auto j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object() || j.value("c", -1) != client ||
        j.value("ev", "") != "start" || j.value("op", "") == "r") {
      continue;
    }
    uint64_t& v = versions[j.value("oid", "")];
    v = std::max(v, j.value("v", uint64_t{0}));
  }
  return versions;
}

}  // namespace msgr::thrash

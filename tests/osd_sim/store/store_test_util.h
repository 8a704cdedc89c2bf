// Helpers shared by the object store tests: deterministic payloads, fresh
// directories, one-buffer appends, segment files read and rewritten whole.
#ifndef MSGR_TESTS_OSD_SIM_STORE_STORE_TEST_UTIL_H_
#define MSGR_TESTS_OSD_SIM_STORE_STORE_TEST_UTIL_H_

#include <sys/uio.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gtest/gtest.h"

#include "msg/base/crc32c.h"
#include "osd_sim/store/object_store.h"

namespace msgr::store::testing {

// `len` bytes that depend only on (oid, version): a reader can recompute them.
inline std::string Pattern(std::string_view oid, size_t len, uint64_t version = 0) {
  uint64_t x = 0x9e3779b97f4a7c15ull ^ (version * 0xbf58476d1ce4e5b9ull);
  for (char c : oid) x = (x ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  std::string out(len, '\0');
  for (size_t i = 0; i < len; ++i) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    out[i] = static_cast<char>(x);
  }
  return out;
}

// An empty directory under the test's temporary directory.
inline std::string FreshDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  std::filesystem::path p = std::filesystem::path(tmp != nullptr ? tmp : "/tmp") / name;
  std::filesystem::remove_all(p);
  std::filesystem::create_directories(p);
  return p.string();
}

inline absl::StatusOr<uint64_t> Put(ObjectStore& store, std::string_view oid, uint64_t off,
                                    std::string_view data, uint32_t flags = 0) {
  struct iovec iov = {const_cast<char*>(data.data()), data.size()};
  return store.Append(oid, off, &iov, 1, PayloadCrc(oid, data.data(), data.size()), flags);
}

// A copy of `data` in a kDirectAlign-aligned buffer (length rounded up, zero-filled),
// plus `shift` bytes so that the payload can also be deliberately misaligned.
class AlignedCopy {
 public:
  explicit AlignedCopy(std::string_view data, size_t shift = 0)
      : len_(data.size()),
        buf_(static_cast<char*>(std::aligned_alloc(kDirectAlign, AlignUp(data.size() + shift + 1, kDirectAlign)))),
        shift_(shift) {
    std::memset(buf_.get(), 0, AlignUp(data.size() + shift + 1, kDirectAlign));
    std::memcpy(buf_.get() + shift, data.data(), data.size());
  }
  const char* data() const { return buf_.get() + shift_; }
  size_t size() const { return len_; }

 private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  size_t len_;
  std::unique_ptr<char, Free> buf_;
  size_t shift_;
};

// Appends one part of `data`'s [off, off + len) (a write of several records) and waits
// until it is durable; returns its ticket (0 on failure, reported as a test failure).
inline uint64_t PutPart(ObjectStore& store, std::string_view oid, const std::string& data,
                        uint64_t off, uint64_t len, uint32_t flags, uint32_t write_id) {
  struct iovec iov = {const_cast<char*>(data.data() + off), len};
  auto t = store.AppendPart(oid, off, &iov, 1, PayloadCrc(oid, data.data() + off, len), flags,
                            write_id, [](absl::Status) {});
  EXPECT_TRUE(t.ok()) << t.status();
  if (!t.ok()) return 0;
  EXPECT_TRUE(store.WaitDurable(*t).ok());
  return *t;
}

// The path of the one segment file in `dir` (a test failure if there is not exactly one).
inline std::string OnlySegment(const std::string& dir) {
  std::vector<std::string> segs;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("seg-", 0) == 0) segs.push_back(e.path().string());
  }
  EXPECT_EQ(segs.size(), 1u);
  return segs.empty() ? "" : segs[0];
}

// A whole file's bytes, and a file replaced by `bytes` (to corrupt a segment on purpose).
inline std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline void Spit(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline StoreOptions Options(const std::string& dir, Durability mode) {
  StoreOptions o;
  o.dir = dir;
  o.mode = mode;
  return o;
}

}  // namespace msgr::store::testing

#endif  // MSGR_TESTS_OSD_SIM_STORE_STORE_TEST_UTIL_H_

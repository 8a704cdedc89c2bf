// The store allocates nothing per append once warm, in the modes that write a log: names
// are looked up as views, tickets live in a ring, a write's durable callback is kept
// inline, iovec arrays sit on the stack. (Memory mode copies each payload into memory of
// its own: that allocation is the mode's point.) Counted on every thread (the flusher's work
// included) while the test overwrites a fixed set of objects.
#include <atomic>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "osd_sim/store/object_store.h"
#include "tests/msg/base/alloc_counter.h"
#include "tests/osd_sim/store/store_test_util.h"

namespace msgr::store {
namespace {

using msgr::store::testing::FreshDir;
using msgr::store::testing::Pattern;

void ExpectNoAllocationsPerAppend(Durability mode, const std::string& name) {
  StoreOptions o;
  o.dir = FreshDir(name);
  o.mode = mode;
  o.segment_bytes = 64ull << 20;  // room for every append below: no segment roll
  auto store = ObjectStore::Open(o);
  ASSERT_TRUE(store.ok()) << store.status();

  std::vector<std::string> oids;
  std::vector<std::string> payloads;
  for (int i = 0; i < 64; ++i) {
    oids.push_back(absl::StrCat("object-with-a-long-name-", i));  // beyond the inline buffer
    payloads.push_back(Pattern(oids.back(), 1024));
  }
  std::atomic<uint64_t> durable{0};
  auto append = [&](int i) {
    const std::string& oid = oids[i % oids.size()];
    const std::string& p = payloads[i % payloads.size()];
    struct iovec iov = {const_cast<char*>(p.data()), p.size()};
    auto t = (*store)->Append(oid, 0, &iov, 1, PayloadCrc(oid, p.data(), p.size()), kTruncate,
                              [&durable](absl::Status s) {
                                EXPECT_TRUE(s.ok()) << s;
                                durable.fetch_add(1);
                              });
    ASSERT_TRUE(t.ok()) << t.status();
  };
  constexpr int kWarm = 2000;
  constexpr int kOps = 10000;
  for (int i = 0; i < kWarm; ++i) append(i);
  while (durable.load() < kWarm) absl::SleepFor(absl::Milliseconds(1));
  const uint64_t before = msgr::testing::AllocationsOnAllThreads();
  for (int i = 0; i < kOps; ++i) append(i);
  while (durable.load() < kWarm + kOps) absl::SleepFor(absl::Milliseconds(1));
  const uint64_t allocations = msgr::testing::AllocationsOnAllThreads() - before;

  // Each append read back: the index took every one.
  for (size_t i = 0; i < oids.size(); ++i) {
    auto got = (*store)->Read(oids[i]);
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(*got, payloads[i]);
  }
  // Before: about 7 per append (a ticket's set node, two copies of the name, the waiters'
  // map node and vector, two iovec vectors). Left: a hash table growing now and then.
  EXPECT_LT(allocations, uint64_t{kOps / 100}) << allocations << " allocations in " << kOps
                                              << " appends";
  std::printf("store %s: %.4f allocations per append over %d appends\n", name.c_str(),
              static_cast<double>(allocations) / kOps, kOps);
}

TEST(StoreAllocationTest, DurableAppendsAllocateNothingPerAppend) {
  ExpectNoAllocationsPerAppend(Durability::kDurable, "durable");
}

TEST(StoreAllocationTest, BufferedAppendsAllocateNothingPerAppend) {
  ExpectNoAllocationsPerAppend(Durability::kBuffered, "buffered");
}

}  // namespace
}  // namespace msgr::store

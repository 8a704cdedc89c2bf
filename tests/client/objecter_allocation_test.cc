// The objecter allocates nothing per op once warm (ops from a pool, intrusive pending
// indexes, tids as a range, completions run inline). The fake backend acks inside
// WriteRecord, so a whole op -- submit, send, ack, callback -- runs on the test's thread,
// and that thread's allocations are the objecter's (the fake's own are none per record:
// short oids, same-size overwrites).
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/objecter.h"
#include "gtest/gtest.h"
#include "tests/client/fake_backend.h"
#include "tests/msg/base/alloc_counter.h"

namespace msgr::client {
namespace {

using testing::FakeCluster;

TEST(ObjecterAllocationTest, SteadyStateWritesAllocateNothingPerOp) {
  FakeCluster::Get().Reset(1000);
  std::vector<OsdEntry> osds;
  for (int i = 0; i < 3; ++i) {
    const std::string addr = absl::StrCat("fake:", i);
    FakeCluster::Get().AddOsd(addr);
    FakeCluster::Get().AckInline(addr, true);
    osds.push_back(OsdEntry{static_cast<uint32_t>(i), addr, true, true, 1.0, 1, {}});
  }
  ObjecterOptions o;
  o.messenger.type = "fake";
  o.messenger.name = EntityName{EntityType::kClient, 7};
  o.messenger.auth = AuthConfig::None();
  auto objecter = Objecter::Create(o);
  ASSERT_TRUE(objecter.ok()) << objecter.status();
  (*objecter)->HandleMap(PlacementMap::Build(1, 64, osds));

  // Short names (within std::string's inline buffer), one payload shared by every write.
  std::vector<std::string> oids;
  for (int i = 0; i < 64; ++i) oids.push_back(absl::StrCat("obj", i));
  const auto data = std::make_shared<const std::string>(512, 'x');
  uint64_t ok = 0;
  auto write = [&](int i) {
    (*objecter)->AsyncWrite(oids[i % oids.size()], data, [&ok](absl::Status s) {
      EXPECT_TRUE(s.ok()) << s;
      ++ok;
    });
  };
  constexpr int kWarm = 2000;
  constexpr int kOps = 20000;
  for (int i = 0; i < kWarm; ++i) write(i);  // connections, pools, tables at size
  const uint64_t before = msgr::testing::AllocationsOnThisThread();
  for (int i = 0; i < kOps; ++i) write(i);
  const uint64_t allocations = msgr::testing::AllocationsOnThisThread() - before;

  EXPECT_EQ(ok, uint64_t{kWarm + kOps});  // each completed, inline
  EXPECT_EQ((*objecter)->in_flight(), 0u);
  // Before the pools and intrusive indexes the objecter made about 7 allocations per
  // write; what is left is the fake's statistics vectors growing (a few dozen in all).
  EXPECT_LT(allocations, uint64_t{kOps / 100})
      << allocations << " allocations in " << kOps << " writes";
  std::printf("objecter: %.4f allocations per write over %d writes\n",
              static_cast<double>(allocations) / kOps, kOps);
}

}  // namespace
}  // namespace msgr::client

// OSD thread names to roles, and the per-role sums of thread readings.
#include "client/bench/thread_role.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace msgr::bench {
namespace {

TEST(ThreadRoleTest, NamesTheThreadsEachBackendAndTheStoreStart) {
  for (const char* t : {"ms-tcp-io", "ms-rdma-cq", "ms-rdma-disp", "soft-hca"}) {
    EXPECT_EQ(RoleOfThread(t), ThreadRole::kTransport) << t;
  }
  for (const char* p : {"osd-poller-0", "osd-poller-7", "osd-poller-1234"}) {
    EXPECT_EQ(RoleOfThread(p), ThreadRole::kPoller) << p;
  }
  EXPECT_EQ(RoleOfThread("store-io"), ThreadRole::kStore);
  EXPECT_EQ(RoleOfThread("store-flush"), ThreadRole::kStore);
  EXPECT_EQ(RoleOfThread("store-compact"), ThreadRole::kStore);
  for (const char* o : {"osd", "osd-read", "grpc_global_tim", "default-executo", "",
                        "osd-poller-", "osd-poller-x", "ms-tcp-io2", "store"}) {
    EXPECT_EQ(RoleOfThread(o), ThreadRole::kOther) << o;
  }
  EXPECT_STREQ(ThreadRoleName(ThreadRole::kTransport), "transport");
  EXPECT_STREQ(ThreadRoleName(ThreadRole::kPoller), "poller");
  EXPECT_STREQ(ThreadRoleName(ThreadRole::kStore), "store");
  EXPECT_STREQ(ThreadRoleName(ThreadRole::kOther), "other");
}

TEST(ThreadRoleTest, AddsEachThreadToItsRole) {
  RoleCpu sum{};
  sum[static_cast<int>(ThreadRole::kOther)] = 1.0;  // adds to what is there
  AddByRole({{1, "ms-tcp-io", 0.5},
             {2, "ms-tcp-io", 0.25},
             {3, "osd-poller-0", 2.0},
             {4, "store-flush", 0.125},
             {5, "osd", 0.5}},
            &sum);
  EXPECT_DOUBLE_EQ(sum[static_cast<int>(ThreadRole::kTransport)], 0.75);
  EXPECT_DOUBLE_EQ(sum[static_cast<int>(ThreadRole::kPoller)], 2.0);
  EXPECT_DOUBLE_EQ(sum[static_cast<int>(ThreadRole::kStore)], 0.125);
  EXPECT_DOUBLE_EQ(sum[static_cast<int>(ThreadRole::kOther)], 1.5);
}

}  // namespace
}  // namespace msgr::bench

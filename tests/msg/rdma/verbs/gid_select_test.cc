// The ibverbs provider's RoCE GID choice (msg/rdma/verbs/ibverbs/gid_select.h) over GID
// tables shaped like the ones real ports show, e.g. rxe0 on a guest's eth0 in
// tools/rxe_vms.sh: index 0 fe80::5054:ff:fe12:101 (the link-local GID), index 1
// ::ffff:198.18.1.1, both RoCE v2, every other slot empty.
#include "msg/rdma/verbs/ibverbs/gid_select.h"

#include <arpa/inet.h>

#include <vector>

#include "gtest/gtest.h"

namespace msgr {
namespace verbs {
namespace ibverbs {
namespace {

GidEntry Entry(int index, const char* ip6, bool v2 = true) {
  GidEntry e;
  e.index = index;
  e.roce_v2 = v2;
  EXPECT_EQ(::inet_pton(AF_INET6, ip6, e.gid.data()), 1) << ip6;
  return e;
}

constexpr int kTableLen = 32;

// The table of rxe0 on eth0 in each guest of tools/rxe_vms.sh (seen there).
std::vector<GidEntry> GuestTable() {
  return {Entry(0, "fe80::5054:ff:fe12:101"), Entry(1, "::ffff:198.18.1.1")};
}

TEST(GidSelect, PicksTheIpv4AddressOverTheLinkLocalGid) {
  absl::StatusOr<int> i = SelectGidIndex(GuestTable(), kTableLen, -1, nullptr, "rxe0 port 1");
  ASSERT_TRUE(i.ok()) << i.status();
  EXPECT_EQ(*i, 1);
}

TEST(GidSelect, PrefersRoceV2OverV1OfTheSameAddress) {
  // mlx5 lists each address twice, v1 first.
  std::vector<GidEntry> t = {Entry(0, "fe80::1", false), Entry(1, "fe80::1"),
                             Entry(2, "::ffff:10.0.0.5", false), Entry(3, "::ffff:10.0.0.5")};
  EXPECT_EQ(*SelectGidIndex(t, kTableLen, -1, nullptr, "mlx5_0 port 1"), 3);
}

TEST(GidSelect, RoutableIpv6BeforeLinkLocalWhenThereIsNoIpv4) {
  std::vector<GidEntry> t = {Entry(0, "fe80::1"), Entry(1, "2001:db8::7")};
  EXPECT_EQ(*SelectGidIndex(t, kTableLen, -1, nullptr, "dev"), 1);
  // Only a link-local one: still usable on one L2 segment, so it is taken.
  std::vector<GidEntry> ll = {Entry(0, "fe80::1")};
  EXPECT_EQ(*SelectGidIndex(ll, kTableLen, -1, nullptr, "dev"), 0);
  // Only v1: the first entry.
  std::vector<GidEntry> v1 = {Entry(4, "::ffff:10.0.0.5", false)};
  EXPECT_EQ(*SelectGidIndex(v1, kTableLen, -1, nullptr, "dev"), 4);
}

TEST(GidSelect, EmptyTableIsAnErrorNotIndexZero) {
  absl::StatusOr<int> i = SelectGidIndex({}, kTableLen, -1, nullptr, "rxe0 port 1");
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(i.status().message().find("rxe0 port 1"), absl::string_view::npos) << i.status();
  EXPECT_NE(i.status().message().find("no address"), absl::string_view::npos) << i.status();
}

TEST(GidSelect, ExplicitIndexOfAPopulatedEntryIsKept) {
  // Even the link-local one: the caller asked for it.
  EXPECT_EQ(*SelectGidIndex(GuestTable(), kTableLen, 0, nullptr, "dev"), 0);
  EXPECT_EQ(*SelectGidIndex(GuestTable(), kTableLen, -1, "0", "dev"), 0);
  // The option wins over the environment.
  EXPECT_EQ(*SelectGidIndex(GuestTable(), kTableLen, 1, "0", "dev"), 1);
}

TEST(GidSelect, ExplicitIndexOfAnEmptySlotIsRefusedWithTheTable) {
  // MSGR_RDMA_GID_INDEX=3 copied from a host whose table is numbered differently: before,
  // the device opened with the all-zero GID and the peer's writes timed out later.
  absl::StatusOr<int> i = SelectGidIndex(GuestTable(), kTableLen, -1, "3", "rxe0 port 1");
  ASSERT_FALSE(i.ok());
  EXPECT_EQ(i.status().code(), absl::StatusCode::kInvalidArgument);
  const std::string msg(i.status().message());
  EXPECT_NE(msg.find("MSGR_RDMA_GID_INDEX='3'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("index 3 of rxe0 port 1 is empty"), std::string::npos) << msg;
  EXPECT_NE(msg.find("::ffff:198.18.1.1 (index 1, RoCE v2)"), std::string::npos) << msg;
  EXPECT_FALSE(SelectGidIndex(GuestTable(), kTableLen, 5, nullptr, "dev").ok());
}

TEST(GidSelect, MalformedOrOutOfRangeEnvironmentIsRefused) {
  for (const char* bad : {"x", "-1", "32", "1x"}) {
    absl::StatusOr<int> i = SelectGidIndex(GuestTable(), kTableLen, -1, bad, "dev");
    ASSERT_FALSE(i.ok()) << bad;
    EXPECT_NE(i.status().message().find("not an index below 32"), absl::string_view::npos)
        << i.status();
  }
  // Unset or empty: automatic.
  EXPECT_EQ(*SelectGidIndex(GuestTable(), kTableLen, -1, "", "dev"), 1);
}

}  // namespace
}  // namespace ibverbs
}  // namespace verbs
}  // namespace msgr

// The cluster map's blocklist as a fence list: what the OSDs give their messengers and
// what a client checks itself against (the same rule, msg/session/fence.h).
#include "proto/cluster_map.h"

#include "gtest/gtest.h"
#include "msg/session/fence.h"

namespace msgr::placement {
namespace {

mon::v1::ClusterMap MapWithBlocklist() {
  mon::v1::ClusterMap map;
  map.set_epoch(9);
  auto add = [&](const std::string& entity, uint64_t instance, uint64_t epoch,
                 const std::string& reason) {
    mon::v1::BlocklistEntry* e = map.add_blocklist();
    e->set_entity(entity);
    e->set_instance(instance);
    e->set_epoch(epoch);
    e->set_reason(reason);
  };
  add("client.21", 0xabc, 7, "monctl blocklist");
  add("osd.2", 0, 8, "osd.2 restarted");
  add("nobody.1", 1, 9, "");
  return map;
}

TEST(ClusterMapTest, FencedPeersOfParsesEveryEntryAndReportsTheOthers) {
  std::vector<std::string> ignored;
  std::vector<FencedPeer> fenced = FencedPeersOf(MapWithBlocklist(), &ignored);
  ASSERT_EQ(fenced.size(), 2u);
  EXPECT_EQ(fenced[0].name.ToString(), "client.21");
  EXPECT_EQ(fenced[0].instance, 0xabcu);
  EXPECT_EQ(fenced[0].why, "blocklisted at map epoch 7 (monctl blocklist)");
  EXPECT_EQ(fenced[1].name.ToString(), "osd.2");
  EXPECT_EQ(fenced[1].instance, 0u);
  ASSERT_EQ(ignored.size(), 1u);
  EXPECT_NE(ignored[0].find("nobody.1"), std::string::npos) << ignored[0];
  EXPECT_TRUE(FencedPeersOf(mon::v1::ClusterMap()).empty());
}

TEST(ClusterMapTest, AFenceSetFromTheMapMatchesNameAndInstanceOrEveryInstance) {
  session::FenceSet fences;
  fences.Set(FencedPeersOf(MapWithBlocklist()));
  const EntityName client21{EntityType::kClient, 21};
  absl::Status s = fences.Check(client21, 0xabc);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(),
            "client.21 (instance abc) is fenced: blocklisted at map epoch 7 (monctl blocklist)");
  EXPECT_TRUE(fences.Check(client21, 0xabd).ok());  // another instance of client.21
  EXPECT_TRUE(fences.Check(EntityName{EntityType::kClient, 22}, 0xabc).ok());
  EXPECT_FALSE(fences.Check(EntityName{EntityType::kOsd, 2}, 12345).ok());  // every instance
}

}  // namespace
}  // namespace msgr::placement

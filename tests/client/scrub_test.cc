#include "client/scrub.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

namespace msgr::client {
namespace {

using placement::OsdEntry;
using placement::PlacementMap;

// Four OSDs, size 3; osd.3 down when `down3`.
PlacementMap Map(bool down3 = false) {
  std::vector<OsdEntry> osds;
  for (uint32_t i = 0; i < 4; ++i) {
    OsdEntry e;
    e.id = i;
    e.addr = "127.0.0.1:" + std::to_string(6800 + i);
    e.up = !(down3 && i == 3);
    e.in = true;
    e.host = "h" + std::to_string(i);
    osds.push_back(e);
  }
  return PlacementMap::Build(1, 16, osds, placement::PoolSize{3, 2});
}

// Every object's copies exactly on its acting set, all alike.
std::map<std::string, std::vector<ObjectCopy>> Healthy(const PlacementMap& map, int n) {
  std::map<std::string, std::vector<ObjectCopy>> copies;
  for (int i = 0; i < n; ++i) {
    const std::string oid = "obj." + std::to_string(i);
    for (int osd : map.ActingOfPg(map.PgOf(oid))) {
      copies[oid].push_back({osd, 4096, 0xabcd0000u + static_cast<uint32_t>(i)});
    }
  }
  return copies;
}

const std::vector<int> kAll = {0, 1, 2, 3};

TEST(ScrubTest, CopiesOnTheirActingSetsThatAgreeAreClean) {
  const PlacementMap map = Map();
  const ScrubReport r = CompareCopies(map, Healthy(map, 20), kAll);
  EXPECT_TRUE(r.clean());
  EXPECT_EQ(r.objects, 20u);
  EXPECT_EQ(r.copies, 60u);
  EXPECT_EQ(r.missing + r.mismatched + r.stray, 0u);
  EXPECT_TRUE(r.problems.empty());
}

// A stray (left where a PG was) is counted but not compared: an older version there is not
// a mismatch, and an object only a stray still holds (deleted after its PG moved) is not
// missing on the members.
TEST(ScrubTest, StraysAreNotComparedNorMakeAnObjectMissing) {
  const PlacementMap map = Map();
  auto copies = Healthy(map, 20);
  auto outsider = [&](const std::string& oid) {
    const auto& acting = map.ActingOfPg(map.PgOf(oid));
    for (int osd : kAll) {
      if (std::find(acting.begin(), acting.end(), osd) == acting.end()) return osd;
    }
    return -1;
  };
  copies["obj.4"].push_back({outsider("obj.4"), 100, 0x1u});  // an old version, elsewhere
  copies["gone"] = {{outsider("gone"), 100, 0x2u}};          // deleted, a stray left
  const ScrubReport r = CompareCopies(map, copies, kAll);
  EXPECT_EQ(r.stray, 2u);
  EXPECT_EQ(r.missing, 0u);
  EXPECT_EQ(r.mismatched, 0u);
  EXPECT_TRUE(r.clean()) << r.problems.size();
}

TEST(ScrubTest, AMissingCopyADifferentCopyAndAStrayAreNamed) {
  const PlacementMap map = Map();
  auto copies = Healthy(map, 20);
  // obj.1 lost its copy on its second member; obj.2's third member holds other bytes;
  // obj.3 has an extra copy on the OSD outside its acting set.
  const int lost_on = copies["obj.1"][1].osd;
  copies["obj.1"].erase(copies["obj.1"].begin() + 1);
  copies["obj.2"][2].crc32c ^= 1;
  const auto& acting3 = map.ActingOfPg(map.PgOf("obj.3"));
  int outside = 0;
  while (std::find(acting3.begin(), acting3.end(), outside) != acting3.end()) ++outside;
  copies["obj.3"].push_back({outside, 4096, copies["obj.3"][0].crc32c});

  const ScrubReport r = CompareCopies(map, copies, kAll);
  EXPECT_FALSE(r.clean());
  EXPECT_EQ(r.missing, 1u);
  EXPECT_EQ(r.mismatched, 1u);
  EXPECT_EQ(r.stray, 1u);
  ASSERT_EQ(r.problems.size(), 2u);
  EXPECT_EQ(r.problems[0], "obj.1: missing on osd." + std::to_string(lost_on));
  EXPECT_NE(r.problems[1].find("obj.2: osd."), std::string::npos) << r.problems[1];
  EXPECT_NE(r.problems[1].find("4096 bytes crc 0xabcd0002"), std::string::npos)
      << r.problems[1];
  EXPECT_NE(r.problems[1].find("4096 bytes crc 0xabcd0003"), std::string::npos)
      << r.problems[1];
}

TEST(ScrubTest, ADownOrUnscannedMemberIsNotCountedMissing) {
  const PlacementMap down = Map(/*down3=*/true);
  auto copies = Healthy(down, 30);
  for (auto& [oid, list] : copies) {
    list.erase(std::remove_if(list.begin(), list.end(),
                              [](const ObjectCopy& c) { return c.osd == 3; }),
               list.end());
  }
  EXPECT_TRUE(CompareCopies(down, copies, {0, 1, 2}).clean());
  // osd.3 up but not scanned (its listing failed): not missing either; scanned: missing.
  const PlacementMap up = Map();
  EXPECT_TRUE(CompareCopies(up, copies, {0, 1, 2}).clean());
  const ScrubReport r = CompareCopies(up, copies, kAll);
  EXPECT_GT(r.missing, 0u);
  EXPECT_EQ(r.mismatched, 0u);
}

}  // namespace
}  // namespace msgr::client

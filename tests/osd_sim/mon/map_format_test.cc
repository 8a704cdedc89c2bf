// monctl's output formats (the tools' flag parser: cli_flags_test.cc).
#include "osd_sim/mon/map_format.h"

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace msgr::mon {
namespace {

v1::ClusterMap SampleMap() {
  v1::ClusterMap map;
  map.set_epoch(12);
  map.set_pg_num(128);
  map.set_fsid("f-1");
  v1::OsdInfo* o = map.add_osds();
  o->set_id(0);
  o->set_addr("127.0.0.1:6800");
  o->set_up(true);
  o->set_in(true);
  o->set_weight(1.5);
  o->add_ms_types("tcp");
  o->add_ms_types("rdma");
  o->set_up_from(10);
  (*map.mutable_osd_applied_epochs())[0] = 11;
  o = map.add_osds();
  o->set_id(1);
  o->set_addr("127.0.0.1:6801");
  o->set_weight(1);
  return map;
}

TEST(MapFormatTest, JsonHasTheDocumentedFields) {
  v1::ClusterMap map = SampleMap();
  (*map.mutable_osd_pg_stats())[0].set_pgs_active(120);  // GetMap's live PG states
  (*map.mutable_osd_pg_stats())[0].set_pgs_peering(8);
  nlohmann::json j = nlohmann::json::parse(MapToJson(map));
  EXPECT_EQ(j["epoch"], 12);
  EXPECT_EQ(j["pg_num"], 128);
  EXPECT_EQ(j["fsid"], "f-1");
  ASSERT_EQ(j["osds"].size(), 2u);
  const auto& o = j["osds"][0];
  EXPECT_EQ(o["id"], 0);
  EXPECT_EQ(o["addr"], "127.0.0.1:6800");
  EXPECT_EQ(o["up"], true);
  EXPECT_EQ(o["in"], true);
  EXPECT_DOUBLE_EQ(o["weight"].get<double>(), 1.5);
  EXPECT_EQ(o["ms_types"], nlohmann::json({"tcp", "rdma"}));
  EXPECT_EQ(o["applied_epoch"], 11);
  EXPECT_EQ(j["osds"][1]["up"], false);
  EXPECT_EQ(j["osds"][1]["in"], false);
  EXPECT_EQ(j["osds"][1]["applied_epoch"], 0);  // never reported
  // The PGs each OSD leads, from its last heartbeat (tools/cluster.sh start waits on them).
  EXPECT_EQ(o["pgs_active"], 120);
  EXPECT_EQ(o["pgs_peering"], 8);
  EXPECT_FALSE(j["osds"][1].contains("pgs_active")) << "no heartbeat, no PG states";
}

TEST(MapFormatTest, TableSummarisesAndListsOsds) {
  std::string t = MapToTable(SampleMap());
  EXPECT_NE(t.find("epoch 12 pg_num 128"), std::string::npos) << t;
  EXPECT_NE(t.find("osds: 2 total, 1 up, 1 in"), std::string::npos) << t;
  EXPECT_NE(t.find("127.0.0.1:6800"), std::string::npos) << t;
  EXPECT_NE(t.find("tcp,rdma"), std::string::npos) << t;
  EXPECT_NE(t.find("down out"), std::string::npos) << t;
}

// GetMap's live peering state: a summary line, naming the OSDs whose PGs wait; none in a
// map without it (a stored or watched one).
TEST(MapFormatTest, TableSummarisesPeeringFromHeartbeats) {
  v1::ClusterMap map = SampleMap();
  EXPECT_EQ(MapToTable(map).find("pgs:"), std::string::npos);
  v1::PgStats s;
  s.set_pgs_active(60);
  s.set_pgs_peering(0);
  s.set_objects_recovered(7);
  (*map.mutable_osd_pg_stats())[0] = s;
  s.set_pgs_active(66);
  s.set_pgs_peering(2);
  s.set_objects_recovered(5);
  (*map.mutable_osd_pg_stats())[1] = s;
  const std::string t = MapToTable(map);
  EXPECT_NE(t.find("pgs: 126 active, 2 peering (ops wait; osd.1 2); 12 objects recovered\n"),
            std::string::npos)
      << t;
  // How the members were synced, once any was.
  s.set_recoveries_from_log(4);
  s.set_backfills(1);
  (*map.mutable_osd_pg_stats())[1] = s;
  const std::string t2 = MapToTable(map);
  EXPECT_NE(t2.find("12 objects recovered (4 syncs from PG logs, 1 backfills)\n"),
            std::string::npos)
      << t2;
}

TEST(MapFormatTest, PoolsInJsonTableAndPoolList) {
  v1::ClusterMap map = SampleMap();
  map.set_pool_size(2);
  v1::Pool* p = map.add_pools();
  p->set_id(1);
  p->set_name("images");
  p->set_size(3);
  p->set_min_size(2);
  p->set_pg_num(16);
  const nlohmann::json j = nlohmann::json::parse(MapToJson(map));
  ASSERT_EQ(j["pools"].size(), 2u) << j.dump();
  EXPECT_EQ(j["pools"][0]["name"], "default");
  EXPECT_EQ(j["pools"][0]["id"], 0);
  EXPECT_EQ(j["pools"][0]["size"], 2);
  EXPECT_EQ(j["pools"][0]["pg_num"], 128);
  EXPECT_EQ(j["pools"][1]["name"], "images");
  EXPECT_EQ(j["pools"][1]["size"], 3);
  EXPECT_EQ(j["pools"][1]["min_size"], 2);
  EXPECT_EQ(j["pools"][1]["pg_num"], 16);
  EXPECT_EQ(j["pool_size"], 2);  // the default pool's fields keep their meaning
  const std::string t = MapToTable(map);
  EXPECT_NE(t.find("pools: default (id 0, size 2/1, pg_num 128), images (id 1, size 3/2, "
                   "pg_num 16)"),
            std::string::npos)
      << t;
  const std::string ls = PoolsToTable(map);
  EXPECT_NE(ls.find("images"), std::string::npos) << ls;
  EXPECT_NE(ls.find("default"), std::string::npos) << ls;
}

}  // namespace
}  // namespace msgr::mon

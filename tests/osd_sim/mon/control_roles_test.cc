// The role rules, without a socket: who may boot, heartbeat, read the map, mark out/in.
#include "osd_sim/mon/control_roles.h"

#include "absl/strings/match.h"
#include "gtest/gtest.h"

namespace msgr::mon {
namespace {

bool Allowed(const std::string& entity, ControlOp op, uint32_t id = 0) {
  return AuthorizeControl(entity, op, id).ok();
}

TEST(ControlRolesTest, AdminMayDoEverything) {
  for (ControlOp op : {ControlOp::kBootOsd, ControlOp::kHeartbeat, ControlOp::kGetMap,
                       ControlOp::kWatchMap, ControlOp::kMarkOut, ControlOp::kMarkIn,
                       ControlOp::kCreatePool, ControlOp::kBlocklist}) {
    EXPECT_TRUE(Allowed("client.admin", op, 3)) << static_cast<int>(op);
  }
}

TEST(ControlRolesTest, OsdActsOnlyAsItself) {
  EXPECT_TRUE(Allowed("osd.1", ControlOp::kBootOsd, 1));
  EXPECT_TRUE(Allowed("osd.1", ControlOp::kHeartbeat, 1));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kBootOsd, 2));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kHeartbeat, 2));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kBootOsd, 10));  // not a prefix match
  EXPECT_FALSE(Allowed("osd.10", ControlOp::kBootOsd, 1));
  EXPECT_TRUE(Allowed("osd.1", ControlOp::kGetMap));
  EXPECT_TRUE(Allowed("osd.1", ControlOp::kWatchMap));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kMarkOut, 1));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kMarkIn, 1));
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kCreatePool));
  EXPECT_FALSE(Allowed("client.bench", ControlOp::kCreatePool));
  EXPECT_EQ(AuthorizeControl("client.bench", ControlOp::kCreatePool, 0).message(),
            "client.bench may not create pools: needs client.admin");
  EXPECT_FALSE(Allowed("osd.1", ControlOp::kBlocklist));
  EXPECT_EQ(AuthorizeControl("client.bench", ControlOp::kBlocklist, 0).message(),
            "client.bench may not change the blocklist: needs client.admin");
  absl::Status s = AuthorizeControl("osd.1", ControlOp::kBootOsd, 2);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(absl::StartsWith(s.message(), "osd.1 may not boot osd.2: needs osd.2")) << s;
}

TEST(ControlRolesTest, ClientsReadOnly) {
  EXPECT_TRUE(Allowed("client.bench", ControlOp::kGetMap));
  EXPECT_TRUE(Allowed("client.bench", ControlOp::kWatchMap));
  EXPECT_TRUE(Allowed("mon", ControlOp::kGetMap));
  EXPECT_FALSE(Allowed("client.bench", ControlOp::kBootOsd, 0));
  EXPECT_FALSE(Allowed("client.bench", ControlOp::kHeartbeat, 0));
  absl::Status out = AuthorizeControl("client.bench", ControlOp::kMarkOut, 2);
  EXPECT_EQ(out.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(out.message(), "client.bench may not mark OSDs out: needs client.admin");
  EXPECT_EQ(AuthorizeControl("client.bench", ControlOp::kMarkIn, 2).message(),
            "client.bench may not mark OSDs in: needs client.admin");
}

TEST(ControlRolesTest, UnknownAndMissingEntitiesGetNothing) {
  for (const char* e : {"osd.", "osd.x", "osd.-1", "client.", "admin", "mon.b"}) {
    EXPECT_FALSE(Allowed(e, ControlOp::kGetMap)) << e;
    EXPECT_FALSE(Allowed(e, ControlOp::kMarkOut)) << e;
  }
  EXPECT_EQ(AuthorizeControl("", ControlOp::kGetMap, 0).code(),
            absl::StatusCode::kUnauthenticated);
}

}  // namespace
}  // namespace msgr::mon

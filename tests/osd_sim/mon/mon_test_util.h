// Helpers for monitor tests: a fresh temp dir and a gRPC stub to an in-process MonServer.
#ifndef MSGR_TESTS_OSD_SIM_MON_MON_TEST_UTIL_H_
#define MSGR_TESTS_OSD_SIM_MON_MON_TEST_UTIL_H_

#include <grpcpp/grpcpp.h>

#include <cstdlib>
#include <memory>
#include <string>

#include "gtest/gtest.h"
#include "osd_sim/mon/mon_server.h"
#include "proto/mon.grpc.pb.h"

namespace msgr::mon::testing {

// A new empty directory under $TEST_TMPDIR (or /tmp).
inline std::string MakeTempDir() {
  const char* base = std::getenv("TEST_TMPDIR");
  std::string tmpl = std::string(base ? base : "/tmp") + "/mon.XXXXXX";
  char* dir = ::mkdtemp(tmpl.data());
  EXPECT_NE(dir, nullptr);
  return tmpl;
}

// Options with short timers suited to tests.
inline MonServerOptions FastOptions(const std::string& dir) {
  MonServerOptions o;
  o.monitor.data_dir = dir;
  o.monitor.grace = absl::Milliseconds(300);
  o.monitor.heartbeat_interval = absl::Milliseconds(100);
  o.monitor.pg_num = 64;
  return o;
}

inline std::unique_ptr<v1::Monitor::Stub> Connect(const std::string& addr) {
  return v1::Monitor::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
}

inline v1::BootOsdRequest BootReq(uint32_t id, const std::string& addr, double weight = 0) {
  v1::BootOsdRequest r;
  r.set_id(id);
  r.set_addr(addr);
  r.add_ms_types("tcp");
  r.set_weight(weight);
  return r;
}

inline grpc::Status Boot(v1::Monitor::Stub* stub, const v1::BootOsdRequest& req,
                         v1::BootOsdReply* reply) {
  grpc::ClientContext ctx;
  return stub->BootOsd(&ctx, req, reply);
}

inline v1::ClusterMap GetMap(v1::Monitor::Stub* stub) {
  grpc::ClientContext ctx;
  v1::ClusterMap map;
  grpc::Status s = stub->GetMap(&ctx, v1::GetMapRequest(), &map);
  EXPECT_TRUE(s.ok()) << s.error_message();
  return map;
}

inline const v1::OsdInfo* FindOsd(const v1::ClusterMap& map, uint32_t id) {
  for (const v1::OsdInfo& o : map.osds()) {
    if (o.id() == id) return &o;
  }
  return nullptr;
}

}  // namespace msgr::mon::testing

#endif  // MSGR_TESTS_OSD_SIM_MON_MON_TEST_UTIL_H_

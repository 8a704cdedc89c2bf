// Test helper: a cluster PKI made by the real script (tools/lib/pki.sh, a data dependency
// of the test), so the tests exercise the files the cluster scripts make.
#ifndef MSGR_TESTS_OSD_SIM_MON_PKI_TEST_UTIL_H_
#define MSGR_TESTS_OSD_SIM_MON_PKI_TEST_UTIL_H_

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "gtest/gtest.h"
#include "osd_sim/mon/control_auth.h"
#include "tests/osd_sim/mon/mon_test_util.h"

namespace msgr::mon::testing {

// The script, relative to the test's runfiles directory (Bazel's working directory).
inline constexpr char kPkiScript[] = "tools/lib/pki.sh";

// Runs `bash pki.sh ARGS`; true on exit status 0.
inline bool RunPki(const std::string& args) {
  const std::string cmd = std::string("bash ") + kPkiScript + " " + args;
  int rc = std::system(cmd.c_str());
  EXPECT_EQ(rc, 0) << cmd;
  return rc == 0;
}

// A new cluster dir with a CA and a certificate for each of `entities`.
inline std::string MakeClusterPki(std::initializer_list<const char*> entities) {
  std::string dir = MakeTempDir();
  RunPki("init " + dir);
  for (const char* e : entities) RunPki("issue " + dir + " " + e);
  return dir;
}

// FromClusterDir, failing the test (and returning Insecure) if it does not load.
inline ControlAuth LoadAuth(const std::string& dir, const std::string& entity) {
  absl::StatusOr<ControlAuth> auth = ControlAuth::FromClusterDir(dir, entity);
  EXPECT_TRUE(auth.ok()) << auth.status();
  return auth.ok() ? *auth : ControlAuth::Insecure();
}

}  // namespace msgr::mon::testing

#endif  // MSGR_TESTS_OSD_SIM_MON_PKI_TEST_UTIL_H_

#include "osd_sim/admin_socket.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>

#include "nlohmann/json.hpp"

namespace msgr::osd {
namespace {

std::string TempSocketPath() {
  return "/tmp/msgr-asok-test-" + std::to_string(getpid()) + ".asok";
}

TEST(AdminSocketTest, PerfDumpReturnsCurrentCounters) {
  const std::string path = TempSocketPath();
  auto sock = AdminSocket::Create(path);
  ASSERT_TRUE(sock.ok()) << sock.status();
  std::atomic<int> ops{3};
  (*sock)->Register("perf dump", [&] { return nlohmann::json{{"ops", ops.load()}}.dump(); });
  (*sock)->Start();
  auto r = AdminSocket::Query(path, "perf dump");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(nlohmann::json::parse(*r)["ops"], 3);
  ops = 10;
  r = AdminSocket::Query(path, "perf dump");
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(nlohmann::json::parse(*r)["ops"], 10);
}

TEST(AdminSocketTest, UnknownCommandSaysWhatIsKnown) {
  const std::string path = TempSocketPath() + "2";
  auto sock = AdminSocket::Create(path);
  ASSERT_TRUE(sock.ok());
  (*sock)->Register("perf dump", [] { return std::string("{}"); });
  (*sock)->Start();
  auto r = AdminSocket::Query(path, "bogus");
  ASSERT_TRUE(r.ok());
  auto j = nlohmann::json::parse(*r);
  EXPECT_NE(j["error"].get<std::string>().find("perf dump"), std::string::npos);
}

TEST(AdminSocketTest, QueryWithoutDaemonIsAClearError) {
  auto r = AdminSocket::Query("/tmp/msgr-no-such-daemon.asok", "perf dump");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("is the daemon running"), std::string::npos);
}

TEST(AdminSocketTest, SocketFileRemovedOnShutdown) {
  const std::string path = TempSocketPath() + "3";
  {
    auto sock = AdminSocket::Create(path);
    ASSERT_TRUE(sock.ok());
    (*sock)->Start();
    EXPECT_EQ(access(path.c_str(), F_OK), 0);
  }
  EXPECT_NE(access(path.c_str(), F_OK), 0);
}

}  // namespace
}  // namespace msgr::osd

// /metrics over HTTP: bound on a free loopback port, served at scrape time, bind errors.
#include "osd_sim/metrics/metrics_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "osd_sim/metrics/prometheus_export.h"

namespace msgr::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

#define TEST_COUNTERS(X) X(ops, kCounter, kNone, "client writes stored")
MSGR_COUNTER_SNAPSHOT(TestCounters, TEST_COUNTERS);

// GET `path` from 127.0.0.1:port; the whole response (the server closes the connection).
std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "connect failed";
  }
  const std::string req = absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: x\r\n\r\n");
  if (write(fd, req.data(), req.size()) != static_cast<ssize_t>(req.size())) {
    close(fd);
    return "write failed";
  }
  std::string resp;
  char buf[4096];
  for (ssize_t n; (n = read(fd, buf, sizeof(buf))) > 0;) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  return resp;
}

int PortOf(const std::string& addr) {
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi(addr.substr(addr.rfind(':') + 1), &port)) << addr;
  return port;
}

TEST(NormalizeMetricsAddrTest, LoopbackUnlessAHostIsGiven) {
  EXPECT_EQ(*NormalizeMetricsAddr("9100"), "127.0.0.1:9100");
  EXPECT_EQ(*NormalizeMetricsAddr(":0"), "127.0.0.1:0");
  EXPECT_EQ(*NormalizeMetricsAddr("0.0.0.0:9100"), "0.0.0.0:9100");
  EXPECT_EQ(NormalizeMetricsAddr("host:").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(NormalizeMetricsAddr("127.0.0.1:70000").status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(NormalizeMetricsAddr("x:y").status().message()), HasSubstr("'x:y'"));
}

TEST(MetricsServerTest, ServesTheRegistryAtScrapeTime) {
  uint64_t ops = 3;
  CounterRegistry registry;
  registry.Add({"osd", -1, [&ops] {
                  TestCounters c;
                  c.ops = ops;
                  return std::vector{c.Group("osd")};
                }});
  auto server = MetricsServer::Start(
      "127.0.0.1:0", {std::make_shared<RegistryCollector>(&registry, Labels{{"osd", "2"}})});
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_THAT((*server)->addr(), StartsWith("127.0.0.1:"));
  const int port = PortOf((*server)->addr());
  ASSERT_GT(port, 0);
  std::string resp = HttpGet(port, "/metrics");
  EXPECT_THAT(resp, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(resp, HasSubstr("text/plain"));
  EXPECT_THAT(resp, HasSubstr("# TYPE msgr_osd_client_writes_total counter\n"
                              "msgr_osd_client_writes_total{osd=\"2\"} 3\n"));
  ops = 8;
  EXPECT_THAT(HttpGet(port, "/metrics"), HasSubstr("msgr_osd_client_writes_total{osd=\"2\"} 8\n"));
  EXPECT_THAT(HttpGet(port, "/other"), HasSubstr(" 404 Not Found"));

  // The port is taken: a second server says so.
  auto second = MetricsServer::Start((*server)->addr(), {});
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(std::string(second.status().message()), HasSubstr((*server)->addr()));

  // Stopped: nothing listens any more.
  server->reset();
  EXPECT_EQ(HttpGet(port, "/metrics"), "connect failed");
}

TEST(MetricsServerTest, RefusesABadAddress) {
  auto s = MetricsServer::Start("nonsense", {});
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace msgr::metrics

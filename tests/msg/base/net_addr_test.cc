#include "msg/base/net_addr.h"

#include <arpa/inet.h>

#include "gtest/gtest.h"

namespace msgr {
namespace {

// Substring match without gmock (not linked by the project's test deps).
::testing::AssertionResult HasSub(absl::string_view text, absl::string_view part) {
  if (text.find(part) != absl::string_view::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << text << "' lacks '" << part << "'";
}

TEST(ParseHostPortTest, AcceptsIpv4Ipv6AndNames) {
  auto v4 = ParseHostPort("198.18.0.7:6800");
  ASSERT_TRUE(v4.ok()) << v4.status();
  EXPECT_EQ(v4->host, "198.18.0.7");
  EXPECT_EQ(v4->port, 6800);
  auto v6 = ParseHostPort("[fd00::1]:0");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->host, "fd00::1");
  EXPECT_EQ(v6->port, 0);
  auto name = ParseHostPort("osd-host-2:65535");
  ASSERT_TRUE(name.ok()) << name.status();
  EXPECT_EQ(name->host, "osd-host-2");
  EXPECT_EQ(name->port, 65535);
}

TEST(ParseHostPortTest, RefusesWhatItCannotReadWithTheExpectedForm) {
  for (const char* bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:65536", "127.0.0.1:x", ":80",
                          "fd00::1:80", "[fd00::1", "[fd00::1]x80", ""}) {
    auto hp = ParseHostPort(bad);
    ASSERT_FALSE(hp.ok()) << bad;
    EXPECT_EQ(hp.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(HasSub(hp.status().message(), "want HOST:PORT")) << bad;
  }
}

TEST(ParseHostPortTest, OptionalPortDefaults) {
  auto a = ParseHostOptionalPort("198.18.0.3", 0);
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->port, 0);
  auto b = ParseHostOptionalPort("[::1]", 6800);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->host, "::1");
  EXPECT_EQ(b->port, 6800);
  auto c = ParseHostOptionalPort("198.18.0.3:7000", 0);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->port, 7000);
  EXPECT_FALSE(ParseHostOptionalPort("198.18.0.3:99999", 0).ok());
}

TEST(JoinHostPortTest, BracketsIpv6AndRoundTrips) {
  EXPECT_EQ(JoinHostPort("fd00::1", 7), "[fd00::1]:7");
  EXPECT_EQ(JoinHostPort("10.0.0.1", 7), "10.0.0.1:7");
  auto hp = ParseHostPort(JoinHostPort("fe80::2", 123));
  ASSERT_TRUE(hp.ok());
  EXPECT_EQ(hp->host, "fe80::2");
  EXPECT_EQ(hp->port, 123);
}

TEST(ResolveHostPortTest, NumericAndLocalhost) {
  auto v6 = ResolveHostPort("[::1]:6800");
  ASSERT_TRUE(v6.ok()) << v6.status();
  EXPECT_EQ(v6->family(), AF_INET6);
  EXPECT_EQ(SocketAddressToString(v6->get()), "[::1]:6800");
  auto lo = ResolveHostPort("localhost:5");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_EQ(SocketAddressToString(lo->get()), "127.0.0.1:5");
  auto bad = ResolveHostPort("no-such-host.invalid:5");
  ASSERT_FALSE(bad.ok());
  EXPECT_TRUE(HasSub(bad.status().message(), "cannot resolve host 'no-such-host.invalid'"));
}

TEST(NetworkTest, ContainsByPrefix) {
  auto net = ParseNetwork("198.18.0.0/15");
  ASSERT_TRUE(net.ok()) << net.status();
  auto in = ResolveHostPort("198.19.255.1:0");
  auto out = ResolveHostPort("198.20.0.1:0");
  auto v6 = ResolveHostPort("[::1]:0");
  EXPECT_TRUE(NetworkContains(*net, in->get()));
  EXPECT_FALSE(NetworkContains(*net, out->get()));
  EXPECT_FALSE(NetworkContains(*net, v6->get()));
  auto net6 = ParseNetwork("fd00:1::/32");
  ASSERT_TRUE(net6.ok());
  EXPECT_TRUE(NetworkContains(*net6, ResolveHostPort("[fd00:1:2::3]:0")->get()));
  EXPECT_FALSE(NetworkContains(*net6, ResolveHostPort("[fd00:2::3]:0")->get()));
  auto all = ParseNetwork("0.0.0.0/0");
  ASSERT_TRUE(all.ok());
  EXPECT_TRUE(NetworkContains(*all, out->get()));
}

TEST(NetworkTest, RefusesBadCidrs) {
  for (const char* bad : {"198.18.0.0", "198.18.0.0/33", "fd00::/129", "host/8", "1.2.3.4/x"}) {
    auto net = ParseNetwork(bad);
    ASSERT_FALSE(net.ok()) << bad;
    EXPECT_TRUE(HasSub(net.status().message(), "want ADDRESS/BITS")) << bad;
  }
}

TEST(LocalAddressInTest, FindsLoopbackAndSaysWhatThereIsOtherwise) {
  auto lo = LocalAddressIn("127.0.0.0/8");
  ASSERT_TRUE(lo.ok()) << lo.status();
  EXPECT_EQ(lo->rfind("127.", 0), 0u) << *lo;
  auto none = LocalAddressIn("198.51.100.0/24");  // TEST-NET-2: never configured here
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(HasSub(none.status().message(), "no local address in network 198.51.100.0/24"));
  EXPECT_TRUE(HasSub(none.status().message(), "127.0.0.1"));
}

}  // namespace
}  // namespace msgr

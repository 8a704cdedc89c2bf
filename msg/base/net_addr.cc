#include "msg/base/net_addr.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>

#include <cstring>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "msg/base/errno_status.h"

namespace msgr {
namespace {

absl::Status BadAddress(const std::string& addr, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(
      "address '", addr, "' ", why, " (want HOST:PORT, e.g. 127.0.0.1:6800 or [fd00::1]:6800)"));
}

// Splits off the host; `*rest` is what follows it (":PORT" or empty).
absl::Status SplitHost(const std::string& addr, std::string* host, std::string* rest) {
  if (!addr.empty() && addr[0] == '[') {
    const size_t close = addr.find(']');
    if (close == std::string::npos) return BadAddress(addr, "has an unclosed '['");
    *host = addr.substr(1, close - 1);
    *rest = addr.substr(close + 1);
    if (!rest->empty() && (*rest)[0] != ':') return BadAddress(addr, "has text after ']'");
    return absl::OkStatus();
  }
  const size_t first = addr.find(':');
  if (first != std::string::npos && addr.find(':', first + 1) != std::string::npos) {
    return BadAddress(addr, "is an IPv6 address without brackets");
  }
  *host = addr.substr(0, first);
  *rest = first == std::string::npos ? "" : addr.substr(first);
  return absl::OkStatus();
}

absl::StatusOr<uint16_t> ParsePort(const std::string& addr, const std::string& rest) {
  uint32_t port = 0;
  if (rest.size() < 2 || !absl::SimpleAtoi(rest.substr(1), &port) || port > 65535) {
    return BadAddress(addr, "has no valid port");
  }
  return static_cast<uint16_t>(port);
}

}  // namespace

absl::StatusOr<HostPort> ParseHostPort(const std::string& addr) {
  HostPort hp;
  std::string rest;
  if (absl::Status s = SplitHost(addr, &hp.host, &rest); !s.ok()) return s;
  if (hp.host.empty()) return BadAddress(addr, "has no host");
  absl::StatusOr<uint16_t> port = ParsePort(addr, rest);
  if (!port.ok()) return port.status();
  hp.port = *port;
  return hp;
}

absl::StatusOr<HostPort> ParseHostOptionalPort(const std::string& addr, uint16_t default_port) {
  HostPort hp;
  std::string rest;
  if (absl::Status s = SplitHost(addr, &hp.host, &rest); !s.ok()) return s;
  if (hp.host.empty()) return BadAddress(addr, "has no host");
  hp.port = default_port;
  if (!rest.empty()) {
    absl::StatusOr<uint16_t> port = ParsePort(addr, rest);
    if (!port.ok()) return port.status();
    hp.port = *port;
  }
  return hp;
}

std::string JoinHostPort(const std::string& host, uint16_t port) {
  if (host.find(':') != std::string::npos) return absl::StrCat("[", host, "]:", port);
  return absl::StrCat(host, ":", port);
}

bool IsNumericHost(const std::string& host) {
  unsigned char buf[16];
  return inet_pton(AF_INET, host.c_str(), buf) == 1 || inet_pton(AF_INET6, host.c_str(), buf) == 1;
}

absl::StatusOr<SocketAddress> ResolveHostPort(const std::string& addr) {
  absl::StatusOr<HostPort> hp = ParseHostPort(addr);
  if (!hp.ok()) return hp.status();
  std::string host = hp->host == "localhost" ? "127.0.0.1" : hp->host;
  SocketAddress out;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
  if (inet_pton(AF_INET, host.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(hp->port);
    out.len = sizeof(sockaddr_in);
    return out;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(hp->port);
    out.len = sizeof(sockaddr_in6);
    return out;
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const int rc = getaddrinfo(host.c_str(), nullptr, &hints, &res);
  if (rc != 0 || res == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot resolve host '", host, "' of '", addr, "': ", gai_strerror(rc)));
  }
  std::memcpy(&out.storage, res->ai_addr, res->ai_addrlen);
  out.len = res->ai_addrlen;
  freeaddrinfo(res);
  if (out.family() == AF_INET) {
    v4->sin_port = htons(hp->port);
  } else {
    v6->sin6_port = htons(hp->port);
  }
  return out;
}

std::string SocketAddressToString(const sockaddr* sa) {
  char buf[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    const auto* v4 = reinterpret_cast<const sockaddr_in*>(sa);
    inet_ntop(AF_INET, &v4->sin_addr, buf, sizeof(buf));
    return JoinHostPort(buf, ntohs(v4->sin_port));
  }
  if (sa->sa_family == AF_INET6) {
    const auto* v6 = reinterpret_cast<const sockaddr_in6*>(sa);
    inet_ntop(AF_INET6, &v6->sin6_addr, buf, sizeof(buf));
    return JoinHostPort(buf, ntohs(v6->sin6_port));
  }
  return absl::StrCat("(address family ", sa->sa_family, ")");
}

absl::StatusOr<Network> ParseNetwork(const std::string& cidr) {
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        "network '", cidr, "' ", why, " (want ADDRESS/BITS, e.g. 198.18.0.0/24 or fd00::/64)"));
  };
  const size_t slash = cidr.find('/');
  if (slash == std::string::npos) return bad("has no /BITS");
  Network net;
  net.text = cidr;
  const std::string host = cidr.substr(0, slash);
  int max_bits = 0;
  if (inet_pton(AF_INET, host.c_str(), net.prefix) == 1) {
    net.family = AF_INET;
    max_bits = 32;
  } else if (inet_pton(AF_INET6, host.c_str(), net.prefix) == 1) {
    net.family = AF_INET6;
    max_bits = 128;
  } else {
    return bad("does not start with a numeric address");
  }
  if (!absl::SimpleAtoi(cidr.substr(slash + 1), &net.prefix_len) || net.prefix_len < 0 ||
      net.prefix_len > max_bits) {
    return bad(absl::StrCat("has a bad prefix length (0..", max_bits, ")"));
  }
  return net;
}

bool NetworkContains(const Network& net, const sockaddr* sa) {
  const unsigned char* bytes = nullptr;
  if (sa->sa_family != net.family) return false;
  if (sa->sa_family == AF_INET) {
    bytes = reinterpret_cast<const unsigned char*>(
        &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr);
  } else {
    bytes = reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr.s6_addr;
  }
  const int full = net.prefix_len / 8;
  if (std::memcmp(bytes, net.prefix, static_cast<size_t>(full)) != 0) return false;
  const int bits = net.prefix_len % 8;
  if (bits == 0) return true;
  const unsigned char mask = static_cast<unsigned char>(0xff << (8 - bits));
  return (bytes[full] & mask) == (net.prefix[full] & mask);
}

absl::StatusOr<std::string> LocalAddressIn(const std::string& cidr) {
  absl::StatusOr<Network> net = ParseNetwork(cidr);
  if (!net.ok()) return net.status();
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) {
    return ErrnoStatus(errno, "getifaddrs");
  }
  std::vector<std::string> seen;
  std::string found;
  for (ifaddrs* ifa = list; ifa != nullptr; ifa = ifa->ifa_next) {
    if (ifa->ifa_addr == nullptr) continue;
    const int family = ifa->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    std::string text = SocketAddressToString(ifa->ifa_addr);
    text = text.substr(0, text.rfind(':'));  // drop the port (always 0 here)
    if (!text.empty() && text.front() == '[') text = text.substr(1, text.size() - 2);
    if (NetworkContains(*net, ifa->ifa_addr)) {
      found = text;
      break;
    }
    seen.push_back(absl::StrCat(ifa->ifa_name, " ", text));
  }
  freeifaddrs(list);
  if (found.empty()) {
    return absl::NotFoundError(absl::StrCat("no local address in network ", cidr,
                                            " (this host has: ", absl::StrJoin(seen, ", "),
                                            "); give the address itself or fix the network"));
  }
  return found;
}

}  // namespace msgr

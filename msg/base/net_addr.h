// Network addresses as the daemons and tools spell them: "HOST:PORT" where HOST is an IPv4
// address, a bracketed IPv6 address ("[fd00::1]:6800") or a host name; and CIDR networks
// ("198.18.0.0/15", "fd00::/64") for picking which local address a daemon binds, as Ceph's
// public_network / cluster_network do.
//
// One parser for every listener and connector (the tcp messenger, the rdma side channel,
// the OSD's flags), so "[::1]:6800" means the same thing everywhere.
//
// Thread-safety: pure functions (LocalAddressIn reads the interface list of the calling
// thread's network namespace).
#ifndef MSGR_MSG_BASE_NET_ADDR_H_
#define MSGR_MSG_BASE_NET_ADDR_H_

#include <netinet/in.h>
#include <sys/socket.h>

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"

namespace msgr {

struct HostPort {
  std::string host;  // without brackets: "127.0.0.1", "fd00::1", "osd-host-2"
  uint16_t port = 0;
};

// "HOST:PORT" / "[V6]:PORT". INVALID_ARGUMENT naming the address and the expected form when
// the port is missing or out of range, or brackets do not close. An unbracketed address
// with several colons ("fd00::1") is refused: its port would be ambiguous.
absl::StatusOr<HostPort> ParseHostPort(const std::string& addr);

// As ParseHostPort, but the port is optional ("HOST", "[V6]" or "HOST:PORT"): it is
// `default_port` when absent.
absl::StatusOr<HostPort> ParseHostOptionalPort(const std::string& addr, uint16_t default_port);

// The inverse: brackets around IPv6 hosts. JoinHostPort("fd00::1", 7) == "[fd00::1]:7".
std::string JoinHostPort(const std::string& host, uint16_t port);

// True if `host` is a numeric IPv4 or IPv6 address.
bool IsNumericHost(const std::string& host);

// Resolves "HOST:PORT" to a socket address: numeric hosts directly, names through
// getaddrinfo (the first IPv4 or IPv6 answer). INVALID_ARGUMENT if it cannot be resolved.
struct SocketAddress {
  sockaddr_storage storage{};
  socklen_t len = 0;
  int family() const { return storage.ss_family; }
  const sockaddr* get() const { return reinterpret_cast<const sockaddr*>(&storage); }
};
absl::StatusOr<SocketAddress> ResolveHostPort(const std::string& addr);
// "HOST:PORT" of a socket address (IPv6 bracketed).
std::string SocketAddressToString(const sockaddr* sa);

// A CIDR network ("198.18.0.0/15", "fd00::/64").
struct Network {
  int family = AF_UNSPEC;
  unsigned char prefix[16] = {};  // network bytes (4 used for IPv4)
  int prefix_len = 0;
  std::string text;  // as given
};
absl::StatusOr<Network> ParseNetwork(const std::string& cidr);
bool NetworkContains(const Network& net, const sockaddr* sa);

// The first address of a local interface (of this network namespace) inside `cidr`, as a
// numeric host. NOT_FOUND listing the local addresses when none matches: a daemon started
// on the wrong host, or a network that was not set up.
absl::StatusOr<std::string> LocalAddressIn(const std::string& cidr);

}  // namespace msgr

#endif  // MSGR_MSG_BASE_NET_ADDR_H_

#include "msg/tcp/error.h"

#include <boost/asio/error.hpp>
#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "msg/base/net_addr.h"

namespace msgr::tcp {

absl::Status ErrorToStatus(const boost::system::error_code& ec, absl::string_view context) {
  if (!ec) return absl::OkStatus();
  const std::string msg = absl::StrCat(context, ": ", ec.message());
  namespace ae = boost::asio::error;
  if (ec == ae::eof)
    return absl::UnavailableError(absl::StrCat(context, ": peer closed the socket"));
  if (ec == ae::operation_aborted) return absl::CancelledError(msg);
  if (ec == ae::timed_out) return absl::DeadlineExceededError(msg);
  if (ec == ae::connection_refused || ec == ae::connection_reset || ec == ae::connection_aborted ||
      ec == ae::broken_pipe || ec == ae::network_unreachable || ec == ae::host_unreachable ||
      ec == ae::not_connected || ec == ae::shut_down) {
    return absl::UnavailableError(msg);
  }
  if (ec == ae::address_in_use || ec == ae::address_family_not_supported ||
      ec == ae::invalid_argument) {
    return absl::InvalidArgumentError(msg);
  }
  if (ec == ae::access_denied) return absl::PermissionDeniedError(msg);
  if (ec == ae::no_buffer_space || ec == ae::no_memory || ec == ae::no_descriptors) {
    return absl::ResourceExhaustedError(msg);
  }
  return absl::UnknownError(msg);
}

absl::StatusOr<boost::asio::ip::tcp::endpoint> ParseEndpoint(const std::string& addr) {
  absl::StatusOr<SocketAddress> sa = ResolveHostPort(addr);
  if (!sa.ok()) return sa.status();
  boost::asio::ip::tcp::endpoint ep;
  std::memcpy(ep.data(), sa->get(), sa->len);
  ep.resize(sa->len);
  return ep;
}

std::string EndpointToString(const boost::asio::ip::tcp::endpoint& ep) {
  return SocketAddressToString(ep.data());
}

}  // namespace msgr::tcp

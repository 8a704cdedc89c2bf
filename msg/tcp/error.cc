#include "msg/tcp/error.h"

#include <boost/asio/error.hpp>
#include <cerrno>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

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
  const size_t colon = addr.rfind(':');
  if (colon == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", addr, "' is not host:port (e.g. 127.0.0.1:6800)"));
  }
  uint32_t port;
  if (!absl::SimpleAtoi(addr.substr(colon + 1), &port) || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("address '", addr, "' has a bad port"));
  }
  std::string host = addr.substr(0, colon);
  if (host == "localhost") host = "127.0.0.1";
  boost::system::error_code ec;
  auto ip = boost::asio::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("address '", addr, "': host must be a numeric IP address"));
  }
  return boost::asio::ip::tcp::endpoint(ip, static_cast<uint16_t>(port));
}

std::string EndpointToString(const boost::asio::ip::tcp::endpoint& ep) {
  return absl::StrCat(ep.address().to_string(), ":", ep.port());
}

}  // namespace msgr::tcp

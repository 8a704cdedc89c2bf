// The TCP backend's one place where OS and Boost errors become absl::Status, and where
// "host:port" strings become endpoints. Pure functions: thread-safe.
#ifndef MSGR_MSG_TCP_ERROR_H_
#define MSGR_MSG_TCP_ERROR_H_

#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace msgr::tcp {

// "<context>: <message>" with a code chosen from the error (refused/reset/eof ->
// kUnavailable, timeouts -> kDeadlineExceeded, address problems -> kInvalidArgument...).
absl::Status ErrorToStatus(const boost::system::error_code& ec, absl::string_view context);

// Parses "HOST:PORT" with msgr::ResolveHostPort (IPv4, [IPv6], names; port 0 allowed).
absl::StatusOr<boost::asio::ip::tcp::endpoint> ParseEndpoint(const std::string& addr);
std::string EndpointToString(const boost::asio::ip::tcp::endpoint& ep);

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_ERROR_H_

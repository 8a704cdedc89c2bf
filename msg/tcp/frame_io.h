// Asynchronous read/write of one whole small frame, for the handshake (both sides).
// The data path of an open connection does not use these (see reader.cc / writer.cc).
// Handlers run on `strand`; the socket is kept alive by the shared_ptr until then.
#ifndef MSGR_MSG_TCP_FRAME_IO_H_
#define MSGR_MSG_TCP_FRAME_IO_H_

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/strand.hpp>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "msg/frame.h"
#include "msg/session/secure_mode.h"

namespace msgr::tcp {

using Strand = boost::asio::strand<boost::asio::io_context::executor_type>;
using SocketPtr = std::shared_ptr<boost::asio::ip::tcp::socket>;

// Reads one control-sized frame (header + payload <= kMaxControlPayload) and verifies it.
// Errors: kDataLoss (crc), kInvalidArgument (malformed or truncated), kUnavailable (socket).
void AsyncReadFrame(SocketPtr socket, Strand strand,
                    std::function<void(absl::Status, FrameHeader, std::string)> done);

// Secure mode's first frame from the server (READY, or CLOSE): reads one control-sized
// sealed frame and opens it with `rx`. A cleartext CLOSE is accepted too: a server that
// refuses the AUTH has no keys to seal it with. A frame that fails authentication is
// kDataLoss "secure frame failed authentication: ..."; other errors as AsyncReadFrame.
void AsyncReadSealedFrame(SocketPtr socket, Strand strand,
                          std::shared_ptr<session::SecureStream> rx,
                          std::function<void(absl::Status, FrameHeader, std::string)> done);

// Writes `bytes` (an encoded frame) completely.
void AsyncWriteBytes(SocketPtr socket, Strand strand, std::string bytes,
                     std::function<void(absl::Status)> done);

// Status for a failed read of `want` bytes of which `got` arrived: EOF part-way through
// a frame is a truncated frame (kInvalidArgument); EOF on a frame boundary is a close.
absl::Status ReadErrorToStatus(const boost::system::error_code& ec, size_t got, size_t want,
                               bool mid_frame, const std::string& peer);

}  // namespace msgr::tcp

#endif  // MSGR_MSG_TCP_FRAME_IO_H_

#include "msg/tcp/frame_io.h"

#include <array>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>

#include "absl/strings/str_cat.h"
#include "msg/tcp/error.h"

namespace msgr::tcp {

namespace asio = boost::asio;

absl::Status ReadErrorToStatus(const boost::system::error_code& ec, size_t got, size_t want,
                               bool mid_frame, const std::string& peer) {
  if (ec == asio::error::eof && (got > 0 || mid_frame)) {
    return absl::InvalidArgumentError(absl::StrCat("truncated frame from ", peer, ": got ", got,
                                                   " of ", want, " bytes, then the peer closed"));
  }
  return ErrorToStatus(ec, absl::StrCat("read from ", peer));
}

namespace {
struct ReadState {
  std::array<uint8_t, kFrameHeaderBytes> hdr;
  FrameHeader h;
  std::string payload;
};
}  // namespace

void AsyncReadFrame(SocketPtr socket, Strand strand,
                    std::function<void(absl::Status, FrameHeader, std::string)> done) {
  auto st = std::make_shared<ReadState>();
  auto* sock = socket.get();
  asio::async_read(
      *sock, asio::buffer(st->hdr),
      asio::bind_executor(strand, [socket, strand, st, done](boost::system::error_code ec,
                                                             size_t n) {
        std::string peer = "peer";
        boost::system::error_code ec2;
        auto ep = socket->remote_endpoint(ec2);
        if (!ec2) peer = EndpointToString(ep);
        if (ec) return done(ReadErrorToStatus(ec, n, kFrameHeaderBytes, false, peer), {}, {});
        absl::Status s = DecodeFrameHeader(st->hdr.data(), kMaxControlPayload, &st->h);
        if (!s.ok()) return done(s, {}, {});
        st->payload.resize(st->h.payload_len);
        asio::async_read(
            *socket, asio::buffer(st->payload),
            asio::bind_executor(strand, [socket, st, done, peer](boost::system::error_code ec,
                                                                 size_t n) {
              if (ec) {
                return done(ReadErrorToStatus(ec, n, st->payload.size(), true, peer), {}, {});
              }
              absl::Status s = VerifyPayloadCrc(st->h, st->payload.data(), CrcCoveredBytes(st->h));
              if (!s.ok()) return done(s, {}, {});
              done(absl::OkStatus(), st->h, std::move(st->payload));
            }));
      }));
}

void AsyncWriteBytes(SocketPtr socket, Strand strand, std::string bytes,
                     std::function<void(absl::Status)> done) {
  auto buf = std::make_shared<std::string>(std::move(bytes));
  asio::async_write(
      *socket, asio::buffer(*buf),
      asio::bind_executor(strand, [socket, buf, done](boost::system::error_code ec, size_t) {
        done(ErrorToStatus(ec, "write"));
      }));
}

}  // namespace msgr::tcp

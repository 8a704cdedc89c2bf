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

namespace {
struct SealedReadState {
  std::array<uint8_t, kFrameHeaderBytes + session::kSecureTagBytes> hdr;
  FrameHeader h;
  std::string payload;
  std::string peer = "peer";
};

absl::Status AuthFailed(const char* piece, const std::string& peer) {
  return absl::DataLossError(absl::StrCat("secure frame failed authentication: the ", piece,
                                          " of a frame from ", peer,
                                          " was tampered with, truncated, replayed or reordered "
                                          "(or the handshake was)"));
}
}  // namespace

void AsyncReadSealedFrame(SocketPtr socket, Strand strand,
                          std::shared_ptr<session::SecureStream> rx,
                          std::function<void(absl::Status, FrameHeader, std::string)> done) {
  auto st = std::make_shared<SealedReadState>();
  boost::system::error_code ec2;
  auto ep = socket->remote_endpoint(ec2);
  if (!ec2) st->peer = EndpointToString(ep);
  auto read_payload = [socket, strand, rx, st, done](bool sealed) {
    const size_t wire = sealed ? session::SealedPayloadBytes(false, st->h.payload_len)
                               : st->h.payload_len;
    st->payload.resize(wire);
    asio::async_read(
        *socket, asio::buffer(st->payload),
        asio::bind_executor(strand, [st, rx, done, sealed](boost::system::error_code ec, size_t n) {
          if (ec) return done(ReadErrorToStatus(ec, n, st->payload.size(), true, st->peer), {}, {});
          if (sealed && !st->payload.empty()) {
            const size_t len = st->payload.size() - session::kSecureTagBytes;
            auto* p = reinterpret_cast<uint8_t*>(st->payload.data());
            if (!rx->Open(p, len, p + len)) return done(AuthFailed("payload", st->peer), {}, {});
            st->payload.resize(len);
          }
          absl::Status s = VerifyPayloadCrc(st->h, st->payload.data(), CrcCoveredBytes(st->h));
          if (!s.ok()) return done(s, {}, {});
          done(absl::OkStatus(), st->h, std::move(st->payload));
        }));
  };
  asio::async_read(
      *socket, asio::buffer(st->hdr.data(), kFrameHeaderBytes),
      asio::bind_executor(strand, [socket, strand, rx, st, done, read_payload](
                                      boost::system::error_code ec, size_t n) {
        if (ec) return done(ReadErrorToStatus(ec, n, kFrameHeaderBytes, false, st->peer), {}, {});
        // A valid cleartext header (magic and crc32c: a 2^-64 accident for ciphertext) can
        // only be the refusal of a server without keys.
        if (DecodeFrameHeader(st->hdr.data(), kMaxControlPayload, &st->h).ok() &&
            st->h.type == FrameType::kClose) {
          return read_payload(false);
        }
        asio::async_read(
            *socket, asio::buffer(st->hdr.data() + kFrameHeaderBytes, session::kSecureTagBytes),
            asio::bind_executor(strand, [rx, st, done, read_payload](boost::system::error_code ec,
                                                                     size_t n) {
              if (ec) {
                return done(ReadErrorToStatus(ec, kFrameHeaderBytes + n,
                                              kFrameHeaderBytes + session::kSecureTagBytes, true,
                                              st->peer),
                            {}, {});
              }
              if (!rx->Open(st->hdr.data(), kFrameHeaderBytes, st->hdr.data() + kFrameHeaderBytes)) {
                return done(AuthFailed("header", st->peer), {}, {});
              }
              absl::Status s = DecodeFrameHeader(st->hdr.data(), kMaxControlPayload, &st->h);
              if (!s.ok()) return done(s, {}, {});
              read_payload(true);
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

// A raw TCP socket to a messenger's port, for bad-input tests of either backend (the rdma
// backend's handshake runs over a TCP side channel too): send anything, read exactly n
// bytes, see whether the peer closed the connection. And a well-formed HELLO frame.
#ifndef MSGR_TESTS_MSG_RAW_SOCKET_H_
#define MSGR_TESTS_MSG_RAW_SOCKET_H_

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "msg/frame.h"
#include "msg/handshake.h"

namespace msgr::testing {

class RawSocket {
 public:
  explicit RawSocket(int port) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
    sockaddr_in me{};
    socklen_t len = sizeof(me);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&me), &len);
    local_port_ = ntohs(me.sin_port);
  }
  ~RawSocket() { close(fd_); }
  void Send(const std::string& b) {
    ASSERT_EQ(send(fd_, b.data(), b.size(), MSG_NOSIGNAL), static_cast<ssize_t>(b.size()));
  }
  // As Send, for a peer that may already have closed the connection: false if it had.
  bool SendUnlessClosed(const std::string& b) {
    return send(fd_, b.data(), b.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(b.size());
  }
  void ShutdownWrite() { shutdown(fd_, SHUT_WR); }
  // Reads exactly n bytes (or fails after 3 s).
  std::string Read(size_t n) {
    std::string out;
    while (out.size() < n) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 3000) <= 0) break;
      char buf[4096];
      ssize_t r = recv(fd_, buf, std::min(sizeof(buf), n - out.size()), 0);
      if (r <= 0) break;
      out.append(buf, r);
    }
    return out;
  }
  // True when the peer closed the connection within `ms` (any pending bytes are drained).
  bool ClosedByPeer(int ms) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
    while (std::chrono::steady_clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t r = recv(fd_, buf, sizeof(buf), 0);
      if (r <= 0) return true;
    }
    return false;
  }
  int local_port() const { return local_port_; }

 private:
  int fd_ = -1;
  int local_port_ = 0;
};

inline std::string HelloFrame(EntityName name = EntityName{EntityType::kClient, 66}) {
  Hello h;
  h.name = name;
  h.features = kFeaturesSupported;
  h.nonce = NewNonce();
  FrameHeader fh;
  fh.type = FrameType::kHello;
  return EncodeFrame(fh, EncodeHello(h));
}

}  // namespace msgr::testing

#endif  // MSGR_TESTS_MSG_RAW_SOCKET_H_

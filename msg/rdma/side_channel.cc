#include "msg/rdma/side_channel.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <memory>

#include "absl/strings/str_cat.h"
#include "msg/base/net_addr.h"

namespace msgr::rdma {
namespace {

int MsUntil(absl::Time deadline) {
  const absl::Duration left = deadline - absl::Now();
  if (left <= absl::ZeroDuration()) return 0;
  return static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 1 << 30));
}

}  // namespace

SideChannel::SideChannel(int fd) : fd_(fd) {
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  fcntl(fd_, F_SETFL, fcntl(fd_, F_GETFL) | O_NONBLOCK);
  sockaddr_storage sa{};
  socklen_t len = sizeof(sa);
  if (getpeername(fd_, reinterpret_cast<sockaddr*>(&sa), &len) == 0) {
    peer_ = SocketAddressToString(reinterpret_cast<const sockaddr*>(&sa));
  }
}

SideChannel::~SideChannel() { close(fd_); }

absl::StatusOr<std::unique_ptr<SideChannel>> SideChannel::StartConnect(const std::string& addr,
                                                                       bool* connected) {
  auto sa = ResolveHostPort(addr);
  if (!sa.ok()) return sa.status();
  const int fd = socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  auto ch = std::make_unique<SideChannel>(fd);
  ch->peer_ = addr;
  *connected = connect(fd, sa->get(), sa->len) == 0;
  if (!*connected && errno != EINPROGRESS) {
    return ErrnoStatus(errno, absl::StrCat("connect to ", addr));
  }
  return ch;
}

absl::Status SideChannel::FinishConnect() {
  int err = 0;
  socklen_t len = sizeof(err);
  if (getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
  if (err != 0) return ErrnoStatus(err, absl::StrCat("connect to ", peer_));
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<SideChannel>> SideChannel::Connect(const std::string& addr,
                                                                  absl::Duration timeout) {
  bool connected = false;
  auto ch = StartConnect(addr, &connected);
  if (!ch.ok() || connected) return ch;
  pollfd p{(*ch)->fd(), POLLOUT, 0};
  if (poll(&p, 1, MsUntil(absl::Now() + timeout)) <= 0) {
    return absl::DeadlineExceededError(absl::StrCat("connect to ", addr, " timed out"));
  }
  if (absl::Status s = (*ch)->FinishConnect(); !s.ok()) return s;
  return ch;
}

absl::Status SideChannel::WriteAll(const void* data, size_t len, absl::Time deadline) {
  const char* p = static_cast<const char*>(data);
  while (len > 0) {
    const ssize_t n = send(fd_, p, len, MSG_NOSIGNAL);
    if (n > 0) {
      p += n;
      len -= static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return ErrnoStatus(errno, "side channel send");
    pollfd pf{fd_, POLLOUT, 0};
    const int ms = MsUntil(deadline);
    if (ms == 0 || poll(&pf, 1, ms) == 0) {
      return absl::DeadlineExceededError("side channel send timed out");
    }
  }
  return absl::OkStatus();
}

absl::Status SideChannel::WriteFrame(const FrameHeader& h, std::string_view payload,
                                     absl::Time deadline) {
  const std::string bytes = EncodeFrame(h, payload);
  absl::MutexLock l(&write_mu_);
  return WriteAll(bytes.data(), bytes.size(), deadline);
}

absl::Status SideChannel::WriteEncoded(std::string_view frame, absl::Time deadline) {
  absl::MutexLock l(&write_mu_);
  return WriteAll(frame.data(), frame.size(), deadline);
}

absl::Status SideChannel::WriteClose(const absl::Status& why, absl::Time deadline) {
  FrameHeader h;
  h.type = FrameType::kClose;
  h.msg_type = static_cast<uint16_t>(why.code());
  // A control frame carries at most kMaxControlPayload bytes: a longer payload would make
  // the peer's decoder refuse the frame, losing the code. Cut the message instead.
  return WriteFrame(h, std::string(why.message().substr(0, kMaxControlPayload)), deadline);
}

absl::Status SideChannel::ReadSome(absl::Time deadline) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      decoder_.Append(buf, static_cast<size_t>(n));
      return absl::OkStatus();
    }
    if (n == 0) return absl::UnavailableError("side channel closed by the peer");
    if (errno != EAGAIN && errno != EINTR) return ErrnoStatus(errno, "side channel recv");
    pollfd pf{fd_, POLLIN, 0};
    const int ms = MsUntil(deadline);
    if (ms == 0 || poll(&pf, 1, ms) == 0) {
      return absl::DeadlineExceededError("side channel: peer sent nothing in time");
    }
  }
}

absl::Status SideChannel::ReadFrame(uint32_t max_payload, absl::Time deadline,
                                    DecodedFrame* out) {
  for (;;) {
    absl::Status error;
    switch (decoder_.Next(out, &error)) {
      case FrameDecoder::Result::kFrame:
        if (out->header.payload_len > max_payload) {
          return absl::InvalidArgumentError("side channel frame too large");
        }
        return absl::OkStatus();
      case FrameDecoder::Result::kError:
        return error;
      case FrameDecoder::Result::kNeedMore:
        break;
    }
    if (absl::Status s = ReadSome(deadline); !s.ok()) return s;
  }
}

FrameDecoder::Result SideChannel::ReadAvailable(DecodedFrame* out, absl::Status* error) {
  char buf[4096];
  for (;;) {
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n > 0) {
      decoder_.Append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n == 0) {
      *error = absl::UnavailableError("side channel closed by the peer");
      break;
    }
    if (errno == EAGAIN || errno == EINTR) break;
    *error = ErrnoStatus(errno, "side channel recv");
    break;
  }
  absl::Status decode_error;
  const FrameDecoder::Result r = decoder_.Next(out, &decode_error);
  if (r == FrameDecoder::Result::kFrame) return r;  // report EOF after the last frame
  if (r == FrameDecoder::Result::kError) {
    *error = decode_error;
    return r;
  }
  return error->ok() ? FrameDecoder::Result::kNeedMore : FrameDecoder::Result::kError;
}

absl::Status SideChannel::DrainFrames(absl::FunctionRef<bool(const DecodedFrame&)> on_frame) {
  for (;;) {
    DecodedFrame f;
    absl::Status error;
    switch (ReadAvailable(&f, &error)) {
      case FrameDecoder::Result::kNeedMore:
        return absl::OkStatus();
      case FrameDecoder::Result::kError:
        return error;
      case FrameDecoder::Result::kFrame:
        if (!on_frame(f)) return absl::OkStatus();
        break;
    }
  }
}

void SideChannel::Shutdown() { shutdown(fd_, SHUT_RDWR); }

absl::StatusOr<std::unique_ptr<Listener>> Listener::Listen(const std::string& addr) {
  auto sa = ResolveHostPort(addr);
  if (!sa.ok()) return sa.status();
  const int fd = socket(sa->family(), SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "socket");
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(fd, sa->get(), sa->len) != 0 ||
      listen(fd, 128) != 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, absl::StrCat("bind/listen on ", addr));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof(bound);
  getsockname(fd, reinterpret_cast<sockaddr*>(&bound), &len);
  const int wake = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (wake < 0) {
    const int err = errno;
    close(fd);
    return ErrnoStatus(err, "eventfd");
  }
  return std::unique_ptr<Listener>(new Listener(fd, wake, SocketAddressToString(reinterpret_cast<const sockaddr*>(&bound))));
}

Listener::~Listener() {
  close(fd_);
  close(wake_fd_);
}

absl::StatusOr<std::unique_ptr<SideChannel>> Listener::Accept() {
  for (;;) {
    pollfd p[2] = {{fd_, POLLIN, 0}, {wake_fd_, POLLIN, 0}};
    if (poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "poll");
    }
    if (p[1].revents != 0) return absl::CancelledError("listener stopped");
    const int fd = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd >= 0) return std::make_unique<SideChannel>(fd);
    if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED) {
      return ErrnoStatus(errno, "accept");
    }
  }
}

void Listener::Stop() {
  const uint64_t one = 1;
  (void)!write(wake_fd_, &one, sizeof(one));
}

}  // namespace msgr::rdma

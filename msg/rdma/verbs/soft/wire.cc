#include "msg/rdma/verbs/soft/wire.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "msg/base/errno_status.h"

namespace msgr {
namespace verbs {
namespace soft {

namespace {

constexpr int kMaxIov = 64;

absl::StatusOr<socklen_t> AbstractAddr(absl::string_view name, struct sockaddr_un* addr) {
  std::memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (name.empty() || name.size() + 1 > sizeof(addr->sun_path)) {
    return absl::InvalidArgumentError(absl::StrCat("bad soft locator '", name, "'"));
  }
  addr->sun_path[0] = '\0';
  std::memcpy(addr->sun_path + 1, name.data(), name.size());
  return static_cast<socklen_t>(offsetof(struct sockaddr_un, sun_path) + 1 + name.size());
}

}  // namespace

absl::Status SendMessage(int sock, const WireHeader& hdr, const struct iovec* iov, int n,
                         int pass_fd) {
  std::vector<struct iovec> vec;
  vec.reserve(static_cast<size_t>(n) + 1);
  vec.push_back({const_cast<WireHeader*>(&hdr), sizeof(hdr)});
  for (int i = 0; i < n; ++i) {
    if (iov[i].iov_len > 0) vec.push_back(iov[i]);
  }
  size_t idx = 0;
  bool fd_pending = pass_fd >= 0;
  alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int))];
  while (idx < vec.size()) {
    struct msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &vec[idx];
    msg.msg_iovlen = std::min<size_t>(vec.size() - idx, kMaxIov);
    if (fd_pending) {
      std::memset(cbuf, 0, sizeof(cbuf));
      msg.msg_control = cbuf;
      msg.msg_controllen = sizeof(cbuf);
      struct cmsghdr* cm = CMSG_FIRSTHDR(&msg);
      cm->cmsg_level = SOL_SOCKET;
      cm->cmsg_type = SCM_RIGHTS;
      cm->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(cm), &pass_fd, sizeof(int));
    }
    ssize_t w = ::sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "soft: sendmsg");
    }
    fd_pending = false;
    size_t left = static_cast<size_t>(w);
    while (left > 0 && idx < vec.size()) {
      if (left >= vec[idx].iov_len) {
        left -= vec[idx].iov_len;
        ++idx;
      } else {
        vec[idx].iov_base = static_cast<char*>(vec[idx].iov_base) + left;
        vec[idx].iov_len -= left;
        left = 0;
      }
    }
  }
  return absl::OkStatus();
}

absl::Status RecvHeader(int sock, WireHeader* hdr, int* fd_out) {
  *fd_out = -1;
  size_t got = 0;
  char* p = reinterpret_cast<char*>(hdr);
  while (got < sizeof(*hdr)) {
    struct iovec iov = {p + got, sizeof(*hdr) - got};
    alignas(struct cmsghdr) char cbuf[CMSG_SPACE(sizeof(int) * 4)];
    struct msghdr msg;
    std::memset(&msg, 0, sizeof(msg));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = cbuf;
    msg.msg_controllen = sizeof(cbuf);
    ssize_t r = ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) {
      const int err = errno;
      if (*fd_out >= 0) {  // came with an earlier chunk of this header: not the caller's
        ::close(*fd_out);
        *fd_out = -1;
      }
      if (r == 0) return absl::UnavailableError("soft: peer closed the connection");
      return ErrnoStatus(err, "soft: recvmsg");
    }
    for (struct cmsghdr* cm = CMSG_FIRSTHDR(&msg); cm != nullptr; cm = CMSG_NXTHDR(&msg, cm)) {
      if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS) continue;
      size_t nfds = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      for (size_t i = 0; i < nfds; ++i) {
        int fd;
        std::memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(int));
        if (*fd_out < 0) {
          *fd_out = fd;
        } else {
          ::close(fd);  // Protocol carries at most one fd per message.
        }
      }
    }
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::Status RecvExact(int sock, void* buf, size_t len) {
  char scratch[4096];
  size_t got = 0;
  while (got < len) {
    void* dst = buf ? static_cast<char*>(buf) + got : scratch;
    size_t want = buf ? len - got : std::min(len - got, sizeof(scratch));
    ssize_t r = ::recv(sock, dst, want, MSG_WAITALL);
    if (r < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus(errno, "soft: recv");
    }
    if (r == 0) return absl::UnavailableError("soft: peer closed the connection mid-message");
    got += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

absl::StatusOr<int> ListenAbstract(absl::string_view name) {
  struct sockaddr_un addr;
  absl::StatusOr<socklen_t> len = AbstractAddr(name, &addr);
  if (!len.ok()) return len.status();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "soft: socket(AF_UNIX)");
  if (::bind(fd, reinterpret_cast<struct sockaddr*>(&addr), *len) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("soft: bind(@", name, ")"));
  }
  if (::listen(fd, 128) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "soft: listen");
  }
  return fd;
}

absl::StatusOr<int> ConnectAbstract(absl::string_view name) {
  struct sockaddr_un addr;
  absl::StatusOr<socklen_t> len = AbstractAddr(name, &addr);
  if (!len.ok()) return len.status();
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return ErrnoStatus(errno, "soft: socket(AF_UNIX)");
  int r;
  do {
    r = ::connect(fd, reinterpret_cast<struct sockaddr*>(&addr), *len);
  } while (r != 0 && errno == EINTR);
  if (r != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("soft: connect(@", name,
                                         ") — is the peer's soft device open?"));
  }
  return fd;
}

absl::StatusOr<int> CreateMemfd(const char* name, size_t bytes, bool huge) {
  if (huge) {
    int hfd = ::memfd_create(name, MFD_CLOEXEC | MFD_HUGETLB);
    if (hfd >= 0 && ::ftruncate(hfd, static_cast<off_t>(bytes)) == 0) return hfd;
    if (hfd >= 0) ::close(hfd);  // No hugepages configured (or size not a multiple).
  }
  int fd = ::memfd_create(name, MFD_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "soft: memfd_create");
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    int err = errno;
    ::close(fd);
    return ErrnoStatus(err, "soft: ftruncate(memfd)");
  }
  // Allocated now: a shortage of memory is an error of this registration, not an OOM
  // kill at some later write into the region (shmem has no size limit of its own).
  if (int err = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes)); err != 0) {
    ::close(fd);
    return ErrnoStatus(err, absl::StrCat("soft: allocating ", bytes, " bytes for ", name));
  }
  return fd;
}

std::string HostScope() {
  std::string boot = "noboot";
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  if (std::getline(in, boot)) boot = boot.substr(0, 8);
  struct stat st {};
  const unsigned long long netns =
      ::stat("/proc/self/ns/net", &st) == 0 ? static_cast<unsigned long long>(st.st_ino) : 0;
  return absl::StrCat(boot, "-", netns);
}

std::string LocatorScope(absl::string_view locator) {
  std::vector<absl::string_view> parts = absl::StrSplit(locator, '.');
  if (parts.size() != 5 || parts[0] != "msgr-soft") return "";
  return std::string(parts[1]);
}

}  // namespace soft
}  // namespace verbs
}  // namespace msgr

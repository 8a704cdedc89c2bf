#include "osd_sim/admin_socket.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "msg/base/errno_status.h"
#include "absl/strings/str_join.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"

namespace msgr::osd {
namespace {

absl::Status Errno(const std::string& what, const std::string& path) {
  return ErrnoStatus(errno, absl::StrCat(what, " ", path));
}

absl::StatusOr<sockaddr_un> Address(const std::string& path) {
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  if (path.size() >= sizeof(a.sun_path)) {
    return absl::InvalidArgumentError(
        absl::StrCat("admin socket path too long (", path.size(), " bytes, max ",
                     sizeof(a.sun_path) - 1, "): ", path, "; use a shorter run dir"));
  }
  std::memcpy(a.sun_path, path.c_str(), path.size() + 1);
  return a;
}

void WriteAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = write(fd, s.data() + off, s.size() - off);
    if (n <= 0) return;
    off += static_cast<size_t>(n);
  }
}

}  // namespace

absl::StatusOr<std::unique_ptr<AdminSocket>> AdminSocket::Create(const std::string& path) {
  auto addr = Address(path);
  if (!addr.ok()) return addr.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket for", path);
  unlink(path.c_str());
  if (bind(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0 || listen(fd, 16) != 0) {
    auto s = Errno("bind admin socket", path);
    close(fd);
    return s;
  }
  return std::unique_ptr<AdminSocket>(new AdminSocket(path, fd));
}

AdminSocket::AdminSocket(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
  if (pipe2(stop_pipe_, O_CLOEXEC) != 0) stop_pipe_[0] = stop_pipe_[1] = -1;
}

AdminSocket::~AdminSocket() {
  if (thread_.joinable()) {
    (void)!write(stop_pipe_[1], "x", 1);
    thread_.join();
  }
  close(fd_);
  if (stop_pipe_[0] >= 0) {
    close(stop_pipe_[0]);
    close(stop_pipe_[1]);
  }
  unlink(path_.c_str());
}

void AdminSocket::Register(const std::string& command, Handler handler) {
  handlers_[command] = std::move(handler);
}

void AdminSocket::Start() {
  thread_ = std::thread([this] { Run(); });
}

void AdminSocket::Run() {
  for (;;) {
    pollfd fds[2] = {{fd_, POLLIN, 0}, {stop_pipe_[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR) return;
    if (fds[1].revents) return;
    if (!(fds[0].revents & POLLIN)) continue;
    const int c = accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (c < 0) continue;
    // One short command line; a client that sends nothing for 2 s is dropped.
    std::string line;
    char buf[256];
    while (line.find('\n') == std::string::npos && line.size() < 1024) {
      pollfd p{c, POLLIN, 0};
      if (poll(&p, 1, 2000) <= 0) break;
      const ssize_t n = read(c, buf, sizeof buf);
      if (n <= 0) break;
      line.append(buf, static_cast<size_t>(n));
    }
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r' || line.back() == ' ')) {
      line.pop_back();
    }
    auto it = handlers_.find(line);
    std::string reply;
    if (it != handlers_.end()) {
      reply = it->second();
    } else {
      std::vector<std::string> known;
      for (auto& [k, v] : handlers_) known.push_back(k);
      reply = nlohmann::json{{"error", absl::StrCat("unknown command '", line, "'; known: ",
                                                    absl::StrJoin(known, ", "))}}
                  .dump();
    }
    WriteAll(c, reply + "\n");
    close(c);
  }
}

absl::StatusOr<std::string> AdminSocket::Query(const std::string& path,
                                               const std::string& command) {
  auto addr = Address(path);
  if (!addr.ok()) return addr.status();
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket for", path);
  if (connect(fd, reinterpret_cast<sockaddr*>(&*addr), sizeof(*addr)) != 0) {
    auto s = Errno("cannot connect to admin socket", path);
    close(fd);
    return absl::UnavailableError(absl::StrCat(s.message(), " (is the daemon running?)"));
  }
  WriteAll(fd, command + "\n");
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 5000) <= 0) break;
    const ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

}  // namespace msgr::osd

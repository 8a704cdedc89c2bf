// A local admin endpoint on a Unix socket (like Ceph's admin socket).
//
// Protocol: the client connects, writes one command line ("perf dump\n"), and reads the
// reply until EOF. Commands are registered with handlers returning text (JSON for the
// OSD's "perf dump", "dump_sessions", "dump_ops_in_flight", "help"). Unknown commands get
// {"error": "..."} listing the known ones.
// Thread-safety: handlers run on the admin thread; Register before Start.
#ifndef MSGR_OSD_SIM_ADMIN_SOCKET_H_
#define MSGR_OSD_SIM_ADMIN_SOCKET_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace msgr::osd {

class AdminSocket {
 public:
  using Handler = std::function<std::string()>;

  // Binds `path` (an existing stale socket file is replaced). REQUIRES: path fits
  // in sockaddr_un (about 100 bytes).
  static absl::StatusOr<std::unique_ptr<AdminSocket>> Create(const std::string& path);
  ~AdminSocket();  // stops the thread and removes the socket file

  void Register(const std::string& command, Handler handler);
  void Start();

  // Client side: sends `command` to the socket at `path` and returns the reply.
  static absl::StatusOr<std::string> Query(const std::string& path, const std::string& command);

 private:
  AdminSocket(std::string path, int fd);
  void Run();

  const std::string path_;
  const int fd_;
  int stop_pipe_[2] = {-1, -1};
  std::map<std::string, Handler> handlers_;
  std::thread thread_;
};

}  // namespace msgr::osd

#endif  // MSGR_OSD_SIM_ADMIN_SOCKET_H_

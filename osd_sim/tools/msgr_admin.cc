// msgr-admin: queries a daemon's admin socket.
//   msgr_admin SOCKET perf dump            every counter (JSON)
//   msgr_admin SOCKET dump_sessions        messenger sessions: peer, backend, ring fill
//   msgr_admin SOCKET dump_ops_in_flight   ops not yet answered, their age, slow ones
//   msgr_admin SOCKET compact              compact the store now; what it freed
//   msgr_admin SOCKET help                 the commands this daemon knows
#include <cstdio>
#include <string>

#include "osd_sim/admin_socket.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr,
                 "usage: %s SOCKET COMMAND...   (e.g. %s run/osd.0.asok perf dump)\n"
                 "commands: perf dump, dump_sessions, dump_ops_in_flight, compact, help\n",
                 argv[0], argv[0]);
    return 2;
  }
  std::string cmd;
  for (int i = 2; i < argc; ++i) cmd += (i > 2 ? " " : "") + std::string(argv[i]);
  auto r = msgr::osd::AdminSocket::Query(argv[1], cmd);
  if (!r.ok()) {
    std::fprintf(stderr, "msgr_admin: %s\n", std::string(r.status().message()).c_str());
    return 1;
  }
  std::fputs(r->c_str(), stdout);
  return 0;
}

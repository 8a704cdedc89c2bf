// A messenger client in a process of its own, for tests that need a client to die: it
// connects (lossless, with a ring) and writes records, then either exits as soon as the
// first one is acknowledged -- no Shutdown, no goodbye: the kernel closes its sockets, as
// when a process dies -- or keeps writing until it is killed.
//
//   client_child BACKEND ADDR CLIENT_ID exit|write [SECRET]
//
// The tests start it with fork+exec (SpawnClientChild in client_child_spawn.h), never with
// a bare fork of their own multi-threaded process: a forked child that builds a messenger
// can deadlock on a lock some other thread held at the fork (the allocator's, the
// logger's) -- seen as a test hanging until its timeout under parallel load.
// The rdma backend uses the soft device unless MSGR_RDMA_DEVICE says otherwise (inherited).
// Exit status: 0 acked (exit mode), 2 usage, 3 messenger, 4 connect, 5 write, 6 no ack.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/time/time.h"
#include "msg/messenger.h"
#include "tests/msg/messenger_test_util.h"

int main(int argc, char** argv) {
  if (argc < 5) {
    std::fprintf(stderr, "usage: client_child BACKEND ADDR CLIENT_ID exit|write [SECRET]\n");
    return 2;
  }
  const std::string backend = argv[1], addr = argv[2], mode = argv[4];
  msgr::MessengerOptions o;
  o.type = backend;
  o.name = msgr::EntityName{msgr::EntityType::kClient, std::strtoull(argv[3], nullptr, 10)};
  o.auth = argc > 5 ? msgr::AuthConfig{msgr::AuthConfig::Mode::kSecret, argv[5]}
                    : msgr::AuthConfig::None();
  o.handshake_timeout = absl::Seconds(3);
  o.reconnect_backoff_max = absl::Milliseconds(100);
  if (backend == "rdma") o.backend_options["rdma_device"] = "soft";
  msgr::testing::RecordingDispatcher d;
  auto m = msgr::Messenger::Create(o, &d);
  if (!m.ok()) return 3;
  auto conn = (*m)->Connect(addr, msgr::ConnectOptions{msgr::Policy::Lossless(), true});
  if (!conn.ok()) return 4;
  msgr::RecordDesc rd;
  rd.oid = mode == "exit" ? "o" : "victim";
  rd.tid = 1;
  if (mode == "exit") {
    if (!(*conn)->WriteRecord(rd, "data", absl::Seconds(10)).ok()) return 5;
    if (!d.WaitFor([&] { return !d.record_acks.empty(); })) return 6;
    _exit(0);
  }
  const std::string payload(50000, 'k');
  for (;;) {
    ++rd.tid;
    (void)(*conn)->WriteRecord(rd, payload, absl::Seconds(1));
  }
}

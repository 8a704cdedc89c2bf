// MonServer: a MonitorService behind a gRPC server listening on one address. Used by the
// `mon` daemon and, in-process, by tests.
//
// Thread-safety: Shutdown() and accessors may be called from any thread; Shutdown() is
// idempotent and the destructor calls it.
#ifndef MSGR_OSD_SIM_MON_MON_SERVER_H_
#define MSGR_OSD_SIM_MON_MON_SERVER_H_

#include <memory>
#include <mutex>
#include <string>

#include <grpcpp/server.h>

#include "absl/status/statusor.h"
#include "osd_sim/mon/control_auth.h"
#include "osd_sim/mon/monitor.h"

namespace msgr::mon {

struct MonServerOptions {
  MonitorOptions monitor;
  // "host:port"; port 0 picks a free port. Loopback by default: the control plane is not
  // exposed unless asked for.
  std::string addr = "127.0.0.1:0";
  // Insecure by default (every caller may do everything). A secure ControlAuth (the mon's
  // own certificate, entity "mon") serves mutual TLS and turns on the roles
  // (monitor.enforce_roles is then forced on).
  ControlAuth auth = ControlAuth::Insecure();
};

class MonServer {
 public:
  // Loads the monitor state and starts serving. UNAVAILABLE if the address cannot be
  // bound (in use, bad host).
  static absl::StatusOr<std::unique_ptr<MonServer>> Create(MonServerOptions options);
  ~MonServer();
  MonServer(const MonServer&) = delete;
  MonServer& operator=(const MonServer&) = delete;

  // The address actually bound, "host:port" with the real port.
  const std::string& addr() const { return addr_; }
  bool secure() const { return secure_; }
  int port() const { return port_; }
  MonitorService& service() { return *service_; }

  // Ends WatchMap streams, stops accepting RPCs and waits for running ones. Idempotent.
  void Shutdown();

 private:
  MonServer(std::unique_ptr<MonitorService> service, std::unique_ptr<grpc::Server> server,
            std::string addr, int port, bool secure);

  std::unique_ptr<MonitorService> service_;  // outlives server_
  std::unique_ptr<grpc::Server> server_;
  const std::string addr_;
  const int port_;
  const bool secure_;
  std::once_flag shutdown_once_;
};

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MON_SERVER_H_

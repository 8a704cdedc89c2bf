#include "osd_sim/mon/mon_server.h"

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"

namespace msgr::mon {
namespace {

// Clients send keepalive pings every 10 s so that a vanished mon is noticed; allow them.
constexpr int kMinClientPingMs = 5000;
constexpr auto kShutdownGrace = std::chrono::seconds(2);

}  // namespace

absl::StatusOr<std::unique_ptr<MonServer>> MonServer::Create(MonServerOptions options) {
  const std::string want = options.addr;
  size_t colon = want.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(absl::StrCat("bad mon address '", want,
                                                   "': want host:port"));
  }
  // A TLS server without roles would authenticate callers and then let them do anything.
  if (options.auth.secure()) options.monitor.enforce_roles = true;
  absl::StatusOr<std::unique_ptr<MonitorService>> service =
      MonitorService::Create(std::move(options.monitor));
  if (!service.ok()) return service.status();

  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort(want, options.auth.ServerCredentials(), &port);
  builder.RegisterService(service->get());
  // Two mons on one port must fail, not silently share connections.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
                             kMinClientPingMs);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  if (server == nullptr || port == 0) {
    (*service)->Stop();
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", want, " (address in use or not local?)"));
  }
  std::string bound = absl::StrCat(want.substr(0, colon), ":", port);
  return std::unique_ptr<MonServer>(
      new MonServer(std::move(*service), std::move(server), std::move(bound), port,
                    options.auth.secure()));
}

MonServer::MonServer(std::unique_ptr<MonitorService> service,
                     std::unique_ptr<grpc::Server> server, std::string addr, int port,
                     bool secure)
    : service_(std::move(service)), server_(std::move(server)), addr_(std::move(addr)),
      port_(port), secure_(secure) {}

MonServer::~MonServer() { Shutdown(); }

void MonServer::Shutdown() {
  std::call_once(shutdown_once_, [this] {
    service_->Stop();  // WatchMap handlers return now, so Shutdown below does not hang
    server_->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    server_->Wait();
  });
}

}  // namespace msgr::mon

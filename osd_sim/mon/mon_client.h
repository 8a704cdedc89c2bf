// MonClient: the client side of the monitor's gRPC API, used by OSD daemons (boot +
// heartbeats), by the client library (map + watch) and by monctl.
//
// Errors: an unreachable monitor gives UNAVAILABLE "monitor at HOST:PORT unreachable
// after <timeout>: ..." within the timeout given to Create(); other monitor errors keep
// their code (e.g. NOT_FOUND for an unknown OSD id). A monitor that refuses the TLS
// handshake (another cluster's CA, a TLS client to a monitor without TLS or the reverse)
// gives UNAVAILABLE "monitor at HOST:PORT refused the TLS handshake: ..." naming the CA
// file; a call the caller's role does not allow keeps PERMISSION_DENIED and the monitor's
// message ("client.bench may not mark OSDs out: needs client.admin").
//
// Background work: StartHeartbeats() and Watch() each run one thread that survives monitor
// restarts (heartbeats re-boot the OSD when the mon says known=false: it never booted with
// this monitor's map, or was marked down; the watch reconnects with exponential backoff).
// The heartbeat thread ends when the monitor says this process was replaced or fenced.
//
// Thread-safety: all methods may be called from any thread. Callbacks run on the
// client's background threads and must not destroy the MonClient. The destructor cancels
// in-flight RPCs and streams and joins the threads.
#ifndef MSGR_OSD_SIM_MON_MON_CLIENT_H_
#define MSGR_OSD_SIM_MON_MON_CLIENT_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "osd_sim/mon/control_auth.h"
#include "proto/mon.grpc.pb.h"

namespace msgr::mon {

class MonClient {
 public:
  using MapCallback = std::function<void(const v1::ClusterMap&)>;
  using BootCallback = std::function<void(const v1::BootOsdReply&)>;
  using FencedCallback = std::function<void(const absl::Status&)>;

  // Connects to the monitor at `addr` ("host:port"), waiting at most `timeout`, which is
  // also the deadline of every later RPC. UNAVAILABLE (see above) if it cannot connect.
  // Without authentication (ControlAuth::Insecure()).
  static absl::StatusOr<std::unique_ptr<MonClient>> Create(const std::string& addr,
                                                           absl::Duration timeout);
  // With `auth`: mutual TLS as auth.entity() when auth.secure(), the monitor verified
  // under kMonTlsName against auth's CA.
  static absl::StatusOr<std::unique_ptr<MonClient>> Create(const std::string& addr,
                                                           absl::Duration timeout,
                                                           const ControlAuth& auth);
  ~MonClient();
  MonClient(const MonClient&) = delete;
  MonClient& operator=(const MonClient&) = delete;

  absl::StatusOr<v1::ClusterMap> GetMap();
  // Registers (or re-registers) an OSD. The reply's heartbeat interval is then used by
  // StartHeartbeats().
  absl::StatusOr<v1::BootOsdReply> BootOsd(const v1::BootOsdRequest& req);
  // Marks an OSD out / in; returns the map epoch afterwards. NOT_FOUND for unknown ids.
  absl::StatusOr<uint64_t> MarkOut(uint32_t id);
  absl::StatusOr<uint64_t> MarkIn(uint32_t id);
  // Creates a pool (MonitorService::CreatePool); the reply has the new pool and epoch.
  absl::StatusOr<v1::CreatePoolReply> CreatePool(const v1::CreatePoolRequest& req);
  // Adds or removes a blocklist entry (MonitorService::Blocklist).
  absl::StatusOr<v1::BlocklistReply> Blocklist(const v1::BlocklistRequest& req);

  // Starts a thread that heartbeats for osd `boot.id()` every heartbeat interval and
  // boots it again (with `boot`) whenever the monitor does not know it as up: at the
  // start if it never booted, after being marked down, after a monitor restart.
  // `on_boot` (optional) runs after each such boot. Heartbeats carry `boot.instance()`;
  // when the monitor refuses them or a boot with FAILED_PRECONDITION (another process
  // booted as this id since, or this instance is blocklisted) the thread stops and
  // `on_fenced` (optional) runs once with that error: the process must stop serving.
  // FAILED_PRECONDITION if already started.
  absl::Status StartHeartbeats(const v1::BootOsdRequest& boot, BootCallback on_boot = nullptr,
                               FencedCallback on_fenced = nullptr);
  // What each heartbeat reports of the OSD's PGs (shown by `monctl status`), filled in on
  // the heartbeat thread before each call. Optional.
  void SetHeartbeatStats(std::function<void(v1::PgStats*)> fill) {
    absl::MutexLock l(&mu_);
    heartbeat_stats_ = std::move(fill);
  }

  // Starts a thread that follows WatchMap and calls `cb` with each map newer than the last
  // one delivered (or from a different fsid), reconnecting with backoff when the monitor
  // goes away. FAILED_PRECONDITION if already watching. Once `cb` returned, the map's
  // epoch is the one heartbeats report as applied (HeartbeatRequest.applied_epoch).
  absl::Status Watch(MapCallback cb);

  const std::string& addr() const { return addr_; }
  // Number of boots done by the heartbeat thread (observable for tests and logs).
  uint64_t heartbeat_boots() const { return heartbeat_boots_.load(); }

 private:
  MonClient(std::string addr, absl::Duration timeout, ControlAuth auth,
            std::shared_ptr<grpc::Channel> channel);

  // Converts an RPC failure to a Status naming the monitor and the operation.
  absl::Status FromGrpc(const grpc::Status& s, const char* what) const;
  // Sets the deadline and registers `ctx` for cancellation by the destructor. False
  // when the client is shutting down.
  bool Register(grpc::ClientContext* ctx, absl::Duration deadline);
  void Unregister(grpc::ClientContext* ctx);
  absl::StatusOr<uint64_t> Mark(uint32_t id, bool out);
  void HeartbeatLoop(v1::BootOsdRequest boot, BootCallback on_boot, FencedCallback on_fenced);
  void WatchLoop(MapCallback cb);
  // Sleeps up to `d`; returns false if the client is stopping.
  bool SleepUnlessStopping(absl::Duration d);

  const std::string addr_;
  const absl::Duration timeout_;
  const ControlAuth auth_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Monitor::Stub> stub_;
  std::atomic<uint32_t> heartbeat_ms_{1000};
  std::atomic<uint64_t> heartbeat_boots_{0};
  std::atomic<uint64_t> applied_epoch_{0};

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::set<grpc::ClientContext*> active_ ABSL_GUARDED_BY(mu_);
  std::thread heartbeat_thread_ ABSL_GUARDED_BY(mu_);
  std::thread watch_thread_ ABSL_GUARDED_BY(mu_);
  std::function<void(v1::PgStats*)> heartbeat_stats_ ABSL_GUARDED_BY(mu_);
};

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MON_CLIENT_H_

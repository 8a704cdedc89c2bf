// MonitorService: the monitor's gRPC service (proto/mon.proto, msgr.mon.v1.Monitor).
//
// It keeps the versioned cluster map: OSDs boot (register or re-register under the same
// id, possibly with a new address), heartbeat, and are marked down after `grace` without
// a heartbeat; optionally marked out after `down_out_interval` down. Operators mark OSDs
// out/in and create pools. Every change bumps the epoch, is persisted atomically to the data dir before it
// becomes visible, and wakes every WatchMap stream. After a restart the map is reloaded
// as it was (same epoch): an OSD that was up stays up if it heartbeats within `grace` of the
// restart (no re-boot, no re-peering), and is marked down otherwise.
//
// WatchMap sends the current map (if newer than after_epoch), then the latest map each
// time the epoch moves. Maps are full snapshots: a watcher that is slow may skip epochs
// but always ends on the newest one.
//
// With options.enforce_roles, each call is first checked against the caller's role
// (control_roles.h): a refusal is answered PERMISSION_DENIED, counted (auth_refused and
// rpc_errors), and logged the first time that entity is refused that action (a
// misconfigured OSD retrying every heartbeat must not flood the log).
//
// Thread-safety: all methods are thread-safe; gRPC calls them from its thread pool. A
// background thread checks heartbeats. Stop() must be called (the destructor does it)
// before the gRPC server is shut down so that WatchMap streams return promptly.
#ifndef MSGR_OSD_SIM_MON_MONITOR_H_
#define MSGR_OSD_SIM_MON_MONITOR_H_

#include <cstdint>
#include <map>
#include <mutex>
#include <memory>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "osd_sim/mon/control_roles.h"
#include "osd_sim/mon/mon_counters.h"
#include "proto/mon.grpc.pb.h"

namespace msgr::mon {

struct MonitorOptions {
  std::string data_dir;                                   // required
  absl::Duration grace = absl::Seconds(5);                // heartbeat silence -> down
  absl::Duration heartbeat_interval = absl::Seconds(1);   // told to OSDs at boot
  absl::Duration down_out_interval = absl::ZeroDuration();  // 0: never auto-out
  uint32_t pg_num = 128;                                  // for a new cluster only
  // The default pool's copies per object and copies a write needs (0: size - size / 2),
  // for a new cluster only.
  uint32_t pool_size = 1;
  uint32_t pool_min_size = 0;
  // Check every call's entity (the CN of its verified client certificate) against the
  // roles of control_roles.h; refusals are PERMISSION_DENIED, counted in auth_refused.
  // MonServer sets it when it serves over mutual TLS; off, every caller may do anything.
  bool enforce_roles = false;
};

class MonitorService final : public v1::Monitor::Service {
 public:
  // Loads (or creates) the map in options.data_dir and starts the heartbeat checker.
  // INVALID_ARGUMENT on bad options; file errors as returned by the map store.
  static absl::StatusOr<std::unique_ptr<MonitorService>> Create(MonitorOptions options);

  ~MonitorService() override;
  MonitorService(const MonitorService&) = delete;
  MonitorService& operator=(const MonitorService&) = delete;

  // Wakes and ends every WatchMap stream (UNAVAILABLE), stops the heartbeat checker and
  // makes later WatchMap calls fail. Idempotent.
  void Stop();

  // A snapshot of the current map.
  v1::ClusterMap CurrentMap() const;
  const MonitorOptions& options() const { return options_; }
  // The monitor's counters now: the map's epoch and OSD counts, the RPCs served.
  MonCounters Counters() const ABSL_LOCKS_EXCLUDED(mu_);

  grpc::Status BootOsd(grpc::ServerContext* ctx, const v1::BootOsdRequest* req,
                       v1::BootOsdReply* reply) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx, const v1::HeartbeatRequest* req,
                         v1::HeartbeatReply* reply) override;
  grpc::Status GetMap(grpc::ServerContext* ctx, const v1::GetMapRequest* req,
                      v1::ClusterMap* reply) override;
  grpc::Status WatchMap(grpc::ServerContext* ctx, const v1::WatchMapRequest* req,
                        grpc::ServerWriter<v1::ClusterMap>* writer) override;
  grpc::Status MarkOut(grpc::ServerContext* ctx, const v1::MarkRequest* req,
                       v1::MarkReply* reply) override;
  grpc::Status MarkIn(grpc::ServerContext* ctx, const v1::MarkRequest* req,
                      v1::MarkReply* reply) override;
  // A new pool (client.admin): ALREADY_EXISTS for a taken name; INVALID_ARGUMENT for a
  // bad name, a size above 16, min_size > size, pg_num above 65536. Size 0 means 1,
  // min_size 0 size - size / 2, pg_num 0 the map's. Pool ids start at 1 (0 is "default").
  grpc::Status CreatePool(grpc::ServerContext* ctx, const v1::CreatePoolRequest* req,
                          v1::CreatePoolReply* reply) override;
  // Adds (or removes) a blocklist entry (client.admin); see proto/mon.proto. An entry
  // that is already there gets the new expiry (a new epoch all the same).
  grpc::Status Blocklist(grpc::ServerContext* ctx, const v1::BlocklistRequest* req,
                         v1::BlocklistReply* reply) override;

 private:
  // Liveness bookkeeping that is not part of the map (not persisted).
  struct OsdRuntime {
    absl::Time last_heartbeat = absl::InfinitePast();
    absl::Time down_since = absl::InfinitePast();
    v1::PgStats pg_stats;  // from the last heartbeat
    uint64_t applied_epoch = 0;  // likewise
  };

  MonitorService(MonitorOptions options, v1::ClusterMap map);

  // Persists `next` with epoch = current + 1, then publishes it and wakes watchers.
  // On a persistence error nothing changes and the error is returned.
  absl::Status CommitLocked(v1::ClusterMap next) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  grpc::Status SetIn(uint32_t id, bool in);
  grpc::Status DoCreatePool(const v1::CreatePoolRequest& req, v1::CreatePoolReply* reply)
      ABSL_LOCKS_EXCLUDED(mu_);
  // OK if roles are off or the caller may do `op` (on `osd_id`); else the refusal, counted
  // and logged (once per entity and refusal).
  grpc::Status Authorize(const grpc::ServerContext* ctx, ControlOp op, uint32_t osd_id)
      ABSL_LOCKS_EXCLUDED(refused_mu_);
  void TickLoop();
  void CheckHeartbeatsLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Drops blocklist entries past their expiry from `next`; true if it dropped any.
  static bool ExpireBlocklist(v1::ClusterMap* next, absl::Time now);

  const MonitorOptions options_;
  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // signalled on every new epoch and on Stop()
  v1::ClusterMap map_ ABSL_GUARDED_BY(mu_);
  std::map<uint32_t, OsdRuntime> runtime_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::once_flag stop_once_;
  std::thread ticker_;  // started in Create(), joined in Stop()
  mutable LiveMonCounters counters_;
  absl::Mutex refused_mu_;
  // Refusal messages already logged; bounded (kMaxRefusalsLogged) since only holders of a
  // certificate of this cluster can add to it, but a bug could still cycle through ids.
  std::set<std::string> refused_logged_ ABSL_GUARDED_BY(refused_mu_);
};

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_MONITOR_H_

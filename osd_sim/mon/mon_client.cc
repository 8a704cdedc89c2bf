#include "osd_sim/mon/mon_client.h"

#include <algorithm>
#include <chrono>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "spdlog/spdlog.h"

namespace msgr::mon {
namespace {

constexpr int kReconnectBackoffMinMs = 100;
constexpr int kReconnectBackoffMaxMs = 1000;
// gRPC reads GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as the minimum time a connection attempt may
// take (its deadline is the later of the next backoff and now + this). At 100 ms, a TLS
// handshake racing the 1 s heartbeat RPCs after a monitor restart was cut off every time
// ("Handshake timed out", "tcp handshaker shutdown") and the OSDs never re-booted; plain
// TCP connects fit. The retry spacing stays 100 ms .. 1 s (initial / max backoff).
constexpr int kMinConnectTimeoutMs = 5000;
constexpr int kKeepaliveMs = 10000;
constexpr int kKeepaliveTimeoutMs = 5000;
constexpr absl::Duration kWatchBackoffMin = absl::Milliseconds(100);
constexpr absl::Duration kWatchBackoffMax = absl::Seconds(2);
constexpr absl::Duration kMinHeartbeatDeadline = absl::Milliseconds(200);

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& addr, const ControlAuth& auth) {
  grpc::ChannelArguments args;
  auth.AddChannelArgs(&args);
  // Reconnect quickly after a mon restart (gRPC's default backoff grows to 2 minutes).
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, kReconnectBackoffMinMs);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, kMinConnectTimeoutMs);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, kReconnectBackoffMaxMs);
  // Notice a vanished mon under a quiet watch stream.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, kKeepaliveTimeoutMs);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  return grpc::CreateCustomChannel(addr, auth.ChannelCredentials(), args);
}

// gRPC reports a failed TLS handshake only as text in an UNAVAILABLE status, and differently
// on each side (gRPC 1.51 with OpenSSL 3, as seen in tests/osd_sim/mon/mon_auth_test.cc):
//   TLS client, monitor rejects our certificate:  "... Socket closed" (TLS 1.3 sends the
//                                                 server's verdict after the client's Finished)
//   TLS client, monitor's cert not from our CA:   "Ssl handshake failed: ... certificate verify failed"
//   TLS client, monitor without TLS:              "Ssl handshake failed: ... wrong version number"
//   plain client, monitor with TLS:               "... Socket closed"
// A refused TCP connection (no monitor) says "Connection refused" and is not matched here.
// "Socket closed" is read as a handshake refusal only `at_connect` (the first connection):
// later it is as likely a monitor going away mid-call. Returns OK if `why` is none of these.
absl::Status TlsFailure(const std::string& addr, const ControlAuth& auth, const std::string& why,
                        bool at_connect) {
  const bool handshake = absl::StrContains(why, "Ssl handshake failed") ||
                         absl::StrContains(why, "Handshake failed");
  const bool closed = at_connect && absl::StrContains(why, "Socket closed");
  if (auth.secure() && absl::StrContains(why, "wrong version number")) {
    return absl::UnavailableError(absl::StrCat(
        "monitor at ", addr, " refused the TLS handshake: it does not speak TLS (started "
        "with --auth none?), and this client requires it (", why, ")"));
  }
  if (auth.secure() && (handshake || closed)) {
    return absl::UnavailableError(absl::StrCat(
        "monitor at ", addr, " refused the TLS handshake: is the certificate from this "
        "cluster's CA (", auth.ca_path(), ")? This client is ", auth.entity(),
        " and verifies the monitor as ", kMonTlsName, " (", why, ")"));
  }
  if (!auth.secure() && (handshake || closed)) {
    return absl::UnavailableError(absl::StrCat(
        "monitor at ", addr, " closed the connection before answering: it probably "
        "requires mutual TLS; connect with --auth secret --cluster-dir DIR (this client "
        "has --auth none and no certificate) (", why, ")"));
  }
  return absl::OkStatus();
}

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace

absl::StatusOr<std::unique_ptr<MonClient>> MonClient::Create(const std::string& addr,
                                                             absl::Duration timeout) {
  return Create(addr, timeout, ControlAuth::Insecure());
}

absl::StatusOr<std::unique_ptr<MonClient>> MonClient::Create(const std::string& addr,
                                                             absl::Duration timeout,
                                                             const ControlAuth& auth) {
  if (addr.empty()) return absl::InvalidArgumentError("empty monitor address");
  if (timeout <= absl::ZeroDuration()) return absl::InvalidArgumentError("timeout must be > 0");
  std::shared_ptr<grpc::Channel> channel = MakeChannel(addr, auth);
  if (!channel->WaitForConnected(Deadline(timeout))) {
    // One fail-fast call to learn why (connection refused, bad name, a TLS refusal...). It
    // fails at once while the channel is in TRANSIENT_FAILURE, but waits out a connection
    // attempt in progress: a short deadline then reports only "Deadline Exceeded" (seen
    // in the Soft-RoCE VM, whose handshakes are slow), so it gets up to 2 s for that.
    auto stub = v1::Monitor::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(Deadline(std::min(timeout, absl::Seconds(2))));
    v1::ClusterMap map;
    grpc::Status s = stub->GetMap(&ctx, v1::GetMapRequest(), &map);
    std::string why = s.ok() ? "connection not ready" : s.error_message();
    if (absl::Status tls = TlsFailure(addr, auth, why, true); !tls.ok()) return tls;
    return absl::UnavailableError(absl::StrCat("monitor at ", addr, " unreachable after ",
                                               absl::FormatDuration(timeout), ": ", why));
  }
  return std::unique_ptr<MonClient>(new MonClient(addr, timeout, auth, std::move(channel)));
}

MonClient::MonClient(std::string addr, absl::Duration timeout, ControlAuth auth,
                     std::shared_ptr<grpc::Channel> channel)
    : addr_(std::move(addr)), timeout_(timeout), auth_(std::move(auth)),
      channel_(std::move(channel)), stub_(v1::Monitor::NewStub(channel_)) {}

MonClient::~MonClient() {
  std::thread hb, watch;
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
    for (grpc::ClientContext* ctx : active_) ctx->TryCancel();
    hb = std::move(heartbeat_thread_);
    watch = std::move(watch_thread_);
  }
  if (hb.joinable()) hb.join();
  if (watch.joinable()) watch.join();
}

absl::Status MonClient::FromGrpc(const grpc::Status& s, const char* what) const {
  if (s.ok()) return absl::OkStatus();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
      s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    if (absl::Status tls = TlsFailure(addr_, auth_, s.error_message(), false);
        !tls.ok()) return tls;
    return absl::UnavailableError(absl::StrCat("monitor at ", addr_, " unreachable after ",
                                               absl::FormatDuration(timeout_), ": ", what,
                                               ": ", s.error_message()));
  }
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      absl::StrCat("mon ", what, ": ", s.error_message()));
}

bool MonClient::Register(grpc::ClientContext* ctx, absl::Duration deadline) {
  if (deadline != absl::InfiniteDuration()) ctx->set_deadline(Deadline(deadline));
  absl::MutexLock l(&mu_);
  if (stopping_) return false;
  active_.insert(ctx);
  return true;
}

void MonClient::Unregister(grpc::ClientContext* ctx) {
  absl::MutexLock l(&mu_);
  active_.erase(ctx);
}

absl::StatusOr<v1::ClusterMap> MonClient::GetMap() {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);  // ride out a mon restart within the timeout
  if (!Register(&ctx, timeout_)) return absl::CancelledError("mon client shutting down");
  v1::ClusterMap map;
  grpc::Status s = stub_->GetMap(&ctx, v1::GetMapRequest(), &map);
  Unregister(&ctx);
  if (!s.ok()) return FromGrpc(s, "GetMap");
  return map;
}

absl::StatusOr<v1::BootOsdReply> MonClient::BootOsd(const v1::BootOsdRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  if (!Register(&ctx, timeout_)) return absl::CancelledError("mon client shutting down");
  v1::BootOsdReply reply;
  grpc::Status s = stub_->BootOsd(&ctx, req, &reply);
  Unregister(&ctx);
  if (!s.ok()) return FromGrpc(s, "BootOsd");
  if (reply.heartbeat_interval_ms() > 0) heartbeat_ms_ = reply.heartbeat_interval_ms();
  return reply;
}

absl::StatusOr<uint64_t> MonClient::Mark(uint32_t id, bool out) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  if (!Register(&ctx, timeout_)) return absl::CancelledError("mon client shutting down");
  v1::MarkRequest req;
  req.set_id(id);
  v1::MarkReply reply;
  grpc::Status s = out ? stub_->MarkOut(&ctx, req, &reply) : stub_->MarkIn(&ctx, req, &reply);
  Unregister(&ctx);
  if (!s.ok()) return FromGrpc(s, out ? "MarkOut" : "MarkIn");
  return reply.epoch();
}

absl::StatusOr<v1::BlocklistReply> MonClient::Blocklist(const v1::BlocklistRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  if (!Register(&ctx, timeout_)) return absl::CancelledError("mon client shutting down");
  v1::BlocklistReply reply;
  grpc::Status s = stub_->Blocklist(&ctx, req, &reply);
  Unregister(&ctx);
  if (!s.ok()) return FromGrpc(s, "Blocklist");
  return reply;
}

absl::StatusOr<v1::CreatePoolReply> MonClient::CreatePool(const v1::CreatePoolRequest& req) {
  grpc::ClientContext ctx;
  ctx.set_wait_for_ready(true);
  if (!Register(&ctx, timeout_)) return absl::CancelledError("mon client shutting down");
  v1::CreatePoolReply reply;
  grpc::Status s = stub_->CreatePool(&ctx, req, &reply);
  Unregister(&ctx);
  if (!s.ok()) return FromGrpc(s, "CreatePool");
  return reply;
}

absl::StatusOr<uint64_t> MonClient::MarkOut(uint32_t id) { return Mark(id, true); }
absl::StatusOr<uint64_t> MonClient::MarkIn(uint32_t id) { return Mark(id, false); }

bool MonClient::SleepUnlessStopping(absl::Duration d) {
  mu_.LockWhenWithTimeout(absl::Condition(&stopping_), d);
  bool stopping = stopping_;
  mu_.Unlock();
  return !stopping;
}

absl::Status MonClient::StartHeartbeats(const v1::BootOsdRequest& boot, BootCallback on_boot,
                                        FencedCallback on_fenced) {
  absl::MutexLock l(&mu_);
  if (stopping_) return absl::CancelledError("mon client shutting down");
  if (heartbeat_thread_.joinable()) {
    return absl::FailedPreconditionError("heartbeats already started");
  }
  heartbeat_thread_ =
      std::thread([this, boot, cb = std::move(on_boot), fenced = std::move(on_fenced)] {
        HeartbeatLoop(boot, cb, fenced);
      });
  return absl::OkStatus();
}

void MonClient::HeartbeatLoop(v1::BootOsdRequest boot, BootCallback on_boot,
                              FencedCallback on_fenced) {
  // The monitor's word that this process no longer is osd.<id>: stop heartbeating (the
  // heartbeats of an old process must not keep the id up) and tell the owner (who logs it).
  auto fenced = [&](const absl::Status& why) {
    if (on_fenced) {
      on_fenced(why);
    } else {
      spdlog::error("osd.{}: {}", boot.id(), std::string(why.message()));
    }
  };
  bool reachable = true;
  v1::HeartbeatRequest req;
  req.set_id(boot.id());
  req.set_instance(boot.instance());
  do {
    std::function<void(v1::PgStats*)> stats;
    {
      absl::MutexLock l(&mu_);
      stats = heartbeat_stats_;
    }
    // The epoch first: stats taken after it are at least that new, so a monitor that sees
    // epoch E applied never pairs it with the PG states of the map before E (what
    // `tools/cluster.sh start` waits on: PGs active on every OSD's latest map).
    req.set_applied_epoch(applied_epoch_.load());
    if (stats) stats(req.mutable_pg_stats());
    const absl::Duration interval = absl::Milliseconds(heartbeat_ms_.load());
    grpc::ClientContext ctx;
    // Wait (up to the deadline) for a connection rather than failing fast: the blocked
    // call is what polls the channel's sockets. Failing fast, a reconnecting TLS channel
    // advanced only on gRPC's backup poller (seconds per handshake step) and never finished
    // a handshake after a monitor restart, so the OSD never re-booted.
    ctx.set_wait_for_ready(true);
    if (!Register(&ctx, std::max(interval, kMinHeartbeatDeadline))) break;
    v1::HeartbeatReply reply;
    grpc::Status s = stub_->Heartbeat(&ctx, req, &reply);
    Unregister(&ctx);
    if (s.error_code() == grpc::StatusCode::FAILED_PRECONDITION) {
      fenced(FromGrpc(s, "Heartbeat"));
      return;
    }
    if (!s.ok()) {
      if (reachable) spdlog::warn("osd.{} heartbeat: {}", boot.id(), FromGrpc(s, "Heartbeat").ToString());
      reachable = false;
      continue;
    }
    reachable = true;
    if (reply.known()) continue;
    absl::StatusOr<v1::BootOsdReply> booted = BootOsd(boot);
    if (absl::IsFailedPrecondition(booted.status())) {
      fenced(booted.status());
      return;
    }
    if (!booted.ok()) {
      spdlog::warn("osd.{} boot: {}", boot.id(), booted.status().ToString());
      continue;
    }
    ++heartbeat_boots_;
    spdlog::info("osd.{} booted at epoch {}", boot.id(), booted->epoch());
    if (on_boot) on_boot(*booted);
  } while (SleepUnlessStopping(absl::Milliseconds(heartbeat_ms_.load())));
}

absl::Status MonClient::Watch(MapCallback cb) {
  if (!cb) return absl::InvalidArgumentError("Watch needs a callback");
  absl::MutexLock l(&mu_);
  if (stopping_) return absl::CancelledError("mon client shutting down");
  if (watch_thread_.joinable()) return absl::FailedPreconditionError("already watching");
  watch_thread_ = std::thread([this, cb = std::move(cb)] { WatchLoop(cb); });
  return absl::OkStatus();
}

void MonClient::WatchLoop(MapCallback cb) {
  uint64_t last_epoch = 0;
  std::string last_fsid;
  absl::Duration backoff = kWatchBackoffMin;
  bool connected = true;
  do {
    grpc::ClientContext ctx;
    ctx.set_wait_for_ready(true);  // as the heartbeats: the waiting call drives reconnects
    if (!Register(&ctx, absl::InfiniteDuration())) break;
    // Always ask from epoch 0: a monitor with a new data dir may be behind us.
    std::unique_ptr<grpc::ClientReader<v1::ClusterMap>> reader =
        stub_->WatchMap(&ctx, v1::WatchMapRequest());
    v1::ClusterMap map;
    while (reader->Read(&map)) {
      if (!connected) spdlog::info("watching the monitor at {} again", addr_);
      connected = true;
      backoff = kWatchBackoffMin;
      if (map.fsid() == last_fsid && map.epoch() <= last_epoch) continue;
      last_fsid = map.fsid();
      last_epoch = map.epoch();
      cb(map);
      applied_epoch_.store(map.epoch());  // acted on: the next heartbeat says so
    }
    grpc::Status s = reader->Finish();
    Unregister(&ctx);
    if (connected && s.error_code() != grpc::StatusCode::CANCELLED) {
      spdlog::warn("map watch on {} ended: {}; reconnecting", addr_, s.error_message());
    }
    connected = false;
    if (!SleepUnlessStopping(backoff)) break;
    backoff = std::min(backoff * 2, kWatchBackoffMax);
  } while (true);
}

}  // namespace msgr::mon

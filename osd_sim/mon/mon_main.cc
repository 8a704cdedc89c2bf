// `mon`: the monitor daemon. Serves msgr.mon.v1.Monitor over gRPC until SIGTERM/SIGINT.
//
//   mon --data-dir DIR [--addr 127.0.0.1:0] [--addr-file FILE] [--grace-ms 5000]
//       [--heartbeat-ms 1000] [--pg-num 128] [--pool-size 1] [--down-out-ms 0]
//       [--metrics-addr HOST:PORT [--metrics-addr-file FILE]]
//       [--auth none|secret --cluster-dir DIR [--entity mon]] [--conf FILE]
#include <signal.h>

#include <cstdint>
#include <cstdio>
#include <string>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/str_cat.h"
#include "msg/base/perf_counters.h"
#include "osd_sim/metrics/daemon_metrics.h"
#include "osd_sim/mon/cli_flags.h"
#include "osd_sim/mon/cluster_conf.h"
#include "osd_sim/mon/control_auth.h"
#include "msg/base/file_util.h"
#include "osd_sim/mon/mon_server.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

// Flags with dashes on the command line (osd_sim/mon/cli_flags.h); every one but --conf may
// also come from the config file (cluster_conf.h: ConfKeysOf("mon")). kUsage is the help.
ABSL_FLAG(std::string, data_dir, "", "where the cluster map is kept (required)");
ABSL_FLAG(std::string, addr, "", "listen HOST:PORT (when given; MonServerOptions' default)");
ABSL_FLAG(std::string, addr_file, "", "where to write the bound HOST:PORT");
ABSL_FLAG(uint64_t, grace_ms, 5000, "heartbeat silence before an OSD is marked down");
ABSL_FLAG(uint64_t, heartbeat_ms, 1000, "heartbeat interval told to OSDs");
ABSL_FLAG(uint64_t, pg_num, 128, "placement groups of a new cluster");
ABSL_FLAG(uint64_t, pool_size, 1, "copies of each object in a new cluster's pool");
ABSL_FLAG(uint64_t, pool_min_size, 0, "copies a write needs (0: N - N/2)");
ABSL_FLAG(uint64_t, down_out_ms, 0, "down this long -> marked out (0: never)");
ABSL_FLAG(std::string, metrics_addr, "", "Prometheus /metrics HOST:PORT");
ABSL_FLAG(std::string, metrics_addr_file, "", "where to write the bound metrics address");
ABSL_FLAG(std::string, auth, "none", "none|secret");
ABSL_FLAG(std::string, cluster_dir, "", "the cluster PKI's directory");
ABSL_FLAG(std::string, entity, msgr::mon::kMonEntity, "the certificate the monitor serves with");
ABSL_FLAG(std::string, conf, "", "config file");

namespace {

constexpr char kUsage[] =
    "usage: mon --data-dir DIR [--addr HOST:PORT] [--addr-file FILE]\n"
    "           [--grace-ms N] [--heartbeat-ms N] [--pg-num N] [--pool-size N]\n"
    "           [--pool-min-size N] [--down-out-ms N]\n"
    "           [--metrics-addr HOST:PORT [--metrics-addr-file FILE]]\n"
    "           [--auth none|secret [--cluster-dir DIR] [--entity NAME]] [--conf FILE]\n"
    "  --data-dir DIR      where the cluster map is kept (required; created if missing)\n"
    "  --addr HOST:PORT    listen address (default 127.0.0.1:0, port 0 = any free port)\n"
    "  --addr-file FILE    once serving, write the bound HOST:PORT there (atomically)\n"
    "  --grace-ms N        heartbeat silence before an OSD is marked down (default 5000)\n"
    "  --heartbeat-ms N    heartbeat interval told to OSDs (default 1000)\n"
    "  --pg-num N          placement groups of a new cluster (default 128)\n"
    "  --pool-size N       copies of each object in a new cluster's pool (default 1)\n"
    "  --pool-min-size N   copies a write needs to be acknowledged (default N - N/2)\n"
    "  --down-out-ms N     down this long -> marked out; 0 = never (default 0)\n"
    "  --metrics-addr HOST:PORT  serve Prometheus /metrics there (off by default; PORT or\n"
    "                      :PORT alone = on 127.0.0.1; port 0 = a free port)\n"
    "  --metrics-addr-file FILE  once serving, write the bound HOST:PORT there\n"
    "  --auth none|secret  none (default): anyone may call anything; secret: mutual TLS with\n"
    "                      the cluster PKI, callers limited by their role (osd_sim/mon/README.md)\n"
    "  --cluster-dir DIR   with --auth secret: DIR/pki/ca.crt, ENTITY.crt, ENTITY.key\n"
    "                      (made by tools/lib/pki.sh)\n"
    "  --entity NAME       the certificate the monitor serves with (default mon)\n"
    "  --conf FILE         settings from FILE's [global] and [mon] (default DIR/msgr.conf\n"
    "                      of --cluster-dir DIR, if there); flags override it\n";

int Fail(const absl::Status& s) {
  spdlog::critical("{}", s.ToString());
  std::fputs(kUsage, stderr);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on: a graph update per lock
  // acquisition on every hot path. Tests keep it; the daemons and the bench do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  spdlog::set_default_logger(spdlog::stderr_color_mt("mon"));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ mon: %v");

  auto flags = msgr::mon::ParseFlags(argc, argv);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string conf_path =
      msgr::mon::ConfPathFor(absl::GetFlag(FLAGS_conf), absl::GetFlag(FLAGS_cluster_dir));
  {
    absl::Status applied =
        msgr::mon::ApplyConfSettings(&*flags, "mon", "", msgr::mon::ConfKeysOf("mon"));
    if (!applied.ok()) {
      spdlog::critical("{}", std::string(applied.message()));
      return 2;
    }
  }
  if (!conf_path.empty()) spdlog::info("settings from {} (flags override it)", conf_path);
  if (!flags->positional().empty()) {
    return Fail(absl::InvalidArgumentError("unexpected argument " + flags->positional()[0]));
  }
  msgr::mon::MonServerOptions opts;
  opts.monitor.data_dir = absl::GetFlag(FLAGS_data_dir);
  if (opts.monitor.data_dir.empty()) return Fail(absl::InvalidArgumentError("--data-dir is required"));
  if (flags->Has("addr")) opts.addr = absl::GetFlag(FLAGS_addr);
  const uint64_t grace = absl::GetFlag(FLAGS_grace_ms);
  const uint64_t hb = absl::GetFlag(FLAGS_heartbeat_ms);
  const uint64_t pg = absl::GetFlag(FLAGS_pg_num);
  const uint64_t down_out = absl::GetFlag(FLAGS_down_out_ms);
  const uint64_t pool_size = absl::GetFlag(FLAGS_pool_size);
  const uint64_t pool_min = absl::GetFlag(FLAGS_pool_min_size);
  opts.monitor.grace = absl::Milliseconds(grace);
  opts.monitor.heartbeat_interval = absl::Milliseconds(hb);
  opts.monitor.down_out_interval = absl::Milliseconds(down_out);
  if (pg > UINT32_MAX) return Fail(absl::InvalidArgumentError("--pg-num too large"));
  opts.monitor.pg_num = static_cast<uint32_t>(pg);
  if (pool_size > 16 || pool_min > 16) {
    return Fail(absl::InvalidArgumentError("--pool-size and --pool-min-size are at most 16"));
  }
  opts.monitor.pool_size = static_cast<uint32_t>(pool_size);
  opts.monitor.pool_min_size = static_cast<uint32_t>(pool_min);
  if (flags->Has("metrics-addr-file") && !flags->Has("metrics-addr")) {
    return Fail(absl::InvalidArgumentError("--metrics-addr-file needs --metrics-addr HOST:PORT"));
  }
  if (flags->Has("metrics-addr")) {
    auto addr = msgr::metrics::NormalizeMetricsAddr(absl::GetFlag(FLAGS_metrics_addr));
    if (!addr.ok()) return Fail(addr.status());
  }
  // A missing or wrong certificate is a setup error: say so before binding anything.
  auto auth = msgr::mon::ControlAuth::FromFlags(absl::GetFlag(FLAGS_auth),
                                                absl::GetFlag(FLAGS_cluster_dir),
                                                absl::GetFlag(FLAGS_entity));
  if (!auth.ok()) return Fail(auth.status());
  opts.auth = *auth;

  // Block the stop signals in every thread (gRPC's included); main waits for them below.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  auto server = msgr::mon::MonServer::Create(opts);
  if (!server.ok()) {
    spdlog::critical("cannot start: {}", server.status().ToString());
    return 1;
  }
  spdlog::info("serving on {} (data dir {}, grace {} ms, heartbeat {} ms, down-out {} ms, "
               "auth {})", (*server)->addr(), opts.monitor.data_dir, grace, hb, down_out,
               opts.auth.Describe());
  if (flags->Has("addr-file")) {
    absl::Status s = msgr::WriteFileAtomic(absl::GetFlag(FLAGS_addr_file),
                                                absl::StrCat((*server)->addr(), "\n"));
    if (!s.ok()) {
      spdlog::critical("cannot write the addr file: {}", s.ToString());
      return 1;
    }
  }
  // The monitor's counters, for /metrics (declared before the server that reads them).
  msgr::CounterRegistry registry;
  msgr::mon::MonitorService* service = &(*server)->service();
  registry.Add({"mon", -1, [service] { return std::vector{service->Counters().Group("mon")}; }});
  std::unique_ptr<msgr::metrics::MetricsServer> metrics;
  if (flags->Has("metrics-addr")) {
    auto m = msgr::metrics::StartDaemonMetrics(absl::GetFlag(FLAGS_metrics_addr),
                                               absl::GetFlag(FLAGS_metrics_addr_file),
                                               &registry, {});
    if (!m.ok()) {
      spdlog::critical("{}", m.status().ToString());
      return 1;
    }
    metrics = std::move(*m);
    spdlog::info("metrics on http://{}/metrics", metrics->addr());
  }
  int sig = 0;
  sigwait(&stop_signals, &sig);
  spdlog::info("signal {}: shutting down", sig);
  metrics.reset();
  (*server)->Shutdown();
  spdlog::info("stopped at epoch {}", (*server)->service().CurrentMap().epoch());
  return 0;
}

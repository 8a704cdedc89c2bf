// osd: the simulated OSD daemon (see osd_sim/osd.h).
//
//   osd --id N --mon HOST:PORT --data-dir DIR [--run-dir DIR] [--ms-type tcp|rdma|both]
//       [--durability durable|buffered|memory] [--pollers N] [--poller-cpus 0,1]
//       [--poller-spin-us US] [--poller-wakeup-us 1000] [--poller-nap-us 100]
//       [--poller-nap-rings 8] [--ring-bytes 33554432] [--capacity BYTES]
//       [--cluster-dir DIR | --keyring FILE | --auth none] [--rdma-device soft|IBDEV] [--weight W]
//       [--rdma-max-registered-mb 4096] [--metrics-addr HOST:PORT [--metrics-addr-file F]]
//       [--public-addr HOST[:PORT] | --public-network CIDR] [--rdma-port PORT]
//       [--cluster-addr HOST[:PORT] | --cluster-network CIDR] [--host NAME]
//       [--log-level info] [--conf FILE]
//
// Exit status: 0 stopped by SIGTERM/SIGINT, 1 failed to start, 2 bad flags, 3 fenced (the
// monitor says another process booted as this id, or this instance is blocklisted).
#include <signal.h>
#include <sys/resource.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <set>
#include <string>

#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "msg/entity_credentials.h"
#include "absl/strings/str_split.h"
#include "msg/base/net_addr.h"
#include "osd_sim/metrics/daemon_metrics.h"
#include "osd_sim/mon/cli_flags.h"
#include "osd_sim/mon/cluster_conf.h"
#include "osd_sim/mon/control_auth.h"
#include "osd_sim/osd.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

namespace {

constexpr const char* kUsage =
    "usage: osd --id N --mon HOST:PORT --data-dir DIR [--run-dir DIR]\n"
    "           [--ms-type tcp|rdma|both] [--durability durable|buffered|memory]\n"
    "           [--pollers N] [--poller-cpus LIST] [--poller-spin-us US]\n"
    "           [--poller-wakeup-us US] [--poller-nap-us US] [--poller-nap-rings N]\n"
    "           [--ring-bytes B]\n"
    "           [--capacity BYTES] [--cluster-dir DIR | --keyring FILE | --auth none]\n"
    "           [--rdma-device soft|IBDEV]\n"
    "           [--rdma-max-registered-mb MB] [--rdma-ring-min-kb KB] [--weight W]\n"
    "           [--metrics-addr HOST:PORT [--metrics-addr-file FILE]]\n"
    "           [--op-complaint-time S] [--pg-log-entries N]\n"
    "           [--public-addr HOST[:PORT] | --public-network CIDR] [--rdma-port PORT]\n"
    "           [--cluster-addr HOST[:PORT] | --cluster-network CIDR] [--host NAME]\n"
    "           [--ms-mode crc|secure] [--ms-cluster-type tcp|rdma]\n"
    "           [--log-level trace|debug|info|warn|error]\n"
    "           [--conf FILE]\n"
    "  --conf FILE               settings from FILE's [global], [osd] and [osd.N] (default\n"
    "                            DIR/msgr.conf of --cluster-dir DIR, if there); flags win\n"
    "  --ms-mode crc|secure      tcp frames crc32c-checked (default) or encrypted and\n"
    "                            authenticated with AES-GCM (msgr2's secure mode; tcp only)\n"
    "  --cluster-dir DIR         auth secret: the messenger key DIR/keyring and mutual TLS to\n"
    "                            the monitor as osd.N (DIR/pki, made by tools/cluster.sh)\n"
    "  --keyring FILE            the messenger key only (the monitor without TLS)\n"
    "  --poller-spin-us US       spin a fixed US after each record on an RDMA ring before\n"
    "                            sleeping (default: hybrid polling, see --poller-wakeup-us)\n"
    "  --poller-wakeup-us US     hybrid polling: spin up to US after a record while most gaps\n"
    "                            between records are shorter, else sleep at once (default 1000)\n"
    "  --poller-nap-us US        with many RDMA clients writing (see --poller-nap-rings), nap\n"
    "                            US between looks instead of spinning (default 100; 0: never)\n"
    "  --poller-nap-rings N      how many RDMA rings with records in the last 2 ms make a\n"
    "                            poller nap rather than spin (default 8; 0: never nap)\n"
    "  --op-complaint-time S     a write in flight longer than S seconds is a slow op\n"
    "                            (slow_ops gauge, dump_ops_in_flight; default 30)\n"
    "  --pg-log-entries N        PG log entries kept for the PGs this OSD leads: a member\n"
    "                            that comes back is sent only what it missed while they\n"
    "                            reach back far enough (default 262144; 0: no log, every\n"
    "                            returning member is backfilled by comparing copies)\n"
    "  --public-addr HOST[:PORT] where clients reach this OSD: HOST a numeric address of\n"
    "                            this host (IPv6 in brackets), PORT the tcp listener's\n"
    "                            (default 127.0.0.1, free ports)\n"
    "  --public-network CIDR     the same, picked from this host's addresses in CIDR\n"
    "  --rdma-port PORT          the rdma side channel's port on the public host (default free)\n"
    "  --cluster-addr HOST[:PORT], --cluster-network CIDR  where other OSDs reach it\n"
    "                            (advertised in the map; default the public address)\n"
    "  --ms-cluster-type tcp|rdma  the backend of OSD-to-OSD (replication) sessions\n"
    "                            (default tcp when served; rdma needs --ms-type rdma|both)\n"
    "  --host NAME               the host name in the map, the OSD's failure domain\n"
    "                            (default this machine's)\n"
    "  --metrics-addr HOST:PORT  serve Prometheus /metrics there (off by default; PORT or\n"
    "                            :PORT alone = on 127.0.0.1; port 0 = a free port)\n"
    "  --metrics-addr-file FILE  once serving, write the bound HOST:PORT there\n";

int Fail(const std::string& msg) {
  std::fprintf(stderr, "osd: %s\n%s", msg.c_str(), kUsage);
  return 2;
}

// The store keeps up to three descriptors per 256 MiB log segment for its life, plus
// sockets: a soft limit of 1,024 would end an OSD after ~85 GiB of log. Up to the hard one.
void RaiseOpenFileLimit() {
  struct rlimit r;
  if (getrlimit(RLIMIT_NOFILE, &r) != 0 || r.rlim_cur >= r.rlim_max) return;
  const rlim_t was = r.rlim_cur;
  r.rlim_cur = r.rlim_max;
  if (setrlimit(RLIMIT_NOFILE, &r) == 0) {
    spdlog::info("open-file limit raised from {} to {}", static_cast<uint64_t>(was),
                 static_cast<uint64_t>(r.rlim_cur));
  }
}

// --WHICH-addr HOST[:PORT] or --WHICH-network CIDR (WHICH: public, cluster) as "HOST:PORT"
// (port 0 when not given); "" when neither flag is there.
absl::StatusOr<std::string> AddressFromFlags(const msgr::mon::CliFlags& flags,
                                             const std::string& which) {
  const std::string addr_flag = which + "-addr", net_flag = which + "-network";
  if (flags.Has(addr_flag) && flags.Has(net_flag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("give --", addr_flag, " or --", net_flag, ", not both"));
  }
  if (flags.Has(addr_flag)) {
    auto hp = msgr::ParseHostOptionalPort(flags.Get(addr_flag), 0);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", addr_flag, ": ", hp.status().message()));
    }
    return msgr::JoinHostPort(hp->host, hp->port);
  }
  if (flags.Has(net_flag)) {
    auto host = msgr::LocalAddressIn(flags.Get(net_flag));
    if (!host.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", net_flag, ": ", host.status().message()));
    }
    return msgr::JoinHostPort(*host, 0);
  }
  return std::string();
}

volatile std::sig_atomic_t g_stop = 0;
void OnSignal(int) { g_stop = 1; }
std::atomic<bool> g_fenced{false};

}  // namespace

int main(int argc, char** argv) {
  // Debian's Abseil is built with Mutex deadlock detection on: a graph update per lock
  // acquisition on every hot path. Tests keep it; the daemons and the bench do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  // Every flag but --id and --conf may also come from the config file (cluster_conf.h).
  const std::set<std::string>& conf_keys = msgr::mon::ConfKeysOf("osd");
  std::set<std::string> known = conf_keys;
  known.insert({"id", "conf", "help"});
  auto flags = msgr::mon::CliFlags::Parse(argc, argv, known);
  if (!flags.ok()) return Fail(std::string(flags.status().message()));
  if (flags->Has("help")) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string conf_path =
      msgr::mon::ConfPathFor(flags->Get("conf"), flags->Get("cluster-dir"));
  {
    // [osd.K] by the id's number: --id 07 reads [osd.7] (the bad id itself is refused below).
    std::string id = flags->Get("id");
    if (uint32_t n = 0; absl::SimpleAtoi(id, &n)) id = std::to_string(n);
    auto conf = msgr::mon::LoadSettings(flags->Get("conf"), flags->Get("cluster-dir"), "osd",
                                        id, conf_keys);
    if (!conf.ok()) {
      std::fprintf(stderr, "osd: %s\n", std::string(conf.status().message()).c_str());
      return 2;
    }
    flags->SetDefaults(*conf);
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("osd"));
  spdlog::set_level(spdlog::level::from_str(flags->Get("log-level", "info")));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");
  RaiseOpenFileLimit();
  if (!conf_path.empty()) spdlog::info("settings from {} (flags override it)", conf_path);

  msgr::osd::OsdOptions o;
  auto id = flags->GetUint("id", UINT64_MAX);
  if (!id.ok() || *id == UINT64_MAX) return Fail("--id N is required");
  o.id = static_cast<uint32_t>(*id);
  o.mon_addr = flags->Get("mon");
  if (o.mon_addr.empty()) return Fail("--mon HOST:PORT is required");
  o.data_dir = flags->Get("data-dir");
  for (auto [which, out] : {std::pair<const char*, std::string*>{"public", &o.public_addr},
                             {"cluster", &o.cluster_addr}}) {
    auto addr = AddressFromFlags(*flags, which);
    if (!addr.ok()) return Fail(std::string(addr.status().message()));
    if (!addr->empty()) *out = *addr;
  }
  {
    auto port = flags->GetUint("rdma-port", 0);
    if (!port.ok() || *port > 65535) return Fail("--rdma-port must be a port number (0..65535)");
    o.rdma_port = static_cast<uint16_t>(*port);
  }
  o.host_name = flags->Get("host");
  o.run_dir = flags->Get("run-dir");
  const std::string ms = flags->Get("ms-type", "tcp");
  if (ms == "both") {
    o.ms_types = {"tcp", "rdma"};
  } else if (ms == "tcp" || ms == "rdma") {
    o.ms_types = {ms};
  } else {
    return Fail("--ms-type must be tcp, rdma or both");
  }
  // OSD-to-OSD sessions' backend (default: tcp when served); Osd::Start checks the rest.
  o.cluster_ms_type = flags->Get("ms-cluster-type");
  if (!o.cluster_ms_type.empty() && o.cluster_ms_type != "tcp" && o.cluster_ms_type != "rdma") {
    return Fail("--ms-cluster-type must be tcp or rdma");
  }
  o.ms_mode = flags->Get("ms-mode", "crc");
  if (o.ms_mode != "crc" && o.ms_mode != "secure") return Fail("--ms-mode must be crc or secure");
  if (o.ms_mode == "secure" && ms != "tcp") {
    return Fail("--ms-mode secure is tcp-only (one-sided RDMA writes bypass the CPU that would "
                "decrypt them): use --ms-type tcp, or --ms-mode crc with rdma");
  }
  const std::string dur = flags->Get("durability", "durable");
  if (dur == "durable") {
    o.durability = msgr::store::Durability::kDurable;
  } else if (dur == "buffered") {
    o.durability = msgr::store::Durability::kBuffered;
  } else if (dur == "memory") {
    o.durability = msgr::store::Durability::kMemory;
  } else {
    return Fail("--durability must be durable, buffered or memory");
  }
  if (o.data_dir.empty() && o.durability != msgr::store::Durability::kMemory) {
    return Fail("--data-dir DIR is required (except with --durability memory)");
  }
  for (const char* name :
       {"pollers", "poller-spin-us", "poller-wakeup-us", "poller-nap-us", "poller-nap-rings",
        "ring-bytes", "capacity", "pg-log-entries"}) {
    if (!flags->GetUint(name, 0).ok()) return Fail(std::string(flags->GetUint(name, 0).status().message()));
  }
  o.pollers = static_cast<int>(*flags->GetUint("pollers", 1));
  if (flags->Has("poller-spin-us")) {  // a fixed spin, as before hybrid polling
    o.poller_spin = absl::Microseconds(*flags->GetUint("poller-spin-us", 1000));
    o.poller_adaptive_spin = false;
  }
  o.poller_wakeup_cost = absl::Microseconds(*flags->GetUint("poller-wakeup-us", 1000));
  o.poller_nap = absl::Microseconds(*flags->GetUint("poller-nap-us", 100));
  o.poller_nap_rings = static_cast<size_t>(*flags->GetUint("poller-nap-rings", 8));
  if (flags->Has("op-complaint-time")) {
    double secs = 0;
    if (!absl::SimpleAtod(flags->Get("op-complaint-time"), &secs) || !(secs > 0)) {
      return Fail("--op-complaint-time takes a number of seconds above 0, like 30 or 0.5");
    }
    o.op_complaint_time = absl::Seconds(secs);
  }
  o.ring_bytes = *flags->GetUint("ring-bytes", msgr::kDefaultRingBytes);
  if (!msgr::IsValidRingSize(o.ring_bytes)) {
    return Fail("--ring-bytes must be a power of two of at least 65536");
  }
  o.capacity_bytes = *flags->GetUint("capacity", 0);
  o.pg_log_entries = *flags->GetUint("pg-log-entries", msgr::osd::PgLog::kDefaultMaxEntries);
  for (absl::string_view cpu : absl::StrSplit(flags->Get("poller-cpus"), ',', absl::SkipEmpty())) {
    int c;
    if (!absl::SimpleAtoi(cpu, &c) || c < 0) return Fail("--poller-cpus takes a list like 0,1");
    o.poller_cpus.push_back(c);
  }
  if (flags->Has("weight") && !absl::SimpleAtod(flags->Get("weight"), &o.weight)) {
    return Fail("--weight takes a number");
  }
  // --auth none: no messenger authentication, no monitor TLS. --cluster-dir DIR (auth
  // secret): the messenger key DIR/keyring (or --keyring FILE) and mutual TLS to the
  // monitor as osd.<id> with DIR/pki. --keyring FILE alone (the older form): the messenger
  // key only, the monitor without TLS.
  const std::string auth_mode = flags->Get("auth", "secret");
  const std::string cluster_dir = flags->Get("cluster-dir");
  if (auth_mode != "none" && auth_mode != "secret") return Fail("--auth must be secret or none");
  if (auth_mode == "none") {
    o.auth = msgr::AuthConfig::None();
  } else if (flags->Has("keyring") || !cluster_dir.empty()) {
    const std::string keyring =
        flags->Has("keyring") ? flags->Get("keyring") : cluster_dir + "/keyring";
    auto auth = msgr::AuthConfig::FromKeyringFile(keyring);
    if (!auth.ok()) return Fail(absl::StrCat("keyring ", keyring, ": ", auth.status().message()));
    o.auth = *auth;
    if (!cluster_dir.empty()) {
      // The monitor's mutual TLS and the messenger's entity proof, with one certificate.
      const std::string entity = absl::StrCat("osd.", o.id);
      auto mon_auth = msgr::mon::ControlAuth::FromClusterDir(cluster_dir, entity);
      if (!mon_auth.ok()) return Fail(std::string(mon_auth.status().message()));
      o.mon_auth = *mon_auth;
      auto creds = msgr::EntityCredentials::FromClusterDir(cluster_dir, entity);
      if (!creds.ok()) return Fail(std::string(creds.status().message()));
      o.auth.entity = *creds;
    }
  } else {
    return Fail("give --cluster-dir DIR (its keyring and PKI), --keyring FILE or --auth none");
  }
  if (flags->Has("rdma-device")) o.backend_options["rdma_device"] = flags->Get("rdma-device");
  if (flags->Has("rdma-max-registered-mb")) {
    // Registered memory the rdma messenger may hold (rings, pools); sessions beyond it are
    // refused with the reason (default 4096).
    auto mb = flags->GetUint("rdma-max-registered-mb", 0);
    if (!mb.ok() || *mb == 0 || *mb > UINT32_MAX) {
      return Fail("--rdma-max-registered-mb must be a positive number of MiB");
    }
    o.backend_options["rdma_max_registered_mb"] = std::to_string(*mb);
  }
  if (flags->Has("rdma-ring-min-kb")) {
    // A session's first ring (it grows with its client's load up to --ring-bytes).
    auto kb = flags->GetUint("rdma-ring-min-kb", 0);
    if (!kb.ok() || *kb < 64 || (*kb & (*kb - 1)) != 0 || (*kb << 10) > o.ring_bytes) {
      return Fail("--rdma-ring-min-kb must be a power of two of at least 64, at most "
                  "--ring-bytes");
    }
    o.backend_options["rdma_ring_min_kb"] = std::to_string(*kb);
  }

  if (flags->Has("metrics-addr-file") && !flags->Has("metrics-addr")) {
    return Fail("--metrics-addr-file needs --metrics-addr HOST:PORT");
  }
  if (flags->Has("metrics-addr")) {
    auto addr = msgr::metrics::NormalizeMetricsAddr(flags->Get("metrics-addr"));
    if (!addr.ok()) return Fail(std::string(addr.status().message()));
  }

  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);
  // SIGTERM and SIGINT stay blocked in every thread the OSD starts; the main thread takes
  // them in sigsuspend below (no window between testing g_stop and waiting).
  sigset_t stop_signals, unblocked;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, &unblocked);
  o.on_fenced = [](const absl::Status&) {
    g_fenced = true;
    kill(getpid(), SIGTERM);
  };
  auto osd = msgr::osd::Osd::Start(o);
  if (!osd.ok()) {
    spdlog::error("osd.{} failed to start: {}", o.id, osd.status().ToString());
    return 1;
  }
  std::unique_ptr<msgr::metrics::MetricsServer> metrics;
  if (flags->Has("metrics-addr")) {
    auto m = msgr::metrics::StartDaemonMetrics(flags->Get("metrics-addr"),
                                               flags->Get("metrics-addr-file"),
                                               &(*osd)->counter_registry(),
                                               {{"osd", std::to_string(o.id)}});
    if (!m.ok()) {
      spdlog::error("osd.{}: {}", o.id, m.status().ToString());
      (*osd)->Stop();
      return 1;
    }
    metrics = std::move(*m);
    spdlog::info("osd.{}: metrics on http://{}/metrics", o.id, metrics->addr());
  }
  spdlog::info("osd.{} up", o.id);
  while (!g_stop) sigsuspend(&unblocked);
  spdlog::info("osd.{} stopping", o.id);
  metrics.reset();  // no scrape reads the registry while the OSD stops
  (*osd)->Stop();
  if (g_fenced) {
    spdlog::error("osd.{} stopped: fenced (the reason is above); its id now belongs to the "
                  "newer process", o.id);
    return 3;
  }
  spdlog::info("osd.{} stopped", o.id);
  return 0;
}

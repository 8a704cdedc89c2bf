// osd: the simulated OSD daemon (see osd_sim/osd.h).
//
//   osd --id N --mon HOST:PORT --data-dir DIR [--run-dir DIR] [--ms-type tcp|rdma|both]
//       [--durability durable|buffered|memory] [--pollers N] [--poller-cpus 0,1]
//       [--poller-spin-us US] [--poller-wakeup-us 1000] [--poller-notified-wakeup-us 150]
//       [--poller-nap-us 40]
//       [--poller-nap-rings 8] [--poller-nap-depth 3] [--ms-tcp-threads 0]
//       [--ring-bytes 33554432] [--capacity BYTES]
//       [--store-commit-window-us US] [--store-zero-ahead-kb KB]
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
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/synchronization/mutex.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "msg/entity_credentials.h"
#include "absl/strings/str_split.h"
#include "msg/base/malloc_policy.h"
#include "msg/base/net_addr.h"
#include "osd_sim/metrics/daemon_metrics.h"
#include "osd_sim/mon/cli_flags.h"
#include "osd_sim/mon/cluster_conf.h"
#include "osd_sim/mon/control_auth.h"
#include "osd_sim/osd.h"
#include "osd_sim/pg_log.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

// Flags with dashes on the command line (osd_sim/mon/cli_flags.h); every one but --id and
// --conf may also come from the config file (cluster_conf.h: ConfKeysOf("osd")). kUsage
// below is the help; a flag whose default is "not given" is read only where Has() says so.
ABSL_FLAG(uint32_t, id, 0, "this OSD's number (required)");
ABSL_FLAG(std::string, conf, "", "config file");
ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT (required)");
ABSL_FLAG(std::string, data_dir, "", "the store's directory");
ABSL_FLAG(std::string, run_dir, "", "admin socket directory");
ABSL_FLAG(std::string, ms_type, "tcp", "tcp|rdma|both");
ABSL_FLAG(std::string, ms_cluster_type, "", "tcp|rdma for OSD-to-OSD sessions");
ABSL_FLAG(std::string, ms_mode, "crc", "crc|secure");
ABSL_FLAG(std::string, durability, "durable", "durable|buffered|memory");
ABSL_FLAG(uint64_t, pollers, 1, "poller threads");
ABSL_FLAG(std::string, poller_cpus, "", "CPUs for the pollers, as 0,1");
ABSL_FLAG(uint64_t, poller_spin_us, 1000, "fixed spin after a record (when given)");
ABSL_FLAG(uint64_t, poller_wakeup_us, 1000, "hybrid polling's wake-up cost");
ABSL_FLAG(uint64_t, poller_notified_wakeup_us, 150,
          "hybrid polling's wake-up cost while every rdma ring is announced (notifier)");
ABSL_FLAG(uint64_t, poller_nap_us, 40, "nap between looks under many rings");
ABSL_FLAG(uint64_t, poller_nap_rings, 8, "busy rings that make a poller nap");
ABSL_FLAG(uint64_t, poller_nap_depth, 3, "a writer's queue depth that makes a poller nap");
ABSL_FLAG(uint64_t, poller_ack_spin_us, 200, "poll for replicas' acks while holding records");
ABSL_FLAG(uint64_t, ms_tcp_threads, 0,
          "socket threads per tcp messenger (0: the pollers run them)");
ABSL_FLAG(uint64_t, ring_bytes, msgr::kDefaultRingBytes, "largest RDMA ring");
ABSL_FLAG(uint64_t, capacity, 0, "store capacity in bytes (0: none)");
ABSL_FLAG(std::optional<uint64_t>, store_commit_window_us, std::nullopt,
          "group commit window of a durable store (unset: the store's, 200)");
ABSL_FLAG(std::optional<uint64_t>, store_zero_ahead_kb, std::nullopt,
          "durable store: zeros written ahead of the log's tail (unset: the store's, 8192)");
ABSL_FLAG(uint64_t, pg_log_entries, msgr::osd::PgLog::kDefaultMaxEntries, "PG log length");
ABSL_FLAG(std::string, keyring, "", "the messenger key");
ABSL_FLAG(std::string, auth, "secret", "secret|none");
ABSL_FLAG(std::string, cluster_dir, "", "tools/cluster.sh directory (keyring, PKI)");
ABSL_FLAG(std::string, rdma_device, "", "soft|IBDEV");
ABSL_FLAG(double, weight, 1.0, "placement weight");
ABSL_FLAG(uint64_t, rdma_max_registered_mb, 0, "registered memory limit (when given)");
ABSL_FLAG(uint64_t, rdma_ring_min_kb, 0, "a session's first ring (when given)");
ABSL_FLAG(std::string, metrics_addr, "", "Prometheus /metrics HOST:PORT");
ABSL_FLAG(std::string, metrics_addr_file, "", "where to write the bound metrics address");
ABSL_FLAG(double, op_complaint_time, 30, "seconds before a write is a slow op (when given)");
ABSL_FLAG(std::string, public_addr, "", "HOST[:PORT] clients reach");
ABSL_FLAG(std::string, public_network, "", "CIDR to pick the public address from");
ABSL_FLAG(uint64_t, rdma_port, 0, "rdma side channel port");
ABSL_FLAG(std::string, cluster_addr, "", "HOST[:PORT] other OSDs reach");
ABSL_FLAG(std::string, cluster_network, "", "CIDR to pick the cluster address from");
ABSL_FLAG(std::string, host, "", "host name in the map");
ABSL_FLAG(std::string, log_level, "info", "trace|debug|info|warn|error");

namespace {

constexpr const char* kUsage =
    "usage: osd --id N --mon HOST:PORT --data-dir DIR [--run-dir DIR]\n"
    "           [--ms-type tcp|rdma|both] [--durability durable|buffered|memory]\n"
    "           [--pollers N] [--poller-cpus LIST] [--poller-spin-us US]\n"
    "           [--poller-wakeup-us US] [--poller-nap-us US] [--poller-nap-rings N]\n"
    "           [--poller-nap-depth N]\n"
    "           [--poller-ack-spin-us US] [--ms-tcp-threads N]\n"
    "           [--ring-bytes B]\n"
    "           [--capacity BYTES] [--store-commit-window-us US]\n"
    "           [--cluster-dir DIR | --keyring FILE | --auth none]\n"
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
    "  --poller-notified-wakeup-us US  the same while every rdma ring is announced by the\n"
    "                            poller's notifier and the store syncs (durable): a record\n"
    "                            wakes it directly (default 150)\n"
    "  --poller-nap-us US        with many RDMA clients writing (see --poller-nap-rings), or\n"
    "                            one with a deep queue (--poller-nap-depth), nap\n"
    "                            US between looks instead of spinning (default 40; 0: never)\n"
    "  --poller-nap-rings N      how many RDMA rings with records in the last 2 ms make a\n"
    "                            poller nap rather than spin (default 8; 0: never nap)\n"
    "  --poller-nap-depth N      nap, too, while an RDMA client keeps N or more other writes\n"
    "                            in flight to this OSD, on average (default 3; 0: never)\n"
    "  --poller-ack-spin-us US   a primary over rdma: while its records wait for replicas'\n"
    "                            acks, poll for them up to US when such waits mostly end\n"
    "                            that soon (default 200; 0: leave them to the messenger)\n"
    "  --ms-tcp-threads N        socket threads of each tcp messenger (default 0: none,\n"
    "                            a poller reads the sockets itself, runs to completion)\n"
    "  --store-commit-window-us US  durable mode: wait up to US after a write for others\n"
    "                            to share its fdatasync, while writes come in groups\n"
    "                            (default 200; 0: flush each at once)\n"
    "  --store-zero-ahead-kb KB  durable mode: keep up to KB of zeros written and synced\n"
    "                            ahead of the log's tail, so small writes' flushes need no\n"
    "                            filesystem journal commit (ext4/XFS; default 8192; 0: off)\n"
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
absl::StatusOr<std::string> AddressFromFlags(const msgr::mon::ParsedFlags& flags,
                                             const std::string& which) {
  const std::string addr_flag = which + "-addr", net_flag = which + "-network";
  if (flags.Has(addr_flag) && flags.Has(net_flag)) {
    return absl::InvalidArgumentError(
        absl::StrCat("give --", addr_flag, " or --", net_flag, ", not both"));
  }
  const bool is_public = which == "public";
  if (flags.Has(addr_flag)) {
    auto hp = msgr::ParseHostOptionalPort(
        absl::GetFlag(is_public ? FLAGS_public_addr : FLAGS_cluster_addr), 0);
    if (!hp.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--", addr_flag, ": ", hp.status().message()));
    }
    return msgr::JoinHostPort(hp->host, hp->port);
  }
  if (flags.Has(net_flag)) {
    auto host = msgr::LocalAddressIn(
        absl::GetFlag(is_public ? FLAGS_public_network : FLAGS_cluster_network));
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
  // Payload buffers (the memory store's, tcp messages') are reused, not faulted in anew.
  msgr::KeepFreedMemoryForReuse();
  // Debian's Abseil is built with Mutex deadlock detection on: a graph update per lock
  // acquisition on every hot path. Tests keep it; the daemons and the bench do not.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  auto flags = msgr::mon::ParseFlags(argc, argv);
  if (!flags.ok()) return Fail(std::string(flags.status().message()));
  if (flags->help()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  const std::string conf_path =
      msgr::mon::ConfPathFor(absl::GetFlag(FLAGS_conf), absl::GetFlag(FLAGS_cluster_dir));
  {
    // [osd.K] by the id's number: --id 07 reads [osd.7].
    const std::string id = flags->Given("id") ? std::to_string(absl::GetFlag(FLAGS_id)) : "";
    absl::Status applied =
        msgr::mon::ApplyConfSettings(&*flags, "osd", id, msgr::mon::ConfKeysOf("osd"));
    if (!applied.ok()) {
      std::fprintf(stderr, "osd: %s\n", std::string(applied.message()).c_str());
      return 2;
    }
  }
  spdlog::set_default_logger(spdlog::stderr_color_mt("osd"));
  spdlog::set_level(spdlog::level::from_str(absl::GetFlag(FLAGS_log_level)));
  spdlog::set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ [%t] %v");
  RaiseOpenFileLimit();
  if (!conf_path.empty()) spdlog::info("settings from {} (flags override it)", conf_path);

  msgr::osd::OsdOptions o;
  if (!flags->Has("id")) return Fail("--id N is required");
  o.id = absl::GetFlag(FLAGS_id);
  o.mon_addr = absl::GetFlag(FLAGS_mon);
  if (o.mon_addr.empty()) return Fail("--mon HOST:PORT is required");
  o.data_dir = absl::GetFlag(FLAGS_data_dir);
  for (auto [which, out] : {std::pair<const char*, std::string*>{"public", &o.public_addr},
                             {"cluster", &o.cluster_addr}}) {
    auto addr = AddressFromFlags(*flags, which);
    if (!addr.ok()) return Fail(std::string(addr.status().message()));
    if (!addr->empty()) *out = *addr;
  }
  {
    const uint64_t port = absl::GetFlag(FLAGS_rdma_port);
    if (port > 65535) return Fail("--rdma-port must be a port number (0..65535)");
    o.rdma_port = static_cast<uint16_t>(port);
  }
  o.host_name = absl::GetFlag(FLAGS_host);
  o.run_dir = absl::GetFlag(FLAGS_run_dir);
  const std::string ms = absl::GetFlag(FLAGS_ms_type);
  if (ms == "both") {
    o.ms_types = {"tcp", "rdma"};
  } else if (ms == "tcp" || ms == "rdma") {
    o.ms_types = {ms};
  } else {
    return Fail("--ms-type must be tcp, rdma or both");
  }
  // OSD-to-OSD sessions' backend (default: tcp when served); Osd::Start checks the rest.
  o.cluster_ms_type = absl::GetFlag(FLAGS_ms_cluster_type);
  if (!o.cluster_ms_type.empty() && o.cluster_ms_type != "tcp" && o.cluster_ms_type != "rdma") {
    return Fail("--ms-cluster-type must be tcp or rdma");
  }
  o.ms_mode = absl::GetFlag(FLAGS_ms_mode);
  if (o.ms_mode != "crc" && o.ms_mode != "secure") return Fail("--ms-mode must be crc or secure");
  if (o.ms_mode == "secure" && ms != "tcp") {
    return Fail("--ms-mode secure is tcp-only (one-sided RDMA writes bypass the CPU that would "
                "decrypt them): use --ms-type tcp, or --ms-mode crc with rdma");
  }
  const std::string dur = absl::GetFlag(FLAGS_durability);
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
  o.pollers = static_cast<int>(absl::GetFlag(FLAGS_pollers));
  if (flags->Has("poller-spin-us")) {  // a fixed spin, as before hybrid polling
    o.poller_spin = absl::Microseconds(absl::GetFlag(FLAGS_poller_spin_us));
    o.poller_adaptive_spin = false;
  }
  o.poller_wakeup_cost = absl::Microseconds(absl::GetFlag(FLAGS_poller_wakeup_us));
  o.poller_notified_wakeup_cost =
      absl::Microseconds(absl::GetFlag(FLAGS_poller_notified_wakeup_us));
  o.poller_nap = absl::Microseconds(absl::GetFlag(FLAGS_poller_nap_us));
  o.poller_nap_rings = static_cast<size_t>(absl::GetFlag(FLAGS_poller_nap_rings));
  if (absl::GetFlag(FLAGS_poller_nap_depth) > 65535) {
    return Fail("--poller-nap-depth takes 0 to 65535 writes");
  }
  o.poller_nap_depth = static_cast<size_t>(absl::GetFlag(FLAGS_poller_nap_depth));
  if (absl::GetFlag(FLAGS_ms_tcp_threads) > 64) {
    return Fail("--ms-tcp-threads takes 0 to 64 threads (0: the pollers run the sockets)");
  }
  o.ms_tcp_threads = static_cast<int>(absl::GetFlag(FLAGS_ms_tcp_threads));
  if (absl::GetFlag(FLAGS_poller_ack_spin_us) > 1'000'000) {
    return Fail("--poller-ack-spin-us takes 0 to 1000000 microseconds");
  }
  o.poller_ack_spin = absl::Microseconds(absl::GetFlag(FLAGS_poller_ack_spin_us));
  if (flags->Has("op-complaint-time")) {
    const double secs = absl::GetFlag(FLAGS_op_complaint_time);
    if (!(secs > 0)) {
      return Fail("--op-complaint-time takes a number of seconds above 0, like 30 or 0.5");
    }
    o.op_complaint_time = absl::Seconds(secs);
  }
  o.ring_bytes = absl::GetFlag(FLAGS_ring_bytes);
  if (!msgr::IsValidRingSize(o.ring_bytes)) {
    return Fail("--ring-bytes must be a power of two of at least 65536");
  }
  o.capacity_bytes = absl::GetFlag(FLAGS_capacity);
  if (const std::optional<uint64_t> w = absl::GetFlag(FLAGS_store_commit_window_us)) {
    if (*w > 1'000'000) return Fail("--store-commit-window-us takes 0 to 1000000 microseconds");
    o.store_commit_window = absl::Microseconds(static_cast<int64_t>(*w));
  }
  if (const std::optional<uint64_t> kb = absl::GetFlag(FLAGS_store_zero_ahead_kb)) {
    if (*kb > (uint64_t{1} << 20)) return Fail("--store-zero-ahead-kb takes 0 to 1048576 KiB");
    o.store_zero_ahead_bytes = *kb << 10;
  }
  o.pg_log_entries = absl::GetFlag(FLAGS_pg_log_entries);
  for (absl::string_view cpu :
       absl::StrSplit(absl::GetFlag(FLAGS_poller_cpus), ',', absl::SkipEmpty())) {
    int c;
    if (!absl::SimpleAtoi(cpu, &c) || c < 0) return Fail("--poller-cpus takes a list like 0,1");
    o.poller_cpus.push_back(c);
  }
  if (flags->Has("weight")) {
    o.weight = absl::GetFlag(FLAGS_weight);
    if (!(o.weight >= 0) || !std::isfinite(o.weight)) {
      return Fail("--weight takes a number of 0 or more, like 1 or 0.5");
    }
  }
  // --auth none: no messenger authentication, no monitor TLS. --cluster-dir DIR (auth
  // secret): the messenger key DIR/keyring (or --keyring FILE) and mutual TLS to the
  // monitor as osd.<id> with DIR/pki. --keyring FILE alone (the older form): the messenger
  // key only, the monitor without TLS.
  const std::string auth_mode = absl::GetFlag(FLAGS_auth);
  const std::string cluster_dir = absl::GetFlag(FLAGS_cluster_dir);
  if (auth_mode != "none" && auth_mode != "secret") return Fail("--auth must be secret or none");
  if (auth_mode == "none") {
    o.auth = msgr::AuthConfig::None();
  } else if (flags->Has("keyring") || !cluster_dir.empty()) {
    const std::string keyring =
        flags->Has("keyring") ? absl::GetFlag(FLAGS_keyring) : cluster_dir + "/keyring";
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
  if (flags->Has("rdma-device")) {
    o.backend_options["rdma_device"] = absl::GetFlag(FLAGS_rdma_device);
  }
  if (flags->Has("rdma-max-registered-mb")) {
    // Registered memory the rdma messenger may hold (rings, pools); sessions beyond it are
    // refused with the reason (default 4096).
    const uint64_t mb = absl::GetFlag(FLAGS_rdma_max_registered_mb);
    if (mb == 0 || mb > UINT32_MAX) {
      return Fail("--rdma-max-registered-mb must be a positive number of MiB");
    }
    o.backend_options["rdma_max_registered_mb"] = std::to_string(mb);
  }
  if (flags->Has("rdma-ring-min-kb")) {
    // A session's first ring (it grows with its client's load up to --ring-bytes).
    const uint64_t kb = absl::GetFlag(FLAGS_rdma_ring_min_kb);
    if (kb < 64 || (kb & (kb - 1)) != 0 || (kb << 10) > o.ring_bytes) {
      return Fail("--rdma-ring-min-kb must be a power of two of at least 64, at most "
                  "--ring-bytes");
    }
    o.backend_options["rdma_ring_min_kb"] = std::to_string(kb);
  }

  const std::string metrics_addr = absl::GetFlag(FLAGS_metrics_addr);
  if (flags->Has("metrics-addr-file") && !flags->Has("metrics-addr")) {
    return Fail("--metrics-addr-file needs --metrics-addr HOST:PORT");
  }
  if (flags->Has("metrics-addr")) {
    auto addr = msgr::metrics::NormalizeMetricsAddr(metrics_addr);
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
    auto m = msgr::metrics::StartDaemonMetrics(metrics_addr,
                                               absl::GetFlag(FLAGS_metrics_addr_file),
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

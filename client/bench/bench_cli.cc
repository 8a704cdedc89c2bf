#include "client/bench/bench_cli.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "client/bench/bench_args.h"
#include "client/cli/cluster_options.h"
#include "client/bench/bench_report.h"
#include "client/bench/bench_runner.h"
#include "client/bench/send_pool.h"
#include "client/bench/cpu_usage.h"
#include "client/bench/osd_stats.h"
#include "client/bench/thread_role.h"
#include "client/client.h"
#include "msg/entity_credentials.h"
#include "osd_sim/mon/cluster_conf.h"

namespace msgr::bench {
namespace {

// With several clients: a buffer of one client's messenger, and that client (its
// registered memory is sent without a copy only by it).
class ClientBuffer final : public RecordBuffer {
 public:
  ClientBuffer(RecordBufferRef inner, client::Client* c)
      : RecordBuffer(inner->data(), inner->size()), client(c), inner_(std::move(inner)) {}
  client::Client* const client;

 private:
  RecordBufferRef inner_;
};

// Registered memory per rdma session at the end of a run (the sessions are still open):
// the OSDs' from their perf dumps, the clients' from their messengers' counters.
void RegisteredPerSession(const std::vector<std::unique_ptr<client::Client>>& clients,
                          const PerfSamples& osds, BenchReport* report) {
  uint64_t bytes = 0, sessions = 0;
  for (const auto& [path, s] : osds) {
    if (!s.ok()) continue;
    bytes += s->rdma_registered_bytes;
    sessions += s->rdma_sessions;
  }
  if (sessions > 0) report->osd_registered_kib_per_session = bytes / 1024.0 / sessions;
  bytes = sessions = 0;
  for (const auto& c : clients) {
    sessions += c->messenger_counters().connections_open;
    for (const CounterGroup& g : c->messenger_perf_counters()) {
      for (const CounterValue& v : g.values) {
        if (g.name == "rdma" && std::string_view(v.desc->name) == "registered_bytes") {
          bytes += v.value;
        }
      }
    }
  }
  if (sessions > 0) report->client_registered_kib_per_session = bytes / 1024.0 / sessions;
}

constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;
// Steal above this (percent of the machine's CPU time during a run) is worth a warning:
// on this project's 2-core VMs runs with 25-45% steal moved 4 KiB -t 16 rdma IOPS to
// 0.3-0.6x of runs beside them (docs/BENCHMARKS.md "Session 41").
constexpr double kDisturbingStealPct = 10;

// Every write run's objects start with this; seq/rand read all of them by default.
constexpr char kBenchPrefix[] = "benchmark_data_";

std::string DefaultPrefix() {
  char host[256] = "localhost";
  gethostname(host, sizeof host - 1);
  return absl::StrCat(kBenchPrefix, host, "_", getpid());
}

// CPU seconds of each readable pid.
std::map<int, double> SampleCpu(const std::vector<int>& pids) {
  std::map<int, double> m;
  for (int pid : pids) {
    auto s = ProcessCpuSeconds(pid);
    if (s.ok()) m[pid] = *s;
  }
  return m;
}

// Per-thread CPU of each readable pid.
std::map<int, std::vector<ThreadCpu>> SampleThreads(const std::vector<int>& pids) {
  std::map<int, std::vector<ThreadCpu>> m;
  for (int pid : pids) {
    auto t = ProcessThreadCpu(pid);
    if (t.ok()) m[pid] = std::move(*t);
  }
  return m;
}

// The OSD CPU by thread role over the run, over the processes read at both ends.
std::optional<RoleCpu> RoleCpuOver(const std::map<int, std::vector<ThreadCpu>>& before,
                                   const std::map<int, std::vector<ThreadCpu>>& after) {
  RoleCpu sum{};
  bool any = false;
  for (const auto& [pid, threads] : after) {
    auto b = before.find(pid);
    if (b == before.end()) continue;
    AddByRole(ThreadCpuDelta(b->second, threads), &sum);
    any = true;
  }
  return any ? std::optional<RoleCpu>(sum) : std::nullopt;
}

absl::Status WriteJson(const std::string& path, const BenchReport& r) {
  std::ofstream f(path, std::ios::trunc);
  f << ToJson(r).dump(2) << "\n";
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write --json file ", path));
  return absl::OkStatus();
}

}  // namespace

int BenchMain(const std::vector<std::string>& argv, const KeyringLoader& load_keyring,
              std::ostream& out, std::ostream& err) {
  // The settings of --conf FILE (or --cluster-dir DIR's msgr.conf) before the command line.
  auto args = mon::WithConfSettings(argv, !argv.empty() && argv[0] == "verify" ? 1 : 0,
                                    "client", BenchConfKeys());
  if (!args.ok()) {
    err << "bench: " << args.status().message() << "\n";
    return kExitUsage;
  }
  auto parsed = ParseBenchArgs(*args);
  if (!parsed.ok()) {
    err << "bench: " << parsed.status().message() << "\n\n" << BenchUsage();
    return kExitUsage;
  }
  const BenchArgs& a = *parsed;
  if (a.help) {
    out << BenchUsage();
    return 0;
  }

  client::ClientOptions co;
  co.mon_addr = a.mon;
  co.ms_type = a.ms_type;
  co.pool = a.pool;
  co.ms_mode = a.ms_mode;
  if (co.ms_mode.empty() && !a.cluster_dir.empty()) co.ms_mode = cli::ClusterConf(a.cluster_dir, "MS_MODE");
  if (co.ms_mode.empty()) co.ms_mode = "crc";
  co.op_timeout = absl::Seconds(a.op_timeout);
  co.mon_timeout = absl::Seconds(a.mon_timeout);
  co.max_in_flight = static_cast<size_t>(a.concurrency) + 16;
  co.queue_depth = static_cast<size_t>(a.OpsPerClient());
  if (a.ms_threads > 0) co.worker_threads = a.ms_threads;
  if (!a.rdma_device.empty()) co.backend_options["rdma_device"] = a.rdma_device;
  // --auth secret: --keyring FILE, else DIR/keyring (ParseBenchArgs saw that one is given);
  // no --auth: DIR/keyring if it is readable, else none.
  std::string keyring = a.keyring;
  const std::string dir_keyring = a.cluster_dir.empty() ? "" : a.cluster_dir + "/keyring";
  if (keyring.empty() && !dir_keyring.empty() &&
      (a.auth == "secret" || (a.auth.empty() && access(dir_keyring.c_str(), R_OK) == 0))) {
    keyring = dir_keyring;
  }
  if (!keyring.empty()) {
    auto auth = load_keyring(keyring);
    if (!auth.ok()) {
      err << "bench: keyring " << keyring << ": " << auth.status().message() << "\n";
      return kExitUsage;
    }
    co.auth = *auth;
  }
  if (co.mon_addr.empty()) {  // --cluster-dir DIR alone: the monitor at DIR/mon.addr
    auto addr = cli::MonAddrFromDir(a.cluster_dir);
    if (!addr.ok()) {
      err << "bench: " << addr.status().message() << "\n";
      return kExitFailed;
    }
    co.mon_addr = *addr;
  }
  // A cluster directory with a PKI means a monitor that wants mutual TLS and OSDs that
  // want the entity proven: both as client.bench.
  if (!keyring.empty() && !a.cluster_dir.empty() && cli::HasPki(a.cluster_dir)) {
    co.mon_pki_dir = a.cluster_dir;
    co.mon_entity = "client.bench";
    auto entity = EntityCredentials::FromClusterDir(a.cluster_dir, co.mon_entity);
    if (!entity.ok()) {
      err << "bench: " << entity.status().message() << "\n";
      return kExitUsage;
    }
    co.auth.entity = *entity;
  }

  BenchReport report;
  report.ms_type = a.ms_type;
  report.pool = a.pool.empty() ? "default" : a.pool;
  report.object_size = a.mode == BenchArgs::Mode::kWrite ? a.object_size : 0;
  report.concurrency = a.concurrency;
  report.auth = co.auth.mode == AuthConfig::Mode::kNone ? "none" : "secret";
  report.ms_mode = co.ms_mode;

  // Read the oid list before connecting: a bad path is the user's to fix first.
  std::vector<std::string> oids;
  if (a.mode == BenchArgs::Mode::kVerify) {
    auto r = ReadOidFile(a.oids_file);
    if (!r.ok()) {
      err << "bench: " << r.status().message() << "\n";
      return kExitUsage;
    }
    oids = std::move(*r);
  }

  // --clients N: N instances, each with its own entity id, messenger and OSD sessions.
  std::vector<std::unique_ptr<client::Client>> clients;
  const uint64_t id_base = (static_cast<uint64_t>(getpid()) << 32) ^
                           static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()) & 0xffffffff);
  for (int i = 0; i < a.clients; ++i) {
    co.client_id = id_base + static_cast<uint64_t>(i);
    auto client = client::Client::Create(co);
    if (!client.ok()) {
      err << "bench: " << client.status().message() << "\n";
      // A bad option, or a pool the map does not have ("no pool 'X' (pools: ...)").
      return absl::IsInvalidArgument(client.status()) || absl::IsNotFound(client.status())
                 ? kExitUsage
                 : kExitFailed;
    }
    clients.push_back(std::move(*client));
  }
  auto shutdown = absl::MakeCleanup([&] {
    for (auto& cl : clients) cl->Shutdown();
  });
  client::Client& c = *clients[0];
  report.clients = a.clients;
  const std::chrono::nanoseconds spin = std::chrono::microseconds(a.spin_us);
  // One client: its own ops (and Poll, for --spin-us). Several: writes and reads in turn.
  ObjectOps ops = OpsOf(c);
  if (clients.size() > 1) {
    auto next = std::make_shared<std::atomic<uint64_t>>(0);
    auto pick = [&clients, next]() -> client::Client& {
      return *clients[next->fetch_add(1, std::memory_order_relaxed) % clients.size()];
    };
    // A buffer is written by the client whose messenger made it (another's would copy it).
    ops.alloc = [pick](size_t size) -> RecordBufferRef {
      client::Client& c = pick();
      return std::make_shared<ClientBuffer>(c.AllocBuffer(size), &c);
    };
    ops.write = [pick](std::string oid, RecordBufferRef data, client::WriteCallback cb) {
      auto* own = dynamic_cast<ClientBuffer*>(data.get());
      client::Client& c = own != nullptr ? *own->client : pick();
      c.AsyncWrite(std::move(oid), std::move(data), std::move(cb));
    };
    ops.read = [pick](std::string oid, client::ReadCallback cb) {
      pick().AsyncRead(std::move(oid), std::move(cb));
    };
    ops.poll = nullptr;
  }

  if (a.mode == BenchArgs::Mode::kVerify) {
    report.mode = "verify";
    report.verify_enabled = true;
    report.verify = VerifyObjects(ops, oids.size(), [&](uint64_t i) { return oids[i]; },
                                  a.concurrency, a.object_size_given ? a.object_size : 0, spin,
                                  /*expect_size=*/a.object_size_given ? a.object_size : 0);
  } else {
    std::vector<int> pids = a.osd_pids;
    if (!a.cluster_dir.empty()) {
      for (int p : ReadOsdPids(a.cluster_dir)) pids.push_back(p);
    }
    std::sort(pids.begin(), pids.end());  // --osd-pids may name one of DIR's too
    pids.erase(std::unique(pids.begin(), pids.end()), pids.end());
    // The perf dumps of DIR/run/osd.*.asok give the pollers' spin and crc time and the
    // OSDs' payload copies; without them those figures are n/a (never a failed run).
    const std::vector<std::string> sockets =
        a.cluster_dir.empty() ? std::vector<std::string>{} : OsdAdminSockets(a.cluster_dir);
    auto before = SampleCpu(pids);
    auto threads_before = SampleThreads(pids);
    // Sessions first, every client to every OSD at once: what a burst of clients costs
    // the OSDs to accept (registration, handshakes), apart from the ops' latency.
    {
      const absl::Time start = absl::Now();
      // Bounded: an OSD that just died is still up in the map for a while.
      const absl::Time deadline = start + std::min(absl::Seconds(a.mon_timeout), absl::Seconds(5));
      std::vector<absl::Status> st(clients.size());
      std::vector<std::thread> connect;
      for (size_t i = 0; i < clients.size(); ++i) {
        connect.emplace_back([&, i] { st[i] = clients[i]->ConnectAll(deadline); });
      }
      for (auto& t : connect) t.join();
      size_t ok = 0;
      for (const auto& s : st) ok += s.ok();
      if (ok == clients.size()) {
        report.connect_s = absl::ToDoubleSeconds(absl::Now() - start);
        err << "bench: " << clients.size() << (clients.size() == 1 ? " client" : " clients")
            << " connected to every OSD in " << absl::StrFormat("%.3f", *report.connect_s)
            << " s\n";
      } else {
        for (const auto& s : st) {
          if (!s.ok()) {
            err << "bench: " << clients.size() - ok << " of " << clients.size()
                << " clients not connected to every OSD (" << s.message()
                << "): their ops connect on first use\n";
            break;
          }
        }
      }
    }
    PerfSamples perf_before = SamplePerf(sockets);
    const absl::StatusOr<HostCpu> host_before = ReadHostCpu();
    auto copied_tx = [&clients] {
      uint64_t n = 0;
      for (const auto& cl : clients) n += cl->messenger_counters().payload_bytes_copied_tx;
      return n;
    };
    const uint64_t copied_before = copied_tx();

    WriteRunOptions wo;
    wo.prefix = a.prefix.empty() ? DefaultPrefix() : a.prefix;
    wo.object_size = a.object_size;
    wo.concurrency = a.concurrency;
    wo.seconds = a.seconds;
    wo.count = a.count;
    wo.acked_log = a.acked_log;
    wo.progress = !a.quiet;
    wo.spin = spin;
    wo.max_objects = a.max_objects;
    wo.submit_threads =
        a.submit_threads >= 0 ? a.submit_threads : DefaultSubmitThreads(a.object_size);
    if (a.mode == BenchArgs::Mode::kSeq || a.mode == BenchArgs::Mode::kRand) {
      const bool seq = a.mode == BenchArgs::Mode::kSeq;
      report.mode = seq ? "seq" : "rand";
      wo.mode = seq ? RunMode::kSeq : RunMode::kRand;
      wo.prefix = a.prefix.empty() ? kBenchPrefix : a.prefix;
      auto listed = c.List(wo.prefix);
      if (!listed.ok()) {
        err << "bench: listing objects " << wo.prefix << "*: " << listed.status().message() << "\n";
        return kExitFailed;
      }
      for (auto& e : *listed) wo.objects.push_back({std::move(e.oid), e.size});
      if (wo.objects.empty()) {
        err << "bench: no objects whose id starts with '" << wo.prefix
            << "' to read: run a write bench first (it leaves its objects), or pass its --prefix\n";
        return kExitFailed;
      }
      std::vector<uint64_t> sizes;
      for (const auto& t : wo.objects) sizes.push_back(t.size);
      std::nth_element(sizes.begin(), sizes.begin() + sizes.size() / 2, sizes.end());
      report.object_size = wo.object_size = sizes[sizes.size() / 2];  // the median
      err << "bench: reading (" << report.mode << ") " << wo.objects.size() << " objects "
          << wo.prefix << "* (median " << report.object_size << " bytes), -t " << a.concurrency
          << ", ms_type " << a.ms_type << ", auth " << report.auth << "\n";
    } else {
      err << "bench: writing " << a.object_size << "-byte objects " << wo.prefix << "_N, -t "
          << a.concurrency << ", ms_type " << a.ms_type << ", auth " << report.auth << "\n";
    }
    auto run = RunWrites(ops, wo, err);
    if (!run.ok()) {
      err << "bench: " << run.status().message() << "\n";
      return kExitUsage;
    }
    report.run = std::move(*run);
    err << "bench: " << DriverSummary(report.run.driver) << "\n";

    report.client_copied_tx = copied_tx() - copied_before;
    auto after = SampleCpu(pids);
    if (const absl::StatusOr<HostCpu> host_after = ReadHostCpu();
        host_before.ok() && host_after.ok()) {
      report.host_cpu = HostCpuBetween(*host_before, *host_after);
      if (report.host_cpu && report.host_cpu->steal_pct >= kDisturbingStealPct) {
        err << "bench: the hypervisor took "
            << absl::StrFormat("%.0f%%", report.host_cpu->steal_pct)
            << " of this machine's CPU time during the run (steal): this run's figures are "
               "lower than this code does on an undisturbed machine; compare runs with "
               "little steal (host_cpu.steal_pct in --json)\n";
      }
    }
    auto threads_after = SampleThreads(pids);
    PerfSamples perf_after = SamplePerf(sockets);
    if (a.ms_type == "rdma") RegisteredPerSession(clients, perf_after, &report);
    report.osd_role_cpu_s = RoleCpuOver(threads_before, threads_after);
    if (!pids.empty() || !a.cluster_dir.empty()) {
      auto perf = SumPerfDeltas(perf_before, perf_after);
      if (perf.ok()) {
        report.osd_perf = *perf;
      } else {
        const std::string why =
            a.cluster_dir.empty() ? "no --cluster-dir (for its run/osd.*.asok)"
            : sockets.empty()     ? absl::StrCat("no ", a.cluster_dir, "/run/osd.*.asok")
                                  : std::string(perf.status().message());
        err << "bench: " << why
            << ": the figures from OSD perf dumps (osds_busy, crc, poller, poller spin, "
               "osd_wire, osd_store) are n/a\n";
      }
    }
    double osd_cpu = 0;
    for (auto& [pid, t] : after) {
      if (before.count(pid)) {
        osd_cpu += t - before[pid];
        ++report.osd_processes;
      }
    }
    if (report.osd_processes > 0) report.osd_cpu_s = osd_cpu;
    if (auto poller = PollerCpuTimes(report); poller && poller->capped) {
      err << "bench: the pollers' busy_ns/crc_ns (wall-clock time) exceed their threads' CPU: "
             "crc, poller spin and osds_busy use the CPU as the bound\n";
    }
    if (!pids.empty() && report.osd_processes < static_cast<int>(pids.size())) {
      err << "bench: measured CPU of " << report.osd_processes << " of " << pids.size()
          << " OSD processes (the others were gone)\n";
    }
    if (a.verify) {
      report.verify_enabled = true;
      auto acked = report.run.acked;  // an object overwritten (--max-objects) is read once
      std::sort(acked.begin(), acked.end());
      acked.erase(std::unique(acked.begin(), acked.end()), acked.end());
      report.verify = VerifyObjects(
          ops, acked.size(), [&](uint64_t i) { return ObjectId(wo.prefix, acked[i]); },
          a.concurrency, a.object_size, spin, /*expect_size=*/a.object_size);
    }
  }
  std::move(shutdown).Invoke();

  out << SummaryText(report) << std::flush;
  if (!a.json_path.empty()) {
    absl::Status s = WriteJson(a.json_path, report);
    if (!s.ok()) {
      err << "bench: " << s.message() << "\n";
      return kExitFailed;
    }
  }
  if (report.run.errors > 0 || report.verify.mismatches > 0) return kExitFailed;
  return 0;
}

}  // namespace msgr::bench

#include "client/bench/bench_args.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <tuple>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "osd_sim/mon/cli_flags.h"

// Every spelling of the bench's command line (bench_args.h), set by mon::ParseFlags and read
// back by ParseBenchArgs (which checks them and restores the defaults). -b and -t are short
// names of --object-size and --concurrency. The help is BenchUsage().
ABSL_FLAG(std::string, mode, "write", "write|seq|rand");
ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT");
ABSL_FLAG(std::string, ms_type, "tcp", "tcp|rdma");
ABSL_FLAG(std::string, ms_mode, "", "crc|secure");
ABSL_FLAG(std::string, object_size, "4M", "-b: object size (4K, 64K, 4M ...)");
ABSL_FLAG(int, concurrency, 16, "-t: ops in flight");
ABSL_FLAG(double, seconds, 10, "run time (0: until --count)");
ABSL_FLAG(uint64_t, count, 0, "objects (0: no limit)");
ABSL_FLAG(std::string, json, "", "results file");
ABSL_FLAG(std::string, acked_log, "", "acknowledged object ids file");
ABSL_FLAG(bool, verify, false, "read back every written object");
ABSL_FLAG(std::string, auth, "", "secret|none (or, the old spelling, the keyring FILE)");
ABSL_FLAG(std::string, keyring, "", "the cluster secret");
ABSL_FLAG(std::string, prefix, "", "object id prefix");
ABSL_FLAG(std::string, osd_pids, "", "OSD pids, as 10,11");
ABSL_FLAG(std::string, cluster_dir, "", "a tools/cluster.sh directory");
ABSL_FLAG(std::string, conf, "", "config file");
ABSL_FLAG(std::string, oids, "", "verify: object ids file");
ABSL_FLAG(double, op_timeout, 30, "per-op timeout, seconds");
ABSL_FLAG(double, mon_timeout, 10, "monitor timeout, seconds");
ABSL_FLAG(std::string, rdma_device, "", "soft|IBDEV");
ABSL_FLAG(int, ms_threads, 0, "messenger worker threads (0: the client's default)");
ABSL_FLAG(int, spin_us, 0, "poll for a completion this long before sleeping");
ABSL_FLAG(int, submit_threads, -1, "threads issuing writes (-1: by object size)");
ABSL_FLAG(uint64_t, max_objects, 0, "op n writes object n mod N (0: every op a new one)");
ABSL_FLAG(int, clients, 1, "client instances in this process");
ABSL_FLAG(bool, quiet, false, "no per-second progress lines");
ABSL_FLAG(std::string, pool, "", "the pool (default: 'default')");

namespace msgr::bench {
namespace {

constexpr uint64_t kMaxObjectSize = 1ull << 30;
constexpr int kMaxConcurrency = 4096;
constexpr int kMaxSpinUs = 1000000;
constexpr int kMaxClients = 1000;

absl::Status Bad(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
}

absl::StatusOr<double> Seconds(absl::string_view flag, double d, bool allow_zero) {
  if (!std::isfinite(d) || d < 0 || (!allow_zero && d == 0)) {
    return Bad(flag, absl::StrCat("'", d, "' is not a ", allow_zero ? "non-negative" : "positive",
                                  " number of seconds"));
  }
  return d;
}

bool ValidHostPort(const std::string& s) {
  size_t colon = s.rfind(':');
  int port;
  return colon != std::string::npos && colon > 0 &&
         absl::SimpleAtoi(s.substr(colon + 1), &port) && port > 0 && port < 65536;
}

}  // namespace

absl::StatusOr<uint64_t> ParseSize(absl::string_view s) {
  std::string t = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(s));
  for (const char* suffix : {"IB", "B"}) {
    if (t.size() > 1 && absl::EndsWith(t, suffix)) {
      t.resize(t.size() - absl::string_view(suffix).size());
      break;
    }
  }
  uint64_t mult = 1;
  if (!t.empty()) {
    switch (t.back()) {
      case 'K': mult = 1ull << 10; break;
      case 'M': mult = 1ull << 20; break;
      case 'G': mult = 1ull << 30; break;
      default: break;
    }
    if (mult != 1) t.pop_back();
  }
  uint64_t n;
  if (t.empty() || !std::all_of(t.begin(), t.end(), ::isdigit) || !absl::SimpleAtoi(t, &n) ||
      n == 0 || n > kMaxObjectSize / mult) {
    return absl::InvalidArgumentError(
        absl::StrCat("'", s, "' is not a size between 1 and 1G (e.g. 4K, 64K, 4M)"));
  }
  return n * mult;
}

absl::StatusOr<BenchArgs> ParseBenchArgs(const std::vector<std::string>& in) {
  // The flags are process globals: each call starts from their defaults, so that tests
  // (and BenchMain) may parse many command lines.
  mon::ResetFlagsDefinedIn(__FILE__);
  mon::FlagParseOptions options;
  options.short_names = {{"b", "object_size"}, {"t", "concurrency"}};
  options.unknown_as_argument = true;
  auto flags = mon::ParseFlags(in, options);
  if (!flags.ok()) return flags.status();
  const mon::ParsedFlags& f = *flags;

  BenchArgs a;
  const std::vector<std::string>& words = f.positional();
  for (size_t i = 0; i < words.size(); ++i) {
    // `verify` is a subcommand only as the first argument (BenchMain puts a config file's
    // settings after it).
    if (i == 0 && words[0] == "verify" && in[0] == "verify") {
      a.mode = BenchArgs::Mode::kVerify;
      continue;
    }
    return absl::InvalidArgumentError(absl::StrCat("unknown argument '", words[i], "'"));
  }
  a.help = f.help();
  if (f.Given("mode")) {
    const std::string mode = absl::GetFlag(FLAGS_mode);
    if (a.mode == BenchArgs::Mode::kVerify) return Bad("--mode", "not with the verify subcommand");
    if (mode == "write") {
      a.mode = BenchArgs::Mode::kWrite;
    } else if (mode == "seq") {
      a.mode = BenchArgs::Mode::kSeq;
    } else if (mode == "rand") {
      a.mode = BenchArgs::Mode::kRand;
    } else {
      return Bad("--mode", absl::StrCat("'", mode, "' is not write, seq or rand"));
    }
  }
  a.mon = absl::GetFlag(FLAGS_mon);
  if (f.Given("mon") && !ValidHostPort(a.mon)) {
    return Bad("--mon", absl::StrCat("'", a.mon, "' is not HOST:PORT"));
  }
  a.ms_type = absl::GetFlag(FLAGS_ms_type);
  if (a.ms_type.empty() || !std::all_of(a.ms_type.begin(), a.ms_type.end(),
                                        [](char c) { return std::islower(c) || c == '_'; })) {
    return Bad("--ms-type", "must be tcp or rdma");
  }
  if (f.Given("object-size")) {
    auto n = ParseSize(absl::GetFlag(FLAGS_object_size));
    if (!n.ok()) return Bad("-b", n.status().message());
    a.object_size = *n;
    a.object_size_given = true;
  }
  a.concurrency = absl::GetFlag(FLAGS_concurrency);
  if (a.concurrency < 1 || a.concurrency > kMaxConcurrency) {
    return Bad("-t", absl::StrCat("'", a.concurrency, "' is not a concurrency in 1..",
                                  kMaxConcurrency));
  }
  auto seconds = Seconds("--seconds", absl::GetFlag(FLAGS_seconds), /*allow_zero=*/true);
  if (!seconds.ok()) return seconds.status();
  a.seconds = *seconds;
  a.ms_threads = absl::GetFlag(FLAGS_ms_threads);
  if (f.Given("ms-threads") && (a.ms_threads < 1 || a.ms_threads > 64)) {
    return Bad("--ms-threads", absl::StrCat("'", a.ms_threads, "' is not a thread count in 1..64"));
  }
  a.clients = absl::GetFlag(FLAGS_clients);
  if (a.clients < 1 || a.clients > kMaxClients) {
    return Bad("--clients",
               absl::StrCat("'", a.clients, "' is not a client count in 1..", kMaxClients));
  }
  a.max_objects = absl::GetFlag(FLAGS_max_objects);
  if (f.Given("max-objects") && a.max_objects == 0) {
    return Bad("--max-objects", "'0' is not a positive object count");
  }
  a.submit_threads = absl::GetFlag(FLAGS_submit_threads);
  if (f.Given("submit-threads") && (a.submit_threads < 0 || a.submit_threads > 64)) {
    return Bad("--submit-threads",
               absl::StrCat("'", a.submit_threads, "' is not a thread count in 0..64"));
  }
  a.spin_us = absl::GetFlag(FLAGS_spin_us);
  if (a.spin_us < 0 || a.spin_us > kMaxSpinUs) {
    return Bad("--spin-us", absl::StrCat("'", a.spin_us,
                                         "' is not a number of microseconds in 0..", kMaxSpinUs));
  }
  a.count = absl::GetFlag(FLAGS_count);
  if (f.Given("count") && a.count == 0) return Bad("--count", "'0' is not a positive count");
  for (absl::string_view p :
       absl::StrSplit(absl::GetFlag(FLAGS_osd_pids), ',', absl::SkipEmpty())) {
    int pid;
    if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
      return Bad("--osd-pids", absl::StrCat("'", p, "' is not a pid"));
    }
    a.osd_pids.push_back(pid);
  }
  auto op_timeout = Seconds("--op-timeout", absl::GetFlag(FLAGS_op_timeout), false);
  if (!op_timeout.ok()) return op_timeout.status();
  a.op_timeout = *op_timeout;
  auto mon_timeout = Seconds("--mon-timeout", absl::GetFlag(FLAGS_mon_timeout), false);
  if (!mon_timeout.ok()) return mon_timeout.status();
  a.mon_timeout = *mon_timeout;
  using StringFlag = std::tuple<const char*, absl::Flag<std::string>*, std::string*>;
  for (const auto& [name, flag, out] : std::vector<StringFlag>{
           {"json", &FLAGS_json, &a.json_path},
           {"acked-log", &FLAGS_acked_log, &a.acked_log},
           {"keyring", &FLAGS_keyring, &a.keyring},
           {"prefix", &FLAGS_prefix, &a.prefix},
           {"cluster-dir", &FLAGS_cluster_dir, &a.cluster_dir},
           {"oids", &FLAGS_oids, &a.oids_file},
           {"rdma-device", &FLAGS_rdma_device, &a.rdma_device},
           {"ms-mode", &FLAGS_ms_mode, &a.ms_mode},
           {"conf", &FLAGS_conf, &a.conf},
           {"pool", &FLAGS_pool, &a.pool},
           {"auth", &FLAGS_auth, &a.auth}}) {
    *out = absl::GetFlag(*flag);
    if (f.Given(name) && out->empty()) {
      return Bad(absl::StrCat("--", name), "needs a non-empty value");
    }
  }
  // `--auth FILE`, the old spelling of --keyring FILE (the later of the two wins).
  if (!a.auth.empty() && a.auth != "secret" && a.auth != "none") {
    if (f.GivenAt("auth") > f.GivenAt("keyring")) a.keyring = a.auth;
    a.auth = "secret";
  }
  a.verify = absl::GetFlag(FLAGS_verify);
  a.quiet = absl::GetFlag(FLAGS_quiet);
  const bool seconds_given = f.Given("seconds");

  if (a.help) return a;
  if (a.mon.empty() && a.cluster_dir.empty()) {
    return absl::InvalidArgumentError("--mon HOST:PORT (or --cluster-dir DIR) is required");
  }
  if (!a.keyring.empty()) {
    if (a.auth == "none") return Bad("--auth", "none contradicts --keyring (or --auth FILE)");
    a.auth = "secret";
  }
  if (a.auth == "secret" && a.keyring.empty() && a.cluster_dir.empty()) {
    return Bad("--auth", "secret needs --keyring FILE or --cluster-dir DIR (for DIR/keyring)");
  }
  if (a.mode == BenchArgs::Mode::kVerify) {
    if (a.oids_file.empty()) return absl::InvalidArgumentError("verify: --oids FILE is required");
    if (a.verify || !a.acked_log.empty() || a.count > 0 || seconds_given) {
      return absl::InvalidArgumentError(
          "verify takes --mon, --ms-type, --oids, -b, --pool, --json, -t and connection flags "
          "only");
    }
  } else {
    if (!a.oids_file.empty()) return Bad("--oids", "only with the verify subcommand");
    if (a.mode != BenchArgs::Mode::kWrite &&
        (a.verify || !a.acked_log.empty() || a.max_objects > 0)) {
      return Bad(a.verify ? "--verify" : !a.acked_log.empty() ? "--acked-log" : "--max-objects",
                 "only with --mode write (seq and rand check each reply's size)");
    }
    if (a.seconds == 0 && a.count == 0) {
      return Bad("--seconds", "0 means 'until --count objects': give --count N too");
    }
  }
  return a;
}

const std::set<std::string>& BenchConfKeys() {
  static const auto* const kKeys = new std::set<std::string>{
      "mon",         "ms-type",    "ms-mode",     "auth",       "keyring", "cluster-dir",
      "rdma-device", "op-timeout", "mon-timeout", "ms-threads", "spin-us", "submit-threads"};
  return *kKeys;
}

std::string BenchUsage() {
  return R"(usage:
  bench.sh --mon HOST:PORT [--ms-type tcp|rdma] [-b SIZE] [-t CONCURRENCY] [--seconds S]
           [--count N] [--json FILE] [--acked-log FILE] [--verify] [--auth secret|none]
           [--keyring FILE] [--prefix P] [--osd-pids PID,...] [--cluster-dir DIR] [--spin-us US]
           [--submit-threads N] [--max-objects N] [--clients N] [--pool NAME]
  bench.sh verify --mon HOST:PORT [--ms-type tcp|rdma] --oids FILE [-b SIZE] [--pool NAME]
           [--json FILE] [-t N]
  bench.sh --mode seq|rand --mon HOST:PORT [--prefix P] [-t N] [--seconds S] [--count N] ...

Writes objects of SIZE bytes (4K, 64K, 4M ...; default 4M) for S seconds (default 10) or
until N objects, like `rados bench write`: one thread keeps CONCURRENCY asynchronous writes
in flight (default 16; reads for verify), timing each from submission to its callback.
Every --flag takes --flag VALUE or --flag=VALUE.
  --ms-type        messenger backend (default tcp)
  --pool NAME      the pool to write (or read, verify) (default: the pool 'default';
                   monctl pool ls); an unknown pool is exit 2, naming the pools there are
  --json FILE      results with stable field names
  --acked-log FILE append each object id once it is acknowledged
  --verify         read back every written object afterwards and check its pattern
  --auth secret|none  authenticate with the cluster secret, or not (default: secret when
                   DIR/keyring of --cluster-dir DIR is readable, else none)
  --keyring FILE   the cluster secret (default DIR/keyring); implies --auth secret.
                   --auth FILE is its old spelling
  --prefix P       object ids are P_0, P_1, ... (default benchmark_data_<host>_<pid>)
  --osd-pids, --cluster-dir   OSD processes to measure CPU for (DIR/osd.*.pid); with
                   --cluster-dir, also their perf dumps (DIR/run/osd.*.asok) for the
                   spin, crc and copy figures (n/a without, with a line on stderr saying why)
  --op-timeout S   per-op timeout (default 30)   --mon-timeout S  (default 10)
  --ms-mode crc|secure  tcp frames checked (crc) or encrypted (AES-GCM); default the
                   cluster's (its msgr.conf), else crc
  --conf FILE      defaults for --mon, --ms-type, --ms-mode, --auth, --keyring, --rdma-device,
                   --op-timeout ... from FILE's [global] and [client] (default: --cluster-dir
                   DIR's msgr.conf, if there); the command line overrides them
  --rdma-device    soft|IBDEV for --ms-type rdma  --ms-threads N  messenger worker threads
  --spin-us US     poll up to US microseconds for a completion before sleeping (default 0
                   = never spin). Saves a futex wake-up per wait when a core is idle; on
                   busy cores it starves the messenger and OSDs (docs/BENCHMARKS.md)
  --max-objects N  op n writes object n mod N (overwrites): bounds what a memory-mode OSD
                   holds in RAM during long runs (default: every op a new object)
  --clients N      N client instances in this process (each its own messenger and OSD
                   sessions), the ops spread over them in turn (default 1); all connect
                   to every OSD first, and the time that took is reported (connect_s)
  --submit-threads N  threads that issue the writes (default 2 for objects of 256 KiB and
                   up, else 0 = the driver thread itself): a send copies the object on the
                   calling thread, so one thread serializes large writes
  --quiet          no per-second progress lines
  --mode write|seq|rand  write (default); or read what write runs left, as `rados bench
                   seq|rand`: the objects whose id starts with --prefix (default
                   benchmark_data_, every run's), listed from the OSDs first; seq reads each
                   once in id order (stopping at --seconds or --count if sooner), rand reads
                   random ones until --seconds or --count. Each reply's size is checked
The summary and --json report, besides throughput and latency: CPU-s per GiB written
(client, OSDs); CPU us per op (client, OSDs, OSDs busy = less the pollers' empty spin);
the OSDs' CPU-s per GiB by thread role (transport: ms-tcp-io, ms-rdma-cq, ms-rdma-disp,
soft-hca; crc: the pollers' record crc32c check; poller: the rest of osd-poller-N, of it
spin; store: store-io, store-flush; other: every other thread); payload copies per byte
written (client sends, OSD wire receives, OSD store). JSON field names: README.md.
verify reads back every object id listed in FILE (one per line) and checks its pattern,
and with -b SIZE its size too (an older version of another size counts as bad).
Exit status: 0 ok, 1 failed ops, mismatches or setup errors, 2 bad arguments.
)";
}

}  // namespace msgr::bench

#include "client/bench/bench_args.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <map>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace msgr::bench {
namespace {

constexpr uint64_t kMaxObjectSize = 1ull << 30;
constexpr int kMaxConcurrency = 4096;
constexpr int kMaxSpinUs = 1000000;
constexpr int kMaxClients = 1000;

absl::Status Bad(absl::string_view flag, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(flag, ": ", why));
}

absl::StatusOr<double> Seconds(absl::string_view flag, const std::string& v, bool allow_zero) {
  double d;
  if (!absl::SimpleAtod(v, &d) || !std::isfinite(d) || d < 0 || (!allow_zero && d == 0)) {
    return Bad(flag, absl::StrCat("'", v, "' is not a ", allow_zero ? "non-negative" : "positive",
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
  BenchArgs a;
  size_t i = 0;
  if (!in.empty() && in[0] == "verify") {
    a.mode = BenchArgs::Mode::kVerify;
    i = 1;
  }
  bool seconds_given = false;
  for (; i < in.size(); ++i) {
    std::string flag = in[i], value;
    bool has_inline = false;
    if (absl::StartsWith(flag, "--") && flag.find('=') != std::string::npos) {
      value = flag.substr(flag.find('=') + 1);
      flag = flag.substr(0, flag.find('='));
      has_inline = true;
    }
    if (flag == "-h" || flag == "--help") {
      a.help = true;
      continue;
    }
    if (flag == "--verify" || flag == "--quiet") {
      if (has_inline) return Bad(flag, "takes no value");
      (flag == "--verify" ? a.verify : a.quiet) = true;
      continue;
    }
    static const char* kWithValue[] = {
        "--mon", "--ms-type", "-b", "-t", "--seconds", "--count", "--json", "--acked-log",
        "--auth", "--keyring", "--prefix", "--osd-pids", "--cluster-dir", "--oids", "--op-timeout",
        "--mon-timeout", "--rdma-device", "--ms-threads", "--spin-us", "--submit-threads", "--max-objects",
        "--clients", "--mode", "--ms-mode", "--conf", "--pool"};
    if (std::find(std::begin(kWithValue), std::end(kWithValue), flag) == std::end(kWithValue)) {
      return absl::InvalidArgumentError(absl::StrCat("unknown argument '", in[i], "'"));
    }
    if (!has_inline) {
      if (i + 1 >= in.size()) return Bad(flag, "needs a value");
      value = in[++i];
    }
    if (flag == "--mode") {
      if (a.mode == BenchArgs::Mode::kVerify) return Bad(flag, "not with the verify subcommand");
      if (value == "write") {
        a.mode = BenchArgs::Mode::kWrite;
      } else if (value == "seq") {
        a.mode = BenchArgs::Mode::kSeq;
      } else if (value == "rand") {
        a.mode = BenchArgs::Mode::kRand;
      } else {
        return Bad(flag, absl::StrCat("'", value, "' is not write, seq or rand"));
      }
    } else if (flag == "--mon") {
      if (!ValidHostPort(value)) return Bad(flag, absl::StrCat("'", value, "' is not HOST:PORT"));
      a.mon = value;
    } else if (flag == "--ms-type") {
      if (value.empty() || !std::all_of(value.begin(), value.end(),
                                        [](char c) { return std::islower(c) || c == '_'; })) {
        return Bad(flag, "must be tcp or rdma");
      }
      a.ms_type = value;
    } else if (flag == "-b") {
      auto n = ParseSize(value);
      if (!n.ok()) return Bad(flag, n.status().message());
      a.object_size = *n;
      a.object_size_given = true;
    } else if (flag == "-t") {
      if (!absl::SimpleAtoi(value, &a.concurrency) || a.concurrency < 1 ||
          a.concurrency > kMaxConcurrency) {
        return Bad(flag, absl::StrCat("'", value, "' is not a concurrency in 1..", kMaxConcurrency));
      }
    } else if (flag == "--seconds") {
      auto s = Seconds(flag, value, /*allow_zero=*/true);
      if (!s.ok()) return s.status();
      a.seconds = *s;
      seconds_given = true;
    } else if (flag == "--ms-threads") {
      if (!absl::SimpleAtoi(value, &a.ms_threads) || a.ms_threads < 1 || a.ms_threads > 64) {
        return Bad(flag, absl::StrCat("'", value, "' is not a thread count in 1..64"));
      }
    } else if (flag == "--clients") {
      if (!absl::SimpleAtoi(value, &a.clients) || a.clients < 1 || a.clients > kMaxClients) {
        return Bad(flag, absl::StrCat("'", value, "' is not a client count in 1..", kMaxClients));
      }
    } else if (flag == "--max-objects") {
      if (!absl::SimpleAtoi(value, &a.max_objects) || a.max_objects == 0) {
        return Bad(flag, absl::StrCat("'", value, "' is not a positive object count"));
      }
    } else if (flag == "--submit-threads") {
      if (!absl::SimpleAtoi(value, &a.submit_threads) || a.submit_threads < 0 ||
          a.submit_threads > 64) {
        return Bad(flag, absl::StrCat("'", value, "' is not a thread count in 0..64"));
      }
    } else if (flag == "--spin-us") {
      if (!absl::SimpleAtoi(value, &a.spin_us) || a.spin_us < 0 || a.spin_us > kMaxSpinUs) {
        return Bad(flag, absl::StrCat("'", value, "' is not a number of microseconds in 0..",
                                      kMaxSpinUs));
      }
    } else if (flag == "--count") {
      if (!absl::SimpleAtoi(value, &a.count) || a.count == 0) {
        return Bad(flag, absl::StrCat("'", value, "' is not a positive count"));
      }
    } else if (flag == "--osd-pids") {
      for (absl::string_view p : absl::StrSplit(value, ',', absl::SkipEmpty())) {
        int pid;
        if (!absl::SimpleAtoi(p, &pid) || pid <= 0) {
          return Bad(flag, absl::StrCat("'", p, "' is not a pid"));
        }
        a.osd_pids.push_back(pid);
      }
    } else if (flag == "--auth") {
      if (value.empty()) return Bad(flag, "needs a non-empty value");
      if (value == "secret" || value == "none") {
        a.auth = value;
      } else {  // the old spelling of --keyring FILE
        a.auth = "secret";
        a.keyring = value;
      }
    } else if (flag == "--op-timeout" || flag == "--mon-timeout") {
      auto s = Seconds(flag, value, /*allow_zero=*/false);
      if (!s.ok()) return s.status();
      (flag == "--op-timeout" ? a.op_timeout : a.mon_timeout) = *s;
    } else {
      if (value.empty()) return Bad(flag, "needs a non-empty value");
      std::map<std::string, std::string*> strings = {
          {"--json", &a.json_path},     {"--acked-log", &a.acked_log},
          {"--keyring", &a.keyring},    {"--prefix", &a.prefix},
          {"--cluster-dir", &a.cluster_dir}, {"--oids", &a.oids_file},
          {"--rdma-device", &a.rdma_device}, {"--ms-mode", &a.ms_mode},
          {"--conf", &a.conf},          {"--pool", &a.pool}};
      *strings.at(flag) = value;
    }
  }
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

// Command line of the object-write benchmark (tools/bench.sh, //client/bench:bench).
//
//   bench --mon HOST:PORT [--ms-type tcp|rdma] [-b SIZE] [-t CONCURRENCY] [--seconds S]
//         [--count N] [--json FILE] [--acked-log FILE] [--verify] [--auth secret|none]
//         [--keyring FILE] [--prefix P] [--osd-pids PID,...] [--cluster-dir DIR] [--op-timeout S]
//         [--mon-timeout S] [--rdma-device soft|IBDEV] [--ms-threads N] [--spin-us US]
//         [--submit-threads N] [--max-objects N] [--quiet] [--conf FILE]
//   bench verify --mon HOST:PORT [--ms-type tcp|rdma] --oids FILE [--json FILE] [-t N] ...
//   bench --mode seq|rand --mon HOST:PORT [--prefix P] [-t N] [--seconds S] ...
//         (reads of what a write run left, as `rados bench seq|rand`)
//
// The flags are Abseil flags set by the shared parser of osd_sim/mon/cli_flags.h (our own
// loop, not absl::ParseCommandLine, which exits on errors and wants underscores): -b and -t
// are short names of --object-size and --concurrency; bools take `--verify`,
// `--verify=true|false` and `--noverify`. Parsing does no I/O: errors are INVALID_ARGUMENT
// with a message naming the flag; the caller prints it with Usage() and exits 2.
#ifndef MSGR_CLIENT_BENCH_BENCH_ARGS_H_
#define MSGR_CLIENT_BENCH_BENCH_ARGS_H_

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace msgr::bench {

struct BenchArgs {
  // kSeq: read every object of the prefix once, in order (or until --seconds);
  // kRand: read random ones of them for --seconds. Both read what a write run left.
  enum class Mode { kWrite, kVerify, kSeq, kRand };
  Mode mode = Mode::kWrite;
  bool help = false;
  std::string mon;                   // required
  std::string ms_type = "tcp";
  std::string ms_mode;  // crc | secure; empty: --cluster-dir's MS_MODE, else crc
  uint64_t object_size = 4u << 20;   // -b
  bool object_size_given = false;    // -b was given (verify then checks each object's size)
  std::string pool;                  // --pool NAME ("": the default pool)
  int concurrency = 16;              // -t
  double seconds = 10;               // 0 = until --count objects
  uint64_t count = 0;                // 0 = no limit
  std::string json_path;
  std::string acked_log;
  bool verify = false;
  // --auth: "secret" (the cluster secret: --keyring FILE, else DIR/keyring of --cluster-dir),
  // "none", or "" (not given: secret when DIR/keyring is readable, else none).
  std::string auth;
  // --keyring FILE (implies --auth secret). `--auth FILE`, the old spelling, lands here too.
  std::string keyring;
  std::string prefix;                // "" = benchmark_data_<host>_<pid>
  std::vector<int> osd_pids;
  std::string cluster_dir;
  std::string conf;                  // --conf FILE (BenchMain put its settings first)
  std::string oids_file;             // verify mode
  double op_timeout = 30;
  double mon_timeout = 10;
  std::string rdma_device;
  int ms_threads = 0;                // messenger worker threads (0 = the client's default)
  bool quiet = false;                // no per-second progress lines
  // How long the driver thread polls for a completion before sleeping (0 = never spin).
  // Same default as kDefaultSpin (async_driver.h).
  int spin_us = 0;
  int submit_threads = -1;   // -1: DefaultSubmitThreads(object_size)
  uint64_t max_objects = 0;  // 0: every op writes a new object
  int clients = 1;           // --clients: Client instances in this process, ops round-robin

  // How many ops each client instance keeps in flight: -t spread over --clients (ops go
  // to them in turn), rounded up. Each client tells its OSDs (ClientOptions::queue_depth).
  int OpsPerClient() const {
    const int n = clients < 1 ? 1 : clients;
    return (concurrency + n - 1) / n;
  }
};

// "4096", "4K", "4k", "64KiB", "4M", "4MB", "1G": binary multiples. Must be > 0.
absl::StatusOr<uint64_t> ParseSize(absl::string_view s);

// `args` excludes the program name. Sets the bench's flags (from their defaults, each
// call) and reads them back: callable many times in one process, though not from two
// threads at once.
absl::StatusOr<BenchArgs> ParseBenchArgs(const std::vector<std::string>& args);

std::string BenchUsage();

// The flags a config file's [global] and [client] may set for the bench (its connection
// settings; osd_sim/mon/cluster_conf.h). BenchMain puts them before the command line's.
const std::set<std::string>& BenchConfKeys();

}  // namespace msgr::bench

#endif  // MSGR_CLIENT_BENCH_BENCH_ARGS_H_

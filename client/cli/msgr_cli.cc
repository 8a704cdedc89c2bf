// //client/cli:msgr — the object CLI, like `rados put/get/stat/rm/ls` (run via tools/msgr.sh).
//
//   msgr [--cluster-dir DIR | --mon HOST:PORT [--keyring FILE]] [--ms-type tcp|rdma]
//        [--ms-mode crc|secure] [--conf FILE]
//        put OID FILE|-  |  get OID FILE|-  |  stat OID  |  rm OID  |  ls [--prefix P] [--long]
//        |  scrub
//
// put reads FILE (or stdin) whole and writes it as one object (atomically: the old version
// or the new one, never a mix); get reads it back in ranges of --chunk-mb (a reply is
// capped by the messenger's max_message_bytes), so objects of any size work both ways. On a
// terminal, objects of 16 MiB or more get a progress bar on stderr.
//
// Exit codes (for scripts): 0 ok; 1 any other failure; 2 bad usage; 3 no such object;
// 4 cluster unreachable (the monitor did not answer, or an OSD did not within --timeout);
// 5 scrub found copies that are missing or differ.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/cluster_options.h"
#include "client/cli/progress.h"
#include "client/client.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, cluster_dir, "",
          "a tools/cluster.sh cluster directory: DIR/mon.addr, DIR/keyring, DIR/msgr.conf");
ABSL_FLAG(std::string, conf, "",
          "settings from FILE's [global] and [client] (default: DIR/msgr.conf); flags win");
ABSL_FLAG(std::string, ms_mode, "", "crc|secure (default: the cluster's, else crc)");
ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT (default: DIR/mon.addr)");
ABSL_FLAG(std::string, keyring, "", "cluster secret (default: DIR/keyring if it exists)");
ABSL_FLAG(std::string, ms_type, "",
          "messenger backend tcp|rdma (default: rdma for a cluster started --ms-type rdma, "
          "else tcp)");
ABSL_FLAG(std::string, rdma_device, "", "soft|IBDEV for --ms-type rdma");
ABSL_FLAG(std::string, pool, "", "pool name (default: the pool 'default'; monctl pool ls)");
ABSL_FLAG(std::string, prefix, "", "ls: only objects whose name starts with this");
ABSL_FLAG(bool, long, false, "ls: print each object's size too");
ABSL_FLAG(int, chunk_mb, 16, "get: bytes per read request, in MiB");
ABSL_FLAG(int, timeout, 30, "seconds an operation may wait for its OSD");
ABSL_FLAG(int, mon_timeout, 10, "seconds to wait for the monitor");
ABSL_FLAG(bool, progress, true, "a progress bar on a terminal for objects of 16 MiB or more");

namespace msgr::cli {
namespace {

enum Exit {
  kOk = 0,
  kFailed = 1,
  kUsage = 2,
  kNoSuchObject = 3,
  kUnreachable = 4,
  kInconsistent = 5,
};

constexpr uint64_t kProgressMinBytes = 16ull << 20;

const char kUsageText[] =
    "usage: msgr [--cluster-dir DIR | --mon HOST:PORT [--keyring FILE]] [--ms-type tcp|rdma]\n"
    "            [--conf FILE]   (settings from FILE, default DIR/msgr.conf; flags win)\n"
    "            [--pool NAME]   (default: the pool 'default'; monctl pool ls)\n"
    "            put OID FILE|-     write FILE (- = stdin) as object OID, replacing it\n"
    "            get OID FILE|-     read object OID into FILE (- = stdout)\n"
    "            stat OID           print the object's size\n"
    "            rm OID             delete the object\n"
    "            ls [--prefix P] [--long]   list objects (sorted)\n"
    "            scrub              compare every object's copies (size, crc32c) on the up\n"
    "                               OSDs with the placement map; on a quiet cluster\n"
    "exit codes: 0 ok, 1 failed, 2 bad usage, 3 no such object, 4 cluster unreachable,\n"
    "            5 scrub found missing or differing copies\n"
    "every flag: msgr --helpfull\n";

int Fail(int code, const std::string& msg) {
  std::cerr << "msgr: " << msg << "\n";
  return code;
}

int ExitFor(const absl::Status& s) {
  if (absl::IsNotFound(s)) return kNoSuchObject;
  if (absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s)) return kUnreachable;
  return kFailed;
}

// "read of OID on osd.1: object 'OID' not found" -> "no such object: OID".
int FailOp(const absl::Status& s, const std::string& oid) {
  if (absl::IsNotFound(s)) return Fail(kNoSuchObject, "no such object: " + oid);
  return Fail(ExitFor(s), std::string(s.message()));
}

bool IsTerminal(FILE* f) { return isatty(fileno(f)) == 1; }

int Put(client::Client& c, const std::string& oid, const std::string& path) {
  auto data = std::make_shared<std::string>();
  if (path == "-") {
    data->assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    std::ifstream f(path, std::ios::binary);
    if (!f) return Fail(kFailed, absl::StrCat("cannot read ", path, ": ", std::strerror(errno)));
    data->assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    if (f.bad()) return Fail(kFailed, absl::StrCat("error reading ", path));
  }
  const uint64_t total = data->size();
  // The write is one op; its progress is what the messenger has sent of this client's
  // records (acknowledged ones trail it by at most a ring).
  const uint64_t sent0 = c.messenger_counters().record_bytes_sent;
  Progress bar(std::cerr, "put " + oid, total,
               absl::GetFlag(FLAGS_progress) && total >= kProgressMinBytes && IsTerminal(stderr));
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done.load()) {
      bar.Update(c.messenger_counters().record_bytes_sent - sent0);
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  });
  absl::Status s = c.Write(oid, std::shared_ptr<const std::string>(std::move(data)));
  done = true;
  watcher.join();
  if (!s.ok()) return FailOp(s, oid);
  bar.Update(total);
  bar.Finish();
  return kOk;
}

int Get(client::Client& c, const std::string& oid, const std::string& path) {
  auto size = c.Stat(oid);
  if (!size.ok()) return FailOp(size.status(), oid);
  std::ofstream file;
  std::ostream* out = &std::cout;
  if (path != "-") {
    file.open(path, std::ios::binary | std::ios::trunc);
    if (!file) return Fail(kFailed, absl::StrCat("cannot write ", path, ": ", std::strerror(errno)));
    out = &file;
  }
  const uint64_t chunk = static_cast<uint64_t>(std::max(1, absl::GetFlag(FLAGS_chunk_mb))) << 20;
  Progress bar(std::cerr, "get " + oid, *size,
               absl::GetFlag(FLAGS_progress) && *size >= kProgressMinBytes && IsTerminal(stderr));
  uint64_t off = 0;
  while (off < *size) {
    auto part = c.Read(oid, off, chunk);
    if (!part.ok()) return FailOp(part.status(), oid);
    if (part->empty()) {
      return Fail(kFailed, absl::StrCat(oid, " shrank to ", off, " bytes while being read (it was ",
                                        *size, "): try again"));
    }
    out->write(part->data(), static_cast<std::streamsize>(part->size()));
    if (!*out) return Fail(kFailed, absl::StrCat("error writing ", path == "-" ? "stdout" : path));
    off += part->size();
    bar.Update(off);
  }
  out->flush();
  if (!*out) return Fail(kFailed, absl::StrCat("error writing ", path == "-" ? "stdout" : path));
  bar.Finish();
  return kOk;
}

int Run(const std::vector<std::string>& args) {
  if (args.empty()) return Fail(kUsage, std::string("no command\n") + kUsageText);
  const std::string& cmd = args[0];
  auto need = [&](size_t n) { return args.size() == n + 1; };
  if (!((cmd == "put" || cmd == "get") ? need(2) : (cmd == "stat" || cmd == "rm") ? need(1)
                                                   : cmd == "ls" || cmd == "scrub"   ? need(0)
                                                                                     : false)) {
    return Fail(kUsage, absl::StrCat("bad command line for '", cmd, "'\n", kUsageText));
  }

  ClusterFlags cf;
  cf.cluster_dir = absl::GetFlag(FLAGS_cluster_dir);
  cf.mon = absl::GetFlag(FLAGS_mon);
  cf.keyring = absl::GetFlag(FLAGS_keyring);
  cf.ms_type = absl::GetFlag(FLAGS_ms_type);
  cf.rdma_device = absl::GetFlag(FLAGS_rdma_device);
  cf.ms_mode = absl::GetFlag(FLAGS_ms_mode);
  auto options = ClientOptionsFor(cf);
  if (!options.ok()) {
    if (absl::IsUnavailable(options.status())) {
      return Fail(kUnreachable, absl::StrCat("cluster unreachable: ", options.status().message()));
    }
    return Fail(kUsage, std::string(options.status().message()));
  }
  client::ClientOptions co = *options;
  co.pool = absl::GetFlag(FLAGS_pool);
  co.op_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_timeout)));
  co.mon_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_mon_timeout)));
  auto client = client::Client::Create(co);
  // A pool the map does not have is a bad argument (exit 2), named with those it has.
  if (!client.ok() && absl::IsNotFound(client.status())) {
    return Fail(kUsage, std::string(client.status().message()));
  }
  if (!client.ok()) {
    return Fail(ExitFor(client.status()), absl::StrCat("cluster unreachable at ", co.mon_addr, ": ",
                                                       client.status().message()));
  }
  client::Client& c = **client;

  if (cmd == "put") return Put(c, args[1], args[2]);
  if (cmd == "get") return Get(c, args[1], args[2]);
  if (cmd == "stat") {
    auto size = c.Stat(args[1]);
    if (!size.ok()) return FailOp(size.status(), args[1]);
    std::cout << args[1] << " size " << *size << "\n";
    return kOk;
  }
  if (cmd == "rm") {
    absl::Status s = c.Delete(args[1]);
    return s.ok() ? kOk : FailOp(s, args[1]);
  }
  if (cmd == "scrub") {
    auto r = c.Scrub();
    if (!r.ok()) return Fail(ExitFor(r.status()), std::string(r.status().message()));
    for (const std::string& p : r->problems) std::cout << p << "\n";
    std::cout << "scrub: " << r->objects << " objects, " << r->copies << " copies, "
              << r->missing << " missing, " << r->mismatched << " differing, " << r->stray
              << " stray" << (r->clean() ? " (clean)" : "") << "\n";
    std::cout.flush();
    return r->clean() ? kOk : kInconsistent;
  }
  auto list = c.List(absl::GetFlag(FLAGS_prefix));
  if (!list.ok()) return Fail(ExitFor(list.status()), std::string(list.status().message()));
  const bool long_form = absl::GetFlag(FLAGS_long);
  for (const auto& o : *list) {
    if (long_form) {
      std::cout << o.oid << "\t" << o.size << "\n";
    } else {
      std::cout << o.oid << "\n";
    }
  }
  std::cout.flush();
  return std::cout ? kOk : kFailed;
}

}  // namespace
}  // namespace msgr::cli

int main(int argc, char** argv) {
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  spdlog::set_default_logger(spdlog::stderr_color_mt("msgr"));
  spdlog::set_level(spdlog::level::warn);
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help" || a == "help") {
      std::cout << msgr::cli::kUsageText;
      return msgr::cli::kOk;
    }
  }
  absl::SetProgramUsageMessage(msgr::cli::kUsageText);
  // What a config file may set here: [client] settings this tool has a flag for.
  auto args = msgr::cli::ParseDashedFlagsWithConf(
      argc, argv,
      {"mon", "keyring", "ms-type", "ms-mode", "rdma-device", "cluster-dir", "timeout",
       "mon-timeout", "chunk-mb"});
  if (!args.ok()) {
    return msgr::cli::Fail(msgr::cli::kUsage,
                           absl::StrCat(args.status().message(), "\n", msgr::cli::kUsageText));
  }
  return msgr::cli::Run(*args);
}

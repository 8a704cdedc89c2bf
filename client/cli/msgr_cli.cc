// //client/cli:msgr — the object CLI, like `rados put/get/stat/rm/ls` (run via tools/msgr.sh).
//
//   msgr [--cluster-dir DIR | --mon HOST:PORT [--keyring FILE]] [--ms-type tcp|rdma]
//        put OID FILE|-  |  get OID FILE|-  |  stat OID  |  rm OID  |  ls [--prefix P] [--long]
//
// put reads FILE (or stdin) whole and writes it as one object (atomically: the old version
// or the new one, never a mix); get reads it back in ranges of --chunk-mb (a reply is
// capped by the messenger's max_message_bytes), so objects of any size work both ways. On a
// terminal, objects of 16 MiB or more get a progress bar on stderr.
//
// Exit codes (for scripts): 0 ok; 1 any other failure; 2 bad usage; 3 no such object;
// 4 cluster unreachable (the monitor did not answer, or an OSD did not within --timeout).
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
#include <string_view>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "absl/synchronization/mutex.h"
#include "client/cli/progress.h"
#include "client/client.h"
#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/spdlog.h"

ABSL_FLAG(std::string, cluster_dir, "",
          "a tools/cluster.sh cluster directory: DIR/mon.addr, DIR/keyring, DIR/cluster.conf");
ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT (default: DIR/mon.addr)");
ABSL_FLAG(std::string, keyring, "", "cluster secret (default: DIR/keyring if it exists)");
ABSL_FLAG(std::string, ms_type, "",
          "messenger backend tcp|rdma (default: rdma for a cluster started --ms-type rdma, "
          "else tcp)");
ABSL_FLAG(std::string, rdma_device, "", "soft|IBDEV for --ms-type rdma");
ABSL_FLAG(std::string, pool, "", "pool name (only the default pool exists so far)");
ABSL_FLAG(std::string, prefix, "", "ls: only objects whose name starts with this");
ABSL_FLAG(bool, long, false, "ls: print each object's size too");
ABSL_FLAG(int, chunk_mb, 16, "get: bytes per read request, in MiB");
ABSL_FLAG(int, timeout, 30, "seconds an operation may wait for its OSD");
ABSL_FLAG(int, mon_timeout, 10, "seconds to wait for the monitor");
ABSL_FLAG(bool, progress, true, "a progress bar on a terminal for objects of 16 MiB or more");

namespace msgr::cli {
namespace {

enum Exit { kOk = 0, kFailed = 1, kUsage = 2, kNoSuchObject = 3, kUnreachable = 4 };

constexpr uint64_t kProgressMinBytes = 16ull << 20;

const char kUsageText[] =
    "usage: msgr [--cluster-dir DIR | --mon HOST:PORT [--keyring FILE]] [--ms-type tcp|rdma]\n"
    "            put OID FILE|-     write FILE (- = stdin) as object OID, replacing it\n"
    "            get OID FILE|-     read object OID into FILE (- = stdout)\n"
    "            stat OID           print the object's size\n"
    "            rm OID             delete the object\n"
    "            ls [--prefix P] [--long]   list objects (sorted)\n"
    "exit codes: 0 ok, 1 failed, 2 bad usage, 3 no such object, 4 cluster unreachable\n"
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

bool ReadSmallFile(const std::string& path, std::string* out) {
  std::ifstream f(path);
  if (!f) return false;
  std::getline(f, *out);
  return true;
}

// KEY=VALUE (or KEY="VALUE") in DIR/cluster.conf, as tools/cluster.sh start writes it.
std::string ClusterConf(const std::string& dir, absl::string_view key) {
  std::ifstream f(dir + "/cluster.conf");
  std::string line;
  while (std::getline(f, line)) {
    absl::string_view v = line;
    if (absl::ConsumePrefix(&v, key) && absl::ConsumePrefix(&v, "=")) {
      v = absl::StripAsciiWhitespace(v);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
  }
  return "";
}

// Refuses what absl::ParseCommandLine would exit(1) for, with the usage exit code.
bool UnknownFlag(int argc, char** argv, std::string* name) {
  for (int i = 1; i < argc; ++i) {
    absl::string_view a = argv[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || a == "-") continue;
    a = absl::StripPrefix(absl::StripPrefix(a, "-"), "-");
    a = a.substr(0, a.find('='));
    std::string flag(a);
    if (absl::FindCommandLineFlag(flag) == nullptr &&
        !(absl::ConsumePrefix(&a, "no") && absl::FindCommandLineFlag(std::string(a)) != nullptr)) {
      *name = flag;
      return true;
    }
  }
  return false;
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
                                                   : cmd == "ls"                     ? need(0)
                                                                                     : false)) {
    return Fail(kUsage, absl::StrCat("bad command line for '", cmd, "'\n", kUsageText));
  }
  const std::string pool = absl::GetFlag(FLAGS_pool);
  if (!pool.empty() && pool != "default") {
    return Fail(kUsage, absl::StrCat("no pool '", pool,
                                     "': this cluster has only the pool 'default' (pools with a "
                                     "size come with replication)"));
  }

  const std::string dir = absl::GetFlag(FLAGS_cluster_dir);
  client::ClientOptions co;
  co.mon_addr = absl::GetFlag(FLAGS_mon);
  if (co.mon_addr.empty() && !dir.empty() && !ReadSmallFile(dir + "/mon.addr", &co.mon_addr)) {
    return Fail(kUnreachable, absl::StrCat("cluster unreachable: no ", dir,
                                           "/mon.addr (is the cluster started? tools/cluster.sh "
                                           "status --cluster-dir ", dir, ")"));
  }
  if (co.mon_addr.empty()) return Fail(kUsage, "pass --cluster-dir DIR or --mon HOST:PORT");
  co.ms_type = absl::GetFlag(FLAGS_ms_type);
  if (co.ms_type.empty()) co.ms_type = !dir.empty() && ClusterConf(dir, "MS_TYPE") == "rdma" ? "rdma" : "tcp";
  if (co.ms_type != "tcp" && co.ms_type != "rdma") {
    return Fail(kUsage, "--ms-type must be tcp or rdma, not " + co.ms_type);
  }
  std::string device = absl::GetFlag(FLAGS_rdma_device);
  if (device.empty() && !dir.empty()) device = ClusterConf(dir, "RDMA_DEVICE");
  if (!device.empty()) co.backend_options["rdma_device"] = device;
  std::string keyring = absl::GetFlag(FLAGS_keyring);
  if (keyring.empty() && !dir.empty() && access((dir + "/keyring").c_str(), R_OK) == 0) {
    keyring = dir + "/keyring";
  }
  if (!keyring.empty()) {
    auto auth = AuthConfig::FromKeyringFile(keyring);
    if (!auth.ok()) return Fail(kUsage, absl::StrCat("keyring ", keyring, ": ", auth.status().message()));
    co.auth = *auth;
  }
  co.op_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_timeout)));
  co.mon_timeout = absl::Seconds(std::max(1, absl::GetFlag(FLAGS_mon_timeout)));
  auto client = client::Client::Create(co);
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
  // Flags are spelled with dashes (--cluster-dir), as in the other tools; Abseil names them
  // with underscores.
  std::vector<std::string> norm(argv, argv + argc);
  for (size_t i = 1; i < norm.size(); ++i) {
    std::string& a = norm[i];
    if (a == "--") break;
    if (a.size() < 3 || a[0] != '-') continue;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + 2, a.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
  }
  std::vector<char*> nargv;
  for (std::string& a : norm) nargv.push_back(a.data());
  nargv.push_back(nullptr);
  argv = nargv.data();
  if (std::string flag; msgr::cli::UnknownFlag(argc, argv, &flag)) {
    std::replace(flag.begin(), flag.end(), '_', '-');
    return msgr::cli::Fail(msgr::cli::kUsage,
                           absl::StrCat("unknown flag --", flag, "\n", msgr::cli::kUsageText));
  }
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  std::vector<std::string> args(rest.begin() + 1, rest.end());
  return msgr::cli::Run(args);
}

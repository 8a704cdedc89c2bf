// `monctl`: operator commands against a running monitor.
//
//   monctl --mon HOST:PORT [--timeout-ms 5000] status | out ID | in ID | map-json
//   monctl --mon HOST:PORT [--wait-s 30] wait ID up|down   (follows WatchMap)
//   monctl --mon HOST:PORT pool create NAME [--size N] [--min-size M] [--pg-num P] | pool ls
//   monctl --mon HOST:PORT [--wait-s 30] blocklist [add] ENTITY [--instance HEX]
//          [--expire-s S] | blocklist rm ENTITY [--instance HEX] | blocklist ls
//   [--cluster-dir DIR] [--auth none|secret] [--entity client.admin] [--conf FILE] with any
//   command
//   (DIR: a tools/cluster.sh directory; its mon.addr and, when it has one, its PKI)
//
// Exit status: 0 done, 1 the monitor refused or is unreachable (message on stderr),
// 2 bad usage.
#include <unistd.h>

#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <set>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "osd_sim/mon/cli_flags.h"
#include "osd_sim/mon/cluster_conf.h"
#include "osd_sim/mon/control_auth.h"
#include "msg/base/file_util.h"
#include "osd_sim/mon/map_format.h"
#include "osd_sim/mon/mon_client.h"
#include "spdlog/spdlog.h"

// Flags with dashes on the command line (osd_sim/mon/cli_flags.h); kConfKeys below may also
// come from the config file. kUsage is the help.
ABSL_FLAG(std::string, mon, "", "monitor HOST:PORT (default DIR/mon.addr)");
ABSL_FLAG(uint64_t, timeout_ms, 5000, "give up on an unreachable monitor after N ms");
ABSL_FLAG(uint64_t, wait_s, 30, "wait and blocklist: seconds to wait");
ABSL_FLAG(std::string, auth, "", "none|secret (default: secret when DIR has a PKI)");
ABSL_FLAG(std::string, cluster_dir, "", "a tools/cluster.sh directory");
ABSL_FLAG(std::string, entity, msgr::mon::kAdminEntity, "whose certificate to use");
ABSL_FLAG(std::string, conf, "", "config file");
ABSL_FLAG(uint64_t, size, 0, "pool create: copies of each object");
ABSL_FLAG(uint64_t, min_size, 0, "pool create: copies a write needs");
ABSL_FLAG(uint64_t, pg_num, 0, "pool create: placement groups");
ABSL_FLAG(std::string, instance, "", "blocklist: the hex instance");
ABSL_FLAG(uint64_t, expire_s, 0, "blocklist: seconds the entry lasts (0: the monitor's)");

namespace {

constexpr char kUsage[] =
    "usage: monctl {--mon HOST:PORT | --cluster-dir DIR} [--timeout-ms N]\n"
    "              [--auth none|secret] [--entity NAME] [--conf FILE] COMMAND\n"
    "  status      the cluster map as a table\n"
    "  map-json    the cluster map as JSON (epoch, pg_num, fsid, osds[...])\n"
    "  out ID      mark osd ID out (its PGs move to other OSDs)\n"
    "  in ID       mark osd ID in\n"
    "  wait ID up|down   follow the map (WatchMap) until osd ID is up / down;\n"
    "              prints the epoch; exit 1 after --wait-s seconds (default 30)\n"
    "  pool create NAME [--size N] [--min-size M] [--pg-num P]\n"
    "              a new pool: N copies of each object (default 1), a write acknowledged\n"
    "              with M copies (default N - N/2), P PGs (default the map's pg_num);\n"
    "              needs client.admin\n"
    "  pool ls     the pools: id, name, size, min_size, pg_num\n"
    "  blocklist [add] ENTITY [--instance HEX] [--expire-s S]\n"
    "              fence client.N or osd.N (one incarnation with --instance, as dump_sessions\n"
    "              shows it; else every one) for S seconds (default 3600): every OSD closes\n"
    "              its sessions, revokes its rings' keys and refuses it. Returns once every\n"
    "              up OSD reported the new epoch applied (exit 1 after --wait-s, default 30,\n"
    "              naming those that did not); needs client.admin\n"
    "  blocklist rm ENTITY [--instance HEX]   lift an entry\n"
    "  blocklist ls  the entries: entity, instance, epoch, expiry, reason\n"
    "  --timeout-ms N   give up on an unreachable monitor after N ms (default 5000)\n"
    "  --cluster-dir DIR   a tools/cluster.sh directory: the monitor at DIR/mon.addr (unless\n"
    "                      --mon), and with --auth secret DIR/pki/ca.crt, ENTITY.crt, .key\n"
    "  --auth none|secret  none: no TLS; secret: mutual TLS with the cluster PKI (default:\n"
    "                      secret when DIR/pki/ca.crt exists, else none)\n"
    "  --entity NAME       whose certificate to use (default client.admin; out/in need it)\n"
    "  --conf FILE         settings (mon, timeout-ms, auth, entity ...) from FILE's [global]\n"
    "                      and [client] (default DIR/msgr.conf, if there); flags win\n";

int Usage(const std::string& why) {
  std::cerr << "monctl: " << why << "\n" << kUsage;
  return 2;
}

int Error(const absl::Status& s) {
  std::cerr << "monctl: " << s.message() << "\n";
  return 1;
}

// Follows WatchMap until osd `id` is in the wanted state (it need not exist yet).
int WaitFor(msgr::mon::MonClient* client, uint32_t id, bool want_up, absl::Duration limit) {
  std::mutex mu;
  std::condition_variable cv;
  uint64_t epoch = 0;
  absl::Status s = client->Watch([&](const msgr::mon::v1::ClusterMap& map) {
    for (const auto& o : map.osds()) {
      if (o.id() == id && o.up() == want_up) {
        std::lock_guard<std::mutex> l(mu);
        epoch = map.epoch();
        cv.notify_all();
      }
    }
  });
  if (!s.ok()) return Error(s);
  std::unique_lock<std::mutex> l(mu);
  if (!cv.wait_for(l, absl::ToChronoMilliseconds(limit), [&] { return epoch != 0; })) {
    std::cerr << "monctl: osd." << id << " not " << (want_up ? "up" : "down") << " after "
              << absl::FormatDuration(limit) << "\n";
    return 1;
  }
  std::cout << "osd." << id << " " << (want_up ? "up" : "down") << " at epoch " << epoch << "\n";
  return 0;
}

// `pool create NAME [--size N] [--min-size M] [--pg-num P]` and `pool ls`.
int PoolCommand(const msgr::mon::ParsedFlags& flags, const std::string& mon,
                absl::Duration timeout, const msgr::mon::ControlAuth& auth) {
  const std::vector<std::string>& args = flags.positional();
  const bool create = args.size() == 3 && args[1] == "create";
  const bool ls = args.size() == 2 && args[1] == "ls";
  if (!create && !ls) return Usage("pool wants 'create NAME' or 'ls'");
  msgr::mon::v1::CreatePoolRequest req;
  if (create) {
    req.set_name(args[2]);
    for (const auto& [f, v] : {std::pair<const char*, uint64_t>{"size", absl::GetFlag(FLAGS_size)},
                               {"min-size", absl::GetFlag(FLAGS_min_size)},
                               {"pg-num", absl::GetFlag(FLAGS_pg_num)}}) {
      if (v > UINT32_MAX) return Usage(absl::StrCat("--", f, " is too large"));
      if (flags.Has(f) && v == 0) return Usage(absl::StrCat("--", f, " must be at least 1"));
    }
    req.set_size(static_cast<uint32_t>(absl::GetFlag(FLAGS_size)));
    req.set_min_size(static_cast<uint32_t>(absl::GetFlag(FLAGS_min_size)));
    req.set_pg_num(static_cast<uint32_t>(absl::GetFlag(FLAGS_pg_num)));
  } else if (flags.Has("size") || flags.Has("min-size") || flags.Has("pg-num")) {
    return Usage("pool ls takes no --size, --min-size or --pg-num");
  }
  auto client = msgr::mon::MonClient::Create(mon, timeout, auth);
  if (!client.ok()) return Error(client.status());
  if (ls) {
    auto map = (*client)->GetMap();
    if (!map.ok()) return Error(map.status());
    std::cout << msgr::mon::PoolsToTable(*map);
    return 0;
  }
  auto reply = (*client)->CreatePool(req);
  if (!reply.ok()) return Error(reply.status());
  const auto& p = reply->pool();
  std::cout << "pool '" << p.name() << "' created: id " << p.id() << " size " << p.size()
            << " min_size " << p.min_size() << " pg_num " << p.pg_num() << ", epoch "
            << reply->epoch() << "\n";
  return 0;
}

// Polls GetMap until every up OSD reported (in its heartbeat) map epoch `epoch` applied.
int WaitApplied(msgr::mon::MonClient* client, uint64_t epoch, absl::Duration limit) {
  const absl::Time until = absl::Now() + limit;
  std::string behind;
  for (;;) {
    auto map = client->GetMap();
    if (!map.ok()) return Error(map.status());
    behind.clear();
    size_t up = 0;
    for (const auto& o : map->osds()) {
      if (!o.up()) continue;
      ++up;
      auto it = map->osd_applied_epochs().find(o.id());
      const uint64_t applied = it == map->osd_applied_epochs().end() ? 0 : it->second;
      if (applied < epoch) {
        absl::StrAppend(&behind, behind.empty() ? "" : ", ", "osd.", o.id(), " (at ", applied, ")");
      }
    }
    if (behind.empty()) {
      std::cout << "applied by every up OSD (" << up << ")\n";
      return 0;
    }
    if (absl::Now() >= until) {
      std::cerr << "monctl: epoch " << epoch << " not applied after " << absl::FormatDuration(limit)
                << " by " << behind
                << " (a down OSD applies the blocklist before it serves again)\n";
      return 1;
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
}

// `blocklist [add] ENTITY [--instance HEX] [--expire-s S]`, `blocklist rm ENTITY`, `ls`.
int BlocklistCommand(const msgr::mon::ParsedFlags& flags, const std::string& mon,
                     absl::Duration timeout, const msgr::mon::ControlAuth& auth) {
  std::vector<std::string> args = flags.positional();
  if (args.size() == 2 && args[1] != "ls") args.insert(args.begin() + 1, "add");
  const bool ls = args.size() == 2 && args[1] == "ls";
  const bool change = args.size() == 3 && (args[1] == "add" || args[1] == "rm");
  if (!ls && !change) return Usage("blocklist wants [add] ENTITY, rm ENTITY or ls");
  msgr::mon::v1::BlocklistRequest req;
  if (change) {
    req.set_entity(args[2]);
    req.set_remove(args[1] == "rm");
    if (flags.Has("instance")) {
      uint64_t instance = 0;
      if (!absl::SimpleHexAtoi(absl::GetFlag(FLAGS_instance), &instance) || instance == 0) {
        return Usage("--instance wants the hex instance that dump_sessions shows");
      }
      req.set_instance(instance);
    }
    if (req.remove() && flags.Has("expire-s")) return Usage("blocklist rm takes no --expire-s");
    req.set_expire_s(absl::GetFlag(FLAGS_expire_s));
  } else if (flags.Has("instance") || flags.Has("expire-s")) {
    return Usage("blocklist ls takes no --instance or --expire-s");
  }
  auto client = msgr::mon::MonClient::Create(mon, timeout, auth);
  if (!client.ok()) return Error(client.status());
  if (ls) {
    auto map = (*client)->GetMap();
    if (!map.ok()) return Error(map.status());
    std::cout << msgr::mon::BlocklistToTable(*map);
    return 0;
  }
  auto reply = (*client)->Blocklist(req);
  if (!reply.ok()) return Error(reply.status());
  std::cout << (req.remove() ? "un-blocklisted " : "blocklisted ") << req.entity();
  if (req.instance() != 0) std::cout << " instance " << absl::GetFlag(FLAGS_instance);
  std::cout << " at epoch " << reply->epoch() << "; ";
  std::cout.flush();
  return WaitApplied(client->get(), reply->epoch(),
                     absl::Seconds(absl::GetFlag(FLAGS_wait_s)));
}

}  // namespace

int main(int argc, char** argv) {
  spdlog::set_level(spdlog::level::off);  // errors are reported on stderr by us
  // What a config file's [global] and [client] may set here (cluster_conf.h).
  const std::set<std::string> kConfKeys = {"mon",  "timeout-ms",  "wait-s",
                                           "auth", "cluster-dir", "entity"};
  auto flags = msgr::mon::ParseFlags(argc, argv);
  if (!flags.ok()) return Usage(std::string(flags.status().message()));
  if (flags->help()) {
    std::fputs(kUsage, stdout);
    return 0;
  }
  {
    absl::Status applied = msgr::mon::ApplyConfSettings(&*flags, "client", "", kConfKeys);
    if (!applied.ok()) return Usage(std::string(applied.message()));
  }
  const std::string dir = absl::GetFlag(FLAGS_cluster_dir);
  std::string mon = absl::GetFlag(FLAGS_mon);
  if (mon.empty() && !dir.empty()) {
    auto addr = msgr::ReadFile(dir + "/mon.addr");
    if (!addr.ok() || absl::StripAsciiWhitespace(*addr).empty()) {
      return Error(absl::UnavailableError(absl::StrCat(
          "no ", dir, "/mon.addr (is the cluster started? tools/cluster.sh status --cluster-dir ",
          dir, ")")));
    }
    mon = std::string(absl::StripAsciiWhitespace(*addr));
  }
  if (mon.empty()) return Usage("--mon HOST:PORT or --cluster-dir DIR is required");
  const absl::Duration timeout =
      absl::Milliseconds(absl::GetFlag(FLAGS_timeout_ms));
  // A cluster directory with a PKI means a TLS monitor: use it unless told otherwise.
  const bool has_pki = !dir.empty() && access((dir + "/pki/ca.crt").c_str(), R_OK) == 0;
  auto auth = msgr::mon::ControlAuth::FromFlags(
      flags->Has("auth") ? absl::GetFlag(FLAGS_auth) : has_pki ? "secret" : "none", dir,
      absl::GetFlag(FLAGS_entity));
  if (!auth.ok()) {
    // A bad flag value is usage; a missing or wrong certificate file is a setup error.
    if (absl::IsInvalidArgument(auth.status())) return Usage(std::string(auth.status().message()));
    return Error(auth.status());
  }
  const std::vector<std::string>& args = flags->positional();
  if (args.empty()) return Usage("missing command");
  const std::string& cmd = args[0];
  const bool mark = cmd == "out" || cmd == "in";
  uint32_t id = 0;
  if (cmd == "wait") {
    if (args.size() != 3 || !absl::SimpleAtoi(args[1], &id) ||
        (args[2] != "up" && args[2] != "down")) {
      return Usage("wait wants an OSD id and up or down");
    }
    auto client = msgr::mon::MonClient::Create(mon, timeout, *auth);
    if (!client.ok()) return Error(client.status());
    return WaitFor(client->get(), id, args[2] == "up",
                   absl::Seconds(absl::GetFlag(FLAGS_wait_s)));
  }
  if (cmd == "pool") return PoolCommand(*flags, mon, timeout, *auth);
  if (cmd == "blocklist") return BlocklistCommand(*flags, mon, timeout, *auth);
  if (mark) {
    if (args.size() != 2 || !absl::SimpleAtoi(args[1], &id)) {
      return Usage(cmd + " wants one numeric OSD id");
    }
  } else if (cmd != "status" && cmd != "map-json") {
    return Usage("unknown command '" + cmd + "'");
  } else if (args.size() != 1) {
    return Usage(cmd + " takes no arguments");
  }

  auto client = msgr::mon::MonClient::Create(mon, timeout, *auth);
  if (!client.ok()) return Error(client.status());
  if (mark) {
    auto epoch = cmd == "out" ? (*client)->MarkOut(id) : (*client)->MarkIn(id);
    if (!epoch.ok()) return Error(epoch.status());
    std::cout << "marked osd." << id << " " << cmd << ", epoch " << *epoch << "\n";
    return 0;
  }
  auto map = (*client)->GetMap();
  if (!map.ok()) return Error(map.status());
  std::cout << (cmd == "status" ? msgr::mon::MapToTable(*map) : msgr::mon::MapToJson(*map));
  return 0;
}

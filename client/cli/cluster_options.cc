#include "client/cli/cluster_options.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "msg/entity_credentials.h"
#include "osd_sim/mon/cli_flags.h"
#include "osd_sim/mon/cluster_conf.h"

namespace msgr::cli {

namespace {

// --help, -h and --helpfull: the program's usage message, then every flag. Abseil's own help
// (absl::ParseCommandLine's) is not there: its parser exits on a bad flag.
[[noreturn]] void PrintHelpAndExit() {
  const absl::string_view usage = absl::ProgramUsageMessage();
  if (!absl::StartsWith(usage, "Warning: SetProgramUsageMessage() never called")) {
    std::cout << usage << (absl::EndsWith(usage, "\n") ? "" : "\n");
  }
  std::cout << "flags (dashes or underscores alike):\n" << mon::FlagsHelp();
  std::exit(0);
}

absl::StatusOr<mon::ParsedFlags> ParseOrHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const absl::string_view a = argv[i];
    if (a == "--") break;
    if (a == "--helpfull" || a == "-helpfull") PrintHelpAndExit();
  }
  auto flags = mon::ParseFlags(argc, argv);
  if (flags.ok() && flags->help()) PrintHelpAndExit();
  return flags;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ParseDashedFlags(int argc, char** argv) {
  auto flags = ParseOrHelp(argc, argv);
  if (!flags.ok()) return flags.status();
  return flags->positional();
}

absl::StatusOr<std::vector<std::string>> ParseDashedFlagsWithConf(
    int argc, char** argv, const std::set<std::string>& conf_keys) {
  auto flags = ParseOrHelp(argc, argv);
  if (!flags.ok()) return flags.status();
  // The binary defines --conf (and --cluster-dir, whose msgr.conf is the default file).
  absl::Status applied = mon::ApplyConfSettings(&*flags, "client", "", conf_keys);
  if (!applied.ok()) return applied;
  return flags->positional();
}

std::string ClusterConf(const std::string& dir, const std::string& key) {
  const std::string ini_key = mon::NormalizeConfKey(absl::AsciiStrToLower(key));
  const std::string ini = absl::StrCat(dir, "/", mon::kConfFileName);
  if (access(ini.c_str(), F_OK) == 0) {
    auto conf = mon::ClusterConf::Load(ini);
    if (!conf.ok()) return "";
    auto settings = conf->SettingsFor("client", "", mon::ConfKeysOf("client"));
    if (!settings.ok()) return "";
    auto it = settings->find(ini_key);
    return it == settings->end() ? "" : it->second;
  }
  std::string old_key = absl::AsciiStrToUpper(ini_key);  // ms-type -> MS_TYPE
  std::replace(old_key.begin(), old_key.end(), '-', '_');
  std::ifstream f(dir + "/cluster.conf");
  std::string line;
  while (std::getline(f, line)) {
    absl::string_view v = line;
    if (absl::ConsumePrefix(&v, old_key) && absl::ConsumePrefix(&v, "=")) {
      v = absl::StripAsciiWhitespace(v);
      if (v.size() >= 2 && v.front() == '"' && v.back() == '"') v = v.substr(1, v.size() - 2);
      return std::string(v);
    }
  }
  return "";
}

absl::StatusOr<std::string> MonAddrFromDir(const std::string& dir) {
  std::ifstream in(dir + "/mon.addr");
  std::string addr;
  if (!in || !std::getline(in, addr) || addr.empty()) {
    return absl::UnavailableError(absl::StrCat("no ", dir,
                                               "/mon.addr (is the cluster started? "
                                               "tools/cluster.sh status --cluster-dir ",
                                               dir, ")"));
  }
  return addr;
}

bool HasPki(const std::string& dir) { return EntityCredentials::ClusterDirHasPki(dir); }

absl::StatusOr<client::ClientOptions> ClientOptionsFor(const ClusterFlags& f) {
  client::ClientOptions co;
  const std::string& dir = f.cluster_dir;
  co.mon_addr = f.mon;
  if (co.mon_addr.empty() && !dir.empty()) {
    auto addr = MonAddrFromDir(dir);
    if (!addr.ok()) return addr.status();
    co.mon_addr = *addr;
  }
  if (co.mon_addr.empty()) return absl::InvalidArgumentError("pass --cluster-dir DIR or --mon HOST:PORT");
  co.ms_type = f.ms_type;
  if (co.ms_type.empty()) {
    co.ms_type = !dir.empty() && ClusterConf(dir, "MS_TYPE") == "rdma" ? "rdma" : "tcp";
  }
  if (co.ms_type != "tcp" && co.ms_type != "rdma") {
    return absl::InvalidArgumentError("--ms-type must be tcp or rdma, not " + co.ms_type);
  }
  co.ms_mode = f.ms_mode;
  if (co.ms_mode.empty() && !dir.empty()) co.ms_mode = ClusterConf(dir, "MS_MODE");
  if (co.ms_mode.empty()) co.ms_mode = "crc";
  std::string device = f.rdma_device;
  if (device.empty() && !dir.empty()) device = ClusterConf(dir, "RDMA_DEVICE");
  if (!device.empty()) co.backend_options["rdma_device"] = device;
  std::string keyring = f.keyring;
  if (keyring.empty() && !dir.empty() && access((dir + "/keyring").c_str(), R_OK) == 0) {
    keyring = dir + "/keyring";
  }
  if (!keyring.empty()) {
    auto auth = AuthConfig::FromKeyringFile(keyring);
    if (!auth.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("keyring ", keyring, ": ", auth.status().message()));
    }
    co.auth = *auth;
  }
  // A cluster directory with a PKI means a monitor that wants mutual TLS and OSDs that
  // want the entity proven: both with the same certificate.
  if (!dir.empty() && HasPki(dir) && !keyring.empty()) {
    co.mon_pki_dir = dir;
    co.mon_entity = f.entity.empty() ? "client.admin" : f.entity;
    auto entity = EntityCredentials::FromClusterDir(dir, co.mon_entity);
    if (!entity.ok()) return entity.status();
    co.auth.entity = *entity;
  }
  return co;
}

}  // namespace msgr::cli

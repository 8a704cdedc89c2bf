#include "client/cli/cluster_options.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>

#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "msg/entity_credentials.h"
#include "osd_sim/mon/cluster_conf.h"

namespace msgr::cli {

absl::StatusOr<std::vector<std::string>> ParseDashedFlags(int argc, char** argv) {
  std::vector<std::string> norm(argv, argv + argc);
  for (size_t i = 1; i < norm.size(); ++i) {
    std::string& a = norm[i];
    if (a == "--") break;
    if (a.size() < 2 || a[0] != '-' || a == "-") continue;
    const size_t dashes = a[1] == '-' ? 2 : 1;
    const size_t end = std::min(a.find('='), a.size());
    std::replace(a.begin() + static_cast<std::ptrdiff_t>(dashes),
                 a.begin() + static_cast<std::ptrdiff_t>(end), '-', '_');
    absl::string_view name = absl::string_view(a).substr(dashes, end - dashes);
    const bool known = absl::FindCommandLineFlag(name) != nullptr ||
                       (absl::ConsumePrefix(&name, "no") &&
                        absl::FindCommandLineFlag(name) != nullptr);
    if (!known) {
      std::string shown = a.substr(0, end);
      std::replace(shown.begin(), shown.end(), '_', '-');
      return absl::InvalidArgumentError(absl::StrCat("unknown flag ", shown));
    }
  }
  std::vector<char*> nargv;
  for (std::string& a : norm) nargv.push_back(a.data());
  nargv.push_back(nullptr);
  std::vector<char*> rest = absl::ParseCommandLine(argc, nargv.data());
  return std::vector<std::string>(rest.begin() + 1, rest.end());
}

absl::StatusOr<std::vector<std::string>> ParseDashedFlagsWithConf(
    int argc, char** argv, const std::set<std::string>& conf_keys) {
  auto args = mon::WithConfSettings(std::vector<std::string>(argv, argv + argc), 1, "client",
                                    conf_keys);
  if (!args.ok()) return args.status();
  std::vector<char*> nargv;
  for (std::string& a : *args) nargv.push_back(a.data());
  nargv.push_back(nullptr);
  return ParseDashedFlags(static_cast<int>(args->size()), nargv.data());
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

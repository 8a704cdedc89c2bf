#include "osd_sim/mon/cluster_conf.h"

#include "osd_sim/mon/cli_flags.h"

#include <unistd.h>

#include <cstdint>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "msg/base/file_util.h"

namespace msgr::mon {
namespace {

// The text of a line before its comment: from a `#` or `;` at the start, or after a blank,
// outside double quotes.
absl::string_view StripComment(absl::string_view line) {
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') quoted = !quoted;
    if (!quoted && (c == '#' || c == ';') && (i == 0 || absl::ascii_isblank(line[i - 1]))) {
      return line.substr(0, i);
    }
  }
  return line;
}

// "global", "mon", "osd", "client", or "osd.K" with K a number (as "osd.7"); "" otherwise.
std::string SectionName(absl::string_view s) {
  s = absl::StripAsciiWhitespace(s);
  if (s == "global" || s == "mon" || s == "osd" || s == "client") return std::string(s);
  uint32_t id = 0;
  if (absl::ConsumePrefix(&s, "osd.") && !s.empty() &&
      s.find_first_not_of("0123456789") == absl::string_view::npos &&
      absl::SimpleAtoi(s, &id)) {
    return absl::StrCat("osd.", id);
  }
  return "";
}

}  // namespace

std::string NormalizeConfKey(absl::string_view key) {
  std::string out;
  bool sep = false;
  for (char c : absl::StripAsciiWhitespace(key)) {
    if (absl::ascii_isblank(c) || c == '_' || c == '-') {
      sep = true;
      continue;
    }
    if (sep && !out.empty()) out += '-';
    sep = false;
    out += c;
  }
  return out;
}

absl::StatusOr<ClusterConf> ClusterConf::Parse(absl::string_view text, absl::string_view file) {
  ClusterConf conf;
  conf.file_ = std::string(file);
  std::string section;
  int n = 0;
  for (absl::string_view raw : absl::StrSplit(text, '\n')) {
    ++n;
    auto bad = [&](absl::string_view why) {
      return absl::InvalidArgumentError(absl::StrCat(file, ":", n, ": ", why));
    };
    absl::string_view line = absl::StripAsciiWhitespace(StripComment(raw));
    if (line.empty()) continue;
    if (line.front() == '[') {
      if (line.back() != ']') return bad(absl::StrCat("no ']' closing section ", line));
      section = SectionName(line.substr(1, line.size() - 2));
      if (section.empty()) {
        return bad(absl::StrCat("unknown section ", line,
                                " (want [global], [mon], [osd], [osd.K] or [client])"));
      }
      conf.sections_[section];  // an empty section is still one
      continue;
    }
    const size_t eq = line.find('=');
    if (eq == absl::string_view::npos) return bad("no '=' in line");
    const std::string key = NormalizeConfKey(line.substr(0, eq));
    absl::string_view value = absl::StripAsciiWhitespace(line.substr(eq + 1));
    if (key.empty()) return bad("no key before '='");
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    if (value.empty()) return bad(absl::StrCat("'", key, "' has no value"));
    if (section.empty()) {
      return bad(absl::StrCat("'", key, "' before any section (start with [global])"));
    }
    auto [it, added] = conf.sections_[section].try_emplace(key, Entry{std::string(value), n});
    if (!added) {
      return bad(absl::StrCat("'", key, "' given twice in [", section, "] (first at line ",
                              it->second.line, ")"));
    }
  }
  return conf;
}

absl::StatusOr<ClusterConf> ClusterConf::Load(const std::string& path) {
  auto text = ReadFile(path);
  if (!text.ok()) {
    return absl::NotFoundError(absl::StrCat("cannot read ", path, ": ", text.status().message()));
  }
  return Parse(*text, path);
}

absl::StatusOr<std::map<std::string, std::string>> ClusterConf::SettingsFor(
    absl::string_view type, absl::string_view id, const std::set<std::string>& own_keys) const {
  std::vector<std::string> order = {"global", std::string(type)};
  if (!id.empty()) order.push_back(absl::StrCat(type, ".", id));
  std::map<std::string, std::string> out;
  for (const std::string& name : order) {
    auto s = sections_.find(name);
    if (s == sections_.end()) continue;
    for (const auto& [key, e] : s->second) {
      if (own_keys.count(key) != 0) {
        // A more specific section's address overrides a wider one's network, and back.
        for (const std::string& alt : AlternativeFlags(key)) out.erase(alt);
        out[key] = e.value;
        continue;
      }
      // Another kind of process's key in [global], or another client tool's in [client].
      bool others = false;
      for (const char* t : {"mon", "osd", "client"}) {
        if ((name == "global" || name == t) && ConfKeysOf(t).count(key) != 0) others = true;
      }
      if (!others) {
        return absl::InvalidArgumentError(absl::StrCat(
            file_, ":", e.line, ": unknown key '", key, "' in [", name, "]: not a setting of ",
            type, name == "global" ? " nor of any other process" : ""));
      }
    }
  }
  return out;
}

const std::set<std::string>& ConfKeysOf(absl::string_view type) {
  // The daemons' flags, but for --id, --conf and --help; the client tools' connection
  // settings (not what one run does: sizes, counts, output files).
  static const auto* const kOsd = new std::set<std::string>{
      "mon", "data-dir", "run-dir", "ms-type", "ms-mode", "durability", "pollers",
      "poller-cpus", "poller-spin-us", "poller-wakeup-us", "poller-notified-wakeup-us",
      "poller-nap-us",
      "poller-nap-rings", "poller-nap-depth", "poller-ack-spin-us", "ms-tcp-threads",
      "ring-bytes", "capacity",
      "store-commit-window-us", "store-zero-ahead-kb",
      "pg-log-entries",
      "keyring", "auth", "rdma-device", "weight", "rdma-max-registered-mb",
      "rdma-ring-min-kb", "metrics-addr", "metrics-addr-file", "op-complaint-time",
      "public-addr", "public-network", "rdma-port", "cluster-addr", "cluster-network", "host",
      "ms-cluster-type",
      "cluster-dir", "log-level"};
  static const auto* const kMon = new std::set<std::string>{
      "data-dir", "addr", "addr-file", "grace-ms", "heartbeat-ms", "pg-num", "pool-size",
      "pool-min-size", "down-out-ms", "metrics-addr", "metrics-addr-file", "auth",
      "cluster-dir", "entity"};
  static const auto* const kClient = new std::set<std::string>{
      // bench
      "mon", "ms-type", "ms-mode", "auth", "keyring", "cluster-dir", "rdma-device",
      "op-timeout", "mon-timeout", "ms-threads", "spin-us", "submit-threads",
      // msgr (the object CLI) and the thrasher's workload
      "timeout", "chunk-mb",
      // monctl
      "timeout-ms", "wait-s", "entity"};
  static const auto* const kNone = new std::set<std::string>;
  if (type == "osd") return *kOsd;
  if (type == "mon") return *kMon;
  if (type == "client") return *kClient;
  return *kNone;
}

std::string ConfPathFor(const std::string& conf_flag, const std::string& cluster_dir) {
  if (!conf_flag.empty()) return conf_flag;
  if (cluster_dir.empty()) return "";
  std::string path = absl::StrCat(cluster_dir, "/", kConfFileName);
  return access(path.c_str(), F_OK) == 0 ? path : "";
}

absl::StatusOr<std::map<std::string, std::string>> LoadSettings(
    const std::string& conf_flag, const std::string& cluster_dir, absl::string_view type,
    absl::string_view id, const std::set<std::string>& own_keys) {
  const std::string path = ConfPathFor(conf_flag, cluster_dir);
  if (path.empty()) return std::map<std::string, std::string>{};
  auto conf = ClusterConf::Load(path);
  if (!conf.ok()) return conf.status();
  return conf->SettingsFor(type, id, own_keys);
}

absl::Status ApplyConfSettings(ParsedFlags* flags, absl::string_view type, absl::string_view id,
                               const std::set<std::string>& own_keys) {
  auto settings =
      LoadSettings(FlagValueText("conf"), FlagValueText("cluster-dir"), type, id, own_keys);
  if (!settings.ok()) return settings.status();
  return flags->ApplyDefaults(*settings);
}

absl::StatusOr<std::vector<std::string>> WithConfSettings(const std::vector<std::string>& args,
                                                          size_t at, absl::string_view type,
                                                          const std::set<std::string>& own_keys) {
  std::string conf, cluster_dir;
  for (size_t i = 0; i < args.size(); ++i) {
    absl::string_view a = args[i];
    if (a == "--") break;
    if (!absl::ConsumePrefix(&a, "-")) continue;
    absl::ConsumePrefix(&a, "-");
    const size_t eq = a.find('=');
    const std::string name = NormalizeConfKey(a.substr(0, eq));
    std::string* out = name == "conf" ? &conf : name == "cluster-dir" ? &cluster_dir : nullptr;
    if (out == nullptr) continue;
    if (eq != absl::string_view::npos) {
      *out = std::string(a.substr(eq + 1));
    } else if (i + 1 < args.size()) {
      *out = args[++i];
    }
  }
  auto settings = LoadSettings(conf, cluster_dir, type, "", own_keys);
  if (!settings.ok()) return settings.status();
  std::vector<std::string> out(args.begin(), args.begin() + static_cast<std::ptrdiff_t>(
                                                               std::min(at, args.size())));
  for (const auto& [key, value] : *settings) out.push_back(absl::StrCat("--", key, "=", value));
  out.insert(out.end(), args.begin() + static_cast<std::ptrdiff_t>(std::min(at, args.size())),
             args.end());
  return out;
}

}  // namespace msgr::mon

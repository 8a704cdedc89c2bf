// msgr.conf: the cluster's settings in one INI file, as Ceph's ceph.conf, read by the
// daemons and tools themselves (tools/cluster.sh writes DIR/msgr.conf):
//
//   [global]             every process
//   auth = secret
//   ms mode = crc
//   [mon]                the monitor
//   grace-ms = 3000
//   [osd]                every OSD
//   durability = memory  ; a comment
//   [osd.2]              osd.2 only
//   poller_wakeup_us = 500
//   [client]             the client tools (bench, msgr, monctl, the thrasher's workload)
//   ms-type = rdma
//
// Keys are the long flag names: `ms-type`, `ms_type` and `ms type` are one key. A line
// whose first non-blank character is `#` or `;` is a comment, as is the rest of a line from
// a `#` or `;` after a blank. A value may be in double quotes.
// Precedence, for a process: its command line > [osd.K] > [osd] (or [mon], [client]) >
// [global] > the built-in default.
// A key a process does not take is an error naming the file, line and key, unless it is
// in a section for other processes, or in [global] or [client] and taken by another kind
// of process (ConfKeysOf): a typo is never silently ignored by every process.
//
// Thread-safety: a ClusterConf is an immutable value once made; the functions here keep
// no state.
#ifndef MSGR_OSD_SIM_MON_CLUSTER_CONF_H_
#define MSGR_OSD_SIM_MON_CLUSTER_CONF_H_

#include <cstddef>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "osd_sim/mon/cli_flags.h"

namespace msgr::mon {

// The config file of a tools/cluster.sh directory: DIR/msgr.conf.
inline constexpr char kConfFileName[] = "msgr.conf";

class ClusterConf {
 public:
  // An empty file (no settings).
  ClusterConf() = default;

  // `file` names the text in errors. INVALID_ARGUMENT "FILE:LINE: why" for a line with no
  // '=', a key with no value, a section other than [global], [mon], [osd], [osd.K],
  // [client], a key before any section, or a key given twice in one section.
  static absl::StatusOr<ClusterConf> Parse(absl::string_view text, absl::string_view file);
  // Parse of the file at `path`; NOT_FOUND "cannot read PATH: ..." when it cannot be read.
  static absl::StatusOr<ClusterConf> Load(const std::string& path);

  // The settings of one process: `type` is "mon", "osd" or "client", `id` the OSD's number
  // ("" for none). Key (dashed) -> value, [global] overridden by [TYPE], that by [TYPE.ID].
  // `own_keys`: the flags this process takes from a file. INVALID_ARGUMENT "FILE:LINE:
  // unknown key 'KEY' ..." for a key of those sections that it does not take and that no
  // other kind of process takes there either.
  absl::StatusOr<std::map<std::string, std::string>> SettingsFor(
      absl::string_view type, absl::string_view id, const std::set<std::string>& own_keys) const;

  const std::string& file() const { return file_; }

 private:
  struct Entry {
    std::string value;
    int line = 0;
  };
  std::string file_;
  std::map<std::string, std::map<std::string, Entry>> sections_;  // "osd.2" -> key -> entry
};

// A key as flags spell it: blanks and underscores become one dash ("ms type" -> "ms-type").
std::string NormalizeConfKey(absl::string_view key);

// The keys processes of `type` ("mon", "osd", "client": bench, msgr, monctl and the
// workload together) take from a file; empty for another type. One list, as Ceph's options
// table, so that a process can tell another's key in [global] from a typo.
const std::set<std::string>& ConfKeysOf(absl::string_view type);

// The config file a process reads: `conf_flag` (its --conf FILE) if given, else
// CLUSTER_DIR/msgr.conf when `cluster_dir` (its --cluster-dir) is given and that file
// exists, else none ("").
std::string ConfPathFor(const std::string& conf_flag, const std::string& cluster_dir);

// SettingsFor of the file ConfPathFor finds (none: no settings). --conf FILE that cannot
// be read is NOT_FOUND.
absl::StatusOr<std::map<std::string, std::string>> LoadSettings(
    const std::string& conf_flag, const std::string& cluster_dir, absl::string_view type,
    absl::string_view id, const std::set<std::string>& own_keys);

// The settings of the file that the binary's --conf and --cluster-dir flags (as parsed
// into `flags`) point to, applied to `flags` under the command line (ParsedFlags::
// ApplyDefaults): what the daemons and tools do right after parsing.
absl::Status ApplyConfSettings(ParsedFlags* flags, absl::string_view type, absl::string_view id,
                               const std::set<std::string>& own_keys);

// For parsers where the last of a repeated flag wins: `args` with the settings of its
// --conf FILE (or of its --cluster-dir DIR's msgr.conf) inserted at position `at` as
// `--key=value`, so that the command line overrides the file. --conf and --cluster-dir are
// found in `args` as `--name V`, `--name=V`, with one dash or two, `-` or `_` alike.
absl::StatusOr<std::vector<std::string>> WithConfSettings(const std::vector<std::string>& args,
                                                          size_t at, absl::string_view type,
                                                          const std::set<std::string>& own_keys);

}  // namespace msgr::mon

#endif  // MSGR_OSD_SIM_MON_CLUSTER_CONF_H_

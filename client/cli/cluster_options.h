// What the command-line clients (the object CLI, the thrasher's workload) share: Abseil
// flags spelled with dashes (the shared parser), and ClientOptions found from a
// tools/cluster.sh directory.
#ifndef MSGR_CLIENT_CLI_CLUSTER_OPTIONS_H_
#define MSGR_CLIENT_CLI_CLUSTER_OPTIONS_H_

#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "client/client.h"

namespace msgr::cli {

// Sets the binary's Abseil flags from argv with the parser every tool here shares
// (osd_sim/mon/cli_flags.h): --cluster-dir and --cluster_dir both work, `--flag value` and
// `--flag=value`. An unknown flag or a bad value is an error (INVALID_ARGUMENT naming it),
// not an exit, so that callers exit with their usage code. --help, -h and --helpfull print
// the program's usage message (absl::SetProgramUsageMessage) and every flag, and exit 0.
// Returns the positional arguments (without the program name).
absl::StatusOr<std::vector<std::string>> ParseDashedFlags(int argc, char** argv);

// ParseDashedFlags, then the settings of --conf FILE (or of --cluster-dir DIR's msgr.conf)
// that are among `conf_keys` for the flags the command line did not give (osd_sim/mon/
// cluster_conf.h: [global] and [client]). The binary defines --conf and --cluster-dir. A
// file that does not parse, or has a key no client takes, is INVALID_ARGUMENT
// "FILE:LINE: ...".
absl::StatusOr<std::vector<std::string>> ParseDashedFlagsWithConf(
    int argc, char** argv, const std::set<std::string>& conf_keys);

// A client setting of the cluster directory DIR: KEY ("ms-type", or the old "MS_TYPE")
// from DIR/msgr.conf's [client] or [global] (osd_sim/mon/cluster_conf.h); for a directory
// of an older tools/cluster.sh without one, KEY=VALUE (or KEY="VALUE") in DIR/cluster.conf.
// "" if absent (or if DIR/msgr.conf does not parse: the tools report that themselves).
std::string ClusterConf(const std::string& dir, const std::string& key);

// The monitor address in DIR/mon.addr; UNAVAILABLE "no DIR/mon.addr (is the cluster
// started? ...)" when there is none.
absl::StatusOr<std::string> MonAddrFromDir(const std::string& dir);
// True if DIR holds a cluster PKI (DIR/pki/ca.crt): its monitor wants mutual TLS.
bool HasPki(const std::string& dir);

struct ClusterFlags {
  // DIR: DIR/mon.addr, DIR/keyring, DIR/msgr.conf (or an older DIR/cluster.conf), DIR/pki
  // (monitor TLS, used with the keyring)
  std::string cluster_dir;
  std::string mon;          // HOST:PORT (default DIR/mon.addr)
  std::string keyring;      // default DIR/keyring if readable
  std::string ms_type;      // default: rdma for a cluster started --ms-type rdma, else tcp
  std::string rdma_device;  // default DIR's RDMA_DEVICE
  std::string entity;       // monitor TLS identity when DIR has a PKI (default client.admin)
  std::string ms_mode;      // crc | secure; default DIR's MS_MODE, else crc
};

// ClientOptions for a cluster: kUnavailable "no DIR/mon.addr (is the cluster started? ...)"
// when DIR has no monitor address; kInvalidArgument for a bad --ms-type, a missing
// --mon/--cluster-dir or an unreadable keyring.
absl::StatusOr<client::ClientOptions> ClientOptionsFor(const ClusterFlags& f);

}  // namespace msgr::cli

#endif  // MSGR_CLIENT_CLI_CLUSTER_OPTIONS_H_
